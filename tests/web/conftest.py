"""The dashboard served for real: uvicorn on an ephemeral port, on a loop in
a thread of its own, over a queue on the test's database (both engines);
the tests speak HTTP to it with a cookie-keeping client (tests/support/web.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from jobvisor import Queue
from jobvisor.web import app
from tests.support.web import TOKEN, Browser, serving


@pytest.fixture
def dashboard(queue: Queue, url: str) -> Iterator[Browser]:
    """The dashboard with the admin token set, and a client not logged in."""
    with serving(url, lambda q: app(q, admin_token=TOKEN)) as base:
        yield Browser(base)


@pytest.fixture
def read_only(queue: Queue, url: str) -> Iterator[Browser]:
    """The dashboard without a token."""
    with serving(url, app) as base:
        yield Browser(base)
