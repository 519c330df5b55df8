"""The app of the limit tests (`JOBVISOR_APP=tests.service.limits.app:registry`):
handlers that return when they started and ended (host clock, seconds), so
a test reads from the results how many ran at once."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from jobvisor.worker import JobContext, Registry

registry = Registry()


async def _hold(job: JobContext) -> dict[str, Any]:
    start = time.time()
    await asyncio.sleep(float(job.payload.get("hold", 0.2)))
    return {"start": start, "end": time.time(), "key": job.payload.get("key")}


@registry.handler("capped", concurrency=3)
async def capped(job: JobContext) -> dict[str, Any]:
    """At most three of these run at once, across every host."""
    return await _hold(job)


@registry.handler("per_tenant", key_concurrency=1)
async def per_tenant(job: JobContext) -> dict[str, Any]:
    """At most one per tenant (its concurrency key) at once."""
    return await _hold(job)


@registry.handler("rated", rate="20/s")
async def rated(job: JobContext) -> dict[str, Any]:
    """At most twenty starts a second, and a bucket of twenty."""
    return await _hold(job)


@registry.handler("rated_per_key", key_rate="10/s")
async def rated_per_key(job: JobContext) -> dict[str, Any]:
    """At most ten starts a second per concurrency key, a bucket of ten each."""
    return await _hold(job)


@registry.handler("free")
async def free(job: JobContext) -> dict[str, Any]:
    """No limit."""
    return await _hold(job)
