"""The jobvisor side's handlers: one no-op job type (JOBVISOR_APP=jobvisor_app:registry)."""

from __future__ import annotations

from common import record_start

from jobvisor.worker import JobContext, Registry

registry = Registry()


@registry.handler("noop")
async def noop(job: JobContext) -> None:
    record_start(int(job.payload.get("n", 0)))
