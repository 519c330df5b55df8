"""Fixtures of the contract suite: queues with an injected clock."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import jobvisor
from jobvisor import Queue
from tests.support.queue import Clock, MakeQueue


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def make_queue(url: str, connect_options: dict[str, Any]) -> Iterator[MakeQueue]:
    """`make_queue(**options)`: a migrated queue on `url`, closed after the test."""
    opened: list[Queue] = []

    def make(**options: Any) -> Queue:
        q = jobvisor.connect(url, **connect_options, **options)
        opened.append(q)
        q.migrate()
        return q

    yield make
    for q in opened:
        q.close()


@pytest.fixture
def cqueue(make_queue: MakeQueue, clock: Clock) -> Queue:
    """A migrated queue whose time is `clock` (tests move it with `clock.advance`)."""
    return make_queue(clock=clock)
