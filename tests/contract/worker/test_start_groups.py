"""A worker starts the jobs of one claim a group at a time; a stop that
comes between two groups gives the unstarted jobs back at once."""

from __future__ import annotations

import asyncio

import jobvisor
from jobvisor import JobContext, JobStatus, Registry
from jobvisor.worker.loop import Worker
from jobvisor.worker.running import START_GROUP

DEADLINE = 30.0  # bound on every wait; never reached when things work
JOBS = 5 * START_GROUP


def test_a_stop_between_two_groups_gives_the_rest_back(url: str) -> None:
    async def main() -> None:
        ran: list[str] = []
        registry = Registry()
        worker: Worker | None = None

        @registry.handler("stopper")
        async def stopper(job: JobContext) -> None:
            ran.append(job.id.hex)
            assert worker is not None
            worker.stop()  # while the claim loop is between its first two groups

        async with jobvisor.connect_async(url) as q:
            await q.migrate()
            await q.enqueue_many([{"job_type": "stopper"}] * JOBS)
            worker = Worker(q, registry, worker_id="w-groups", concurrency=JOBS + 10,
                            watch_parent=False)  # fmt: skip
            await asyncio.wait_for(worker.run(), DEADLINE)
            summary = await q.summary()
        assert len(ran) == START_GROUP  # the first group ran to its end
        assert summary.count(JobStatus.COMPLETED) == START_GROUP
        assert summary.count(JobStatus.PENDING) == JOBS - START_GROUP
        assert summary.count(JobStatus.RUNNING) == 0
        assert worker.clean

    asyncio.run(main())
