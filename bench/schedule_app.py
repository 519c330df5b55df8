"""The app of bench/schedule_lag.py: one schedule ticking every second."""

from __future__ import annotations

from jobvisor.worker import JobContext, Registry

registry = Registry()


@registry.handler("tick")
async def tick(job: JobContext) -> None:
    """Does nothing: the benchmark reads the jobs table."""


registry.schedule("every_second", every=1, job_type="tick")
