"""The express claim: a worker whose slots are all busy with jobs of one
priority still starts a job of a higher priority at once, in the slot its
claim loop leaves free, and never runs more jobs than its concurrency."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import jobvisor
from jobvisor import JobContext, JobStatus, Registry
from jobvisor.worker.claiming import EXPRESS_MIN_CONCURRENCY
from jobvisor.worker.loop import Worker

DEADLINE = 30.0  # bound on every wait; never reached when things work
SLOTS = EXPRESS_MIN_CONCURRENCY


async def _count(q: jobvisor.AsyncQueue, status: JobStatus) -> int:
    return (await q.summary()).count(status)


async def _until(q: jobvisor.AsyncQueue, status: JobStatus, want: int) -> None:
    async with asyncio.timeout(DEADLINE):
        while True:  # the timeout ends a wait that lasts
            if await _count(q, status) == want:
                return
            await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def _worker(
    q: jobvisor.AsyncQueue, registry: Registry, blocked: int, worker_id: str, **options: Any
) -> AsyncIterator[Worker]:
    """A worker of `SLOTS` slots running on a queue of `blocked` jobs of
    the type "block"; stopped, and its run awaited, on leaving."""
    await q.migrate()
    await q.enqueue_many([{"job_type": "block"}] * blocked)
    worker = Worker(q, registry, worker_id=worker_id, concurrency=SLOTS, watch_parent=False,
                    **options)  # fmt: skip
    running = asyncio.create_task(worker.run())
    try:
        yield worker
    finally:
        worker.stop()
        await asyncio.wait_for(running, DEADLINE)


def _registry(
    release: asyncio.Event, started: list[str], high: asyncio.Event, *, urgent_blocks: bool = False
) -> Registry:
    registry = Registry()

    @registry.handler("block")
    async def block(job: JobContext) -> None:
        started.append("block")
        await release.wait()

    @registry.handler("urgent")
    async def urgent(job: JobContext) -> None:
        started.append("urgent")
        high.set()
        if urgent_blocks:
            await release.wait()

    return registry


def test_a_job_of_a_higher_priority_starts_while_every_slot_is_busy(pg_url: str) -> None:
    async def main() -> None:
        release, high = asyncio.Event(), asyncio.Event()
        started: list[str] = []
        registry = _registry(release, started, high)
        async with (
            jobvisor.connect_async(pg_url) as q,
            _worker(q, registry, 3 * SLOTS, "w-express"),
        ):
            try:
                # The claim loop runs one job less than the worker's slots.
                await _until(q, JobStatus.RUNNING, SLOTS - 1)
                await asyncio.sleep(0.3)  # a claim loop that took more would show it now
                assert await _count(q, JobStatus.RUNNING) == SLOTS - 1
                assert started.count("block") == SLOTS - 1
                # Nothing of the backlog ends; the urgent job still starts.
                urgent = await q.enqueue("urgent", priority=5)
                await asyncio.wait_for(high.wait(), DEADLINE)
                assert started.count("block") == SLOTS - 1
                done = await q.wait(urgent, timeout=DEADLINE)
                assert done.status is JobStatus.COMPLETED
                # A job of the backlog's own priority waits its turn.
                await q.enqueue("urgent", priority=0)
                await asyncio.sleep(0.3)
                assert started.count("urgent") == 1
                assert await _count(q, JobStatus.RUNNING) == SLOTS - 1
            finally:
                release.set()
                await _until(q, JobStatus.COMPLETED, 3 * SLOTS + 2)
            assert started.count("block") == 3 * SLOTS
            assert started.count("urgent") == 2

    asyncio.run(main())


def test_without_notices_every_slot_is_the_claim_loops(sqlite_url: str) -> None:
    """SQLite tells no priority: nothing is left to express claims."""

    async def main() -> None:
        release, high = asyncio.Event(), asyncio.Event()
        started: list[str] = []
        registry = _registry(release, started, high)
        async with (
            jobvisor.connect_async(sqlite_url) as q,
            _worker(q, registry, 2 * SLOTS, "w-sqlite"),
        ):
            try:
                await _until(q, JobStatus.RUNNING, SLOTS)
            finally:
                release.set()

    asyncio.run(main())


def test_an_express_job_is_stopped_and_given_back_like_any_other(pg_url: str) -> None:
    """The express claim runs its job in its own task: a cancel request
    reaches it, and the stop's drain gives it back when its deadline passes."""

    async def main() -> None:
        started: list[str] = []
        registry = _registry(asyncio.Event(), started, asyncio.Event(), urgent_blocks=True)
        async with jobvisor.connect_async(pg_url) as q:
            async with _worker(q, registry, 2 * SLOTS, "w-express-stop", shutdown_timeout=0.5) as w:
                await _until(q, JobStatus.RUNNING, SLOTS - 1)
                cancelled = await q.enqueue("urgent", priority=5)
                await _until(q, JobStatus.RUNNING, SLOTS)
                await q.cancel(cancelled)
                done = await q.wait(cancelled, timeout=DEADLINE)
                assert done.status is JobStatus.CANCELLED
                kept = await q.enqueue("urgent", priority=5)
                await _until(q, JobStatus.RUNNING, SLOTS)
                assert started.count("urgent") == 2
            # Past the drain's deadline every job still running went back.
            assert await _count(q, JobStatus.RUNNING) == 0
            job = await q.get(kept)
            assert job is not None and job.status is JobStatus.PENDING
            assert await _count(q, JobStatus.PENDING) == 2 * SLOTS + 1
            assert w.clean

    asyncio.run(main())
