"""The app of the schedule tests (`JOBVISOR_APP=tests.service.schedules.app:registry`):
one schedule ticking every second, all missed ticks caught up."""

from __future__ import annotations

from jobvisor.worker import JobContext, Registry

registry = Registry()


@registry.handler("tick")
async def tick(job: JobContext) -> None:
    """Does nothing: the test reads the jobs table."""


registry.schedule("every_second", every=1, job_type="tick", payload={"a": 1}, catch_up="all")
