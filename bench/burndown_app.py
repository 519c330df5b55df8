"""The handlers `bench/burndown.py` runs, every one an `async def` (so the
service's default concurrency is its `auto` figure for async apps): `noop`
does nothing, `sleep` awaits `payload["ms"]` milliseconds, a stand-in for a
job that waits on a network call."""

from __future__ import annotations

import asyncio

from jobvisor import JobContext, Registry

registry = Registry()


@registry.handler("noop")
async def noop(job: JobContext) -> None:
    """The cost of the queue itself."""


@registry.handler("sleep")
async def sleep(job: JobContext) -> None:
    await asyncio.sleep(float(job.payload["ms"]) / 1000)
