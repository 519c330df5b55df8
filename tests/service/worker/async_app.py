"""Apps for the worker tests of `JOBVISOR_CONCURRENCY=auto`: `registry` has
only `async def` handlers (`JOBVISOR_APP=tests.service.worker.async_app:registry`),
`threaded` the same and one plain function, which runs in a thread."""

from __future__ import annotations

import asyncio
import os

from jobvisor import JobContext, Registry

registry = Registry()
threaded = Registry()


async def hold(job: JobContext) -> None:
    """Runs until the file `payload["release"]` exists."""
    release = job.payload["release"]
    # Another process creates it: a file is all there is to poll.
    while not os.path.exists(release):  # noqa: ASYNC110, ASYNC240
        await asyncio.sleep(0.05)


def noop(job: JobContext) -> None:
    """A plain function: the worker needs threads for it."""


registry.handler("hold", timeout=120)(hold)
threaded.handler("hold", timeout=120)(hold)
threaded.handler("noop")(noop)
