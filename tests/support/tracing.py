"""Running a worker inside the test process, with a tracer provider of the
test's own, until the jobs it was given are settled."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence

import jobvisor
from jobvisor import Job, Registry
from jobvisor.queue.model import TERMINAL
from jobvisor.worker.loop import Worker

DEADLINE = 30.0  # generous: the machine may be loaded by other test runs
# Where tests/service/tracing/app.py writes its spans; not JOBVISOR_*, which the
# worker tests' environment does not pass on.
SPANS_ENV = "TRACING_TEST_SPANS"


def run_worker(
    url: str, registry: Registry, job_ids: Sequence[uuid.UUID], *, tracer_provider: object = None
) -> list[Job]:
    """Run a `Worker` on `url` until every job in `job_ids` is terminal, stop
    it, and return those jobs as the database has them at the end."""

    async def main() -> list[Job]:
        queue = jobvisor.connect_async(url, retry=registry.retry_policies())
        worker = Worker(queue, registry, worker_id="w-tracing", concurrency=4,
                        poll_interval=0.05, shutdown_timeout=10.0, watch_parent=False,
                        tracer_provider=tracer_provider)  # fmt: skip
        running = asyncio.create_task(worker.run())
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + DEADLINE
            while True:
                jobs = [await queue.get(job_id) for job_id in job_ids]
                if all(job.status in TERMINAL for job in jobs):
                    break
                if running.done():
                    raise AssertionError(f"the worker ended early: {running!r}")
                if loop.time() > deadline:
                    statuses = [(str(j.id), j.status.value) for j in jobs]
                    raise AssertionError(f"jobs not settled after {DEADLINE}s: {statuses}")
                await asyncio.sleep(0.02)
        finally:
            worker.stop()
            await asyncio.wait_for(running, DEADLINE)
            await queue.close()
        assert worker.clean
        return jobs

    return asyncio.run(main())
