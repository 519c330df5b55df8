"""The handlers `bench/workflows.py` runs: `noop` does nothing; `stamp`
returns the wall-clock time its handler started, which the benchmark holds
against its parents' `finished_at` for the hand-over's latency."""

from __future__ import annotations

import time

from jobvisor import JobContext, Registry

registry = Registry()


@registry.handler("noop")
async def noop(job: JobContext) -> None:
    """The cost of the queue itself."""


@registry.handler("stamp")
async def stamp(job: JobContext) -> float:
    return time.time()
