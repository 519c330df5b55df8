"""The handlers `bench/limits.py` runs: the same two no-op job types, with
fleet-wide limits (`limited`) and without (`unlimited`)."""

from __future__ import annotations

from jobvisor import JobContext, Registry

limited = Registry()
unlimited = Registry()


async def noop(job: JobContext) -> None:
    """Does nothing: the benchmark measures the queue, not the work."""


limited.add("capped", noop, concurrency=50)
limited.add("per_tenant", noop, key_concurrency=2)
unlimited.add("capped", noop)
unlimited.add("per_tenant", noop)
