"""Fixtures of the supervisor tests: a factory of `jobvisor run` processes
(every one killed, with its workers, at the end) and a migrated queue on
PostgreSQL only, for the scenarios that need a server."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

import jobvisor
from jobvisor import Queue
from tests.support.service import Service, services


@pytest.fixture
def start_service() -> Iterator[Callable[..., Service]]:
    with services() as make:
        yield make


@pytest.fixture
def pg_queue(pg_url: str) -> Iterator[Queue]:
    q = jobvisor.connect(pg_url)
    try:
        q.migrate()
        yield q
    finally:
        q.close()
