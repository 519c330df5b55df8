"""The supervision of a worker's loops, in process: whatever ends a loop
before a stop (an exception, or a plain return) stops the worker, marks it
unclean and reports the loop unhealthy. (`test_loop_faults` injects database
errors into real worker processes.)"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from jobvisor import AsyncQueue, Registry
from jobvisor.worker.loop import Worker
from jobvisor.worker.supervision import Loop
from tests.support.aio import run_with


async def raises() -> None:
    raise ValueError("a bug in a loop")


async def returns() -> None:
    return None


@pytest.mark.parametrize("body", [raises, returns], ids=["raises", "returns"])
def test_a_loop_that_ends_before_a_stop_stops_the_worker(
    aqueue: AsyncQueue, body: Callable[[], Awaitable[None]]
) -> None:
    async def supervise(q: AsyncQueue) -> Worker:
        worker = Worker(q, Registry(), worker_id="w-test", lease=5.0)
        assert not worker.stopping and worker.unhealthy == []
        await worker._supervise(Loop.RENEW, body())
        return worker

    worker = run_with(aqueue, supervise)
    assert worker.stopping
    assert worker.clean is False
    assert worker.failed_loop is Loop.RENEW
    assert worker.unhealthy == ["renew"]


def test_a_loop_that_ends_after_a_stop_is_no_failure(aqueue: AsyncQueue) -> None:
    async def supervise(q: AsyncQueue) -> Worker:
        worker = Worker(q, Registry(), worker_id="w-test", lease=5.0)
        worker.stop()
        await worker._supervise(Loop.CLAIM, returns())
        return worker

    worker = run_with(aqueue, supervise)
    assert worker.clean is True
    assert worker.failed_loop is None
    assert worker.unhealthy == []
