"""A handler's progress: kept in memory and written by the worker's next
lease renewal, never by a statement of its own (statements are counted)."""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from collections.abc import Generator
from typing import Any

import pytest

import jobvisor
from jobvisor import JobContext, JobStatus, Registry
from jobvisor.queue.model import UTC, Job
from jobvisor.queue.plan import Plan, Step
from jobvisor.worker.loop import Worker

DEADLINE = 30.0
REPORTS = 500


class CountingRunner:
    """A runner that records the SQL of every statement it runs."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner
        self.statements: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.runner, name)

    async def run(self, plan: Plan[Any]) -> Any:
        plan.steps = self._counted(plan.steps)
        return await self.runner.run(plan)

    def _counted(self, steps: Generator[Step, Any, Any]) -> Generator[Step, Any, Any]:
        value: Any = None
        try:
            while True:
                step = steps.send(value)
                self.statements.append(str(getattr(step, "sql", "")))
                value = yield step
        except StopIteration as stop:
            return stop.value


def test_progress_is_written_by_the_renewal_alone(url: str) -> None:
    registry = Registry()
    release = asyncio.Event()
    reported = asyncio.Event()

    @registry.handler("long")
    async def long(job: JobContext) -> str:
        for i in range(1, REPORTS + 1):
            job.progress(i / REPORTS, f"step {i}")
        reported.set()
        await release.wait()
        return "done"

    async def main() -> None:
        queue = jobvisor.connect_async(url)
        await queue.migrate()
        jid = await queue.enqueue("long")
        counting = CountingRunner(queue._runner)
        queue._runner = counting
        worker = Worker(queue, registry, worker_id="w-progress", lease=2.0,
                        poll_interval=0.05, watch_parent=False)  # fmt: skip
        running = asyncio.create_task(worker.run())
        async with jobvisor.connect_async(url) as reader:
            try:
                await asyncio.wait_for(reported.wait(), DEADLINE)
                renewals = counting.statements.count(queue._ctx.dialect.sql.JOB_RENEW_MANY)
                before = len(counting.statements)
                for _ in range(int(DEADLINE / 0.05)):  # until a renewal writes it
                    job = await reader.get(jid)
                    if job.progress is not None:
                        break
                    await asyncio.sleep(0.05)
                assert job.status is JobStatus.RUNNING
                assert job.progress == {"fraction": 1.0, "note": f"step {REPORTS}"}
                # 500 reports, and the worker ran far fewer statements: its
                # renewals (one wrote the progress), claims and nothing else.
                assert len(counting.statements) < REPORTS // 5
                sql = queue._ctx.dialect.sql
                assert counting.statements.count(sql.JOB_RENEW_MANY) > renewals
                # (A claim may also look for limited groups, in a transaction.)
                claims = {
                    sql.JOB_CLAIM,
                    sql.JOB_CLAIM_AFTER,
                    sql.LIMIT_LOCK,
                    sql.JOB_CLAIM_LIMITED,
                    "",
                }
                assert set(counting.statements[before:]) <= {sql.JOB_RENEW_MANY, *claims}
                release.set()
                done = await reader.wait(jid, timeout=DEADLINE)
                assert done.result == "done"
                assert done.progress == {"fraction": 1.0, "note": f"step {REPORTS}"}
            finally:
                release.set()
                worker.stop()
                await asyncio.wait_for(running, DEADLINE)
                await queue.close()

    asyncio.run(main())


def test_a_handler_gets_bad_progress_refused() -> None:
    now = dt.datetime.now(UTC)
    job = Job(uuid.uuid4(), "q", "t", {}, 0, now, JobStatus.RUNNING, 1, 1, None, None, None,
              now, uuid.uuid4(), "w", now, now, None)  # fmt: skip
    seen: list[str] = []
    context = JobContext(job, "w", lambda _id, text: seen.append(text))
    context.progress(0.5)
    with pytest.raises(
        jobvisor.InvalidArgument, match=r"fraction=2: expected a number 0\.0\.\.1\.0"
    ):
        context.progress(2)
    assert seen == ['{"note":null,"fraction":0.5}']  # keys in jsonb's order, on both engines
