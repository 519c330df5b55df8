"""The handlers `bench/steps.py` runs under `jobvisor run`: `noop` does
nothing; `three_steps` records three no-op steps; `resume_stamp` parks in a
wait for the signal `go` and, once it resumes, returns the wall-clock time
at which the wait returned."""

from __future__ import annotations

import time

from jobvisor import JobContext, Registry

registry = Registry()


def nothing() -> None:
    """A step's function that does nothing: what is left is the step's cost."""


@registry.handler("noop")
async def noop(job: JobContext) -> None:
    """The cost of the queue itself."""


@registry.handler("three_steps")
async def three_steps(job: JobContext) -> None:
    for name in ("a", "b", "c"):
        await job.step(name, nothing)


@registry.handler("resume_stamp")
async def resume_stamp(job: JobContext) -> float:
    await job.wait_signal("go")
    return time.time()
