"""A worker that polls (SQLite; PostgreSQL without LISTEN alike) claims again
as soon as it has written completions: the workflow child that a completion
made due starts without waiting for the next poll."""

from __future__ import annotations

import asyncio

import pytest

import jobvisor
from jobvisor import JobContext, Registry
from jobvisor.worker import claiming
from jobvisor.worker.loop import Worker

DEADLINE = 30.0  # bound on every wait; never reached when things work


def test_a_polling_worker_starts_the_child_its_completion_made_due(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No poll comes while the test runs: only the worker's own wake claims.
    monkeypatch.setattr(claiming, "MIN_POLL", 3600.0)
    ran: list[str] = []
    registry = Registry()

    async def main() -> None:
        done = asyncio.Event()

        @registry.handler("parent")
        async def parent(job: JobContext) -> None:
            ran.append("parent")

        @registry.handler("child")
        async def child(job: JobContext) -> None:
            ran.append("child")
            done.set()

        async with jobvisor.connect_async(sqlite_url) as q:
            await q.migrate()
            wf = jobvisor.Workflow("two")
            wf.add("child", after=[wf.add("parent")])
            await q.enqueue_workflow(wf)
            worker = Worker(q, registry, worker_id="w-poll", concurrency=4, poll_interval=3600,
                            watch_parent=False)  # fmt: skip
            assert not q.listens
            running = asyncio.create_task(worker.run())
            try:
                async with asyncio.timeout(DEADLINE):
                    await done.wait()
            finally:
                worker.stop()
                await asyncio.wait_for(running, DEADLINE)

    asyncio.run(main())
    assert ran == ["parent", "child"]
