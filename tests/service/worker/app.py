"""Handlers for the worker tests, loaded by real worker processes as
`JOBVISOR_APP=tests.service.worker.app:registry`.

Handlers report what they saw by writing files under `payload["dir"]`, so a
test observes a handler in another process without sleeping."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from jobvisor import JobContext, Registry, RetryPolicy, current_correlation_id
from jobvisor.log import get_logger

registry = Registry()
log = get_logger("testapp")
NO_WAIT = RetryPolicy(base=0.0, cap=0.0, jitter=0.0)
LONG_WAIT = RetryPolicy(base=3600.0, cap=3600.0, jitter=0.0)


def _mark(job: JobContext, name: str, data: Any = None) -> None:
    """Write `<dir>/<job id>.<name>` (atomically: write, then rename)."""
    folder = Path(job.payload["dir"])
    tmp = folder / f".{job.id}.{name}.tmp"
    tmp.write_text(json.dumps(data))
    tmp.rename(folder / f"{job.id}.{name}")


def _exists(job: JobContext, name: str) -> bool:
    return (Path(job.payload["dir"]) / name).exists()


@registry.handler("ok")
async def ok(job: JobContext) -> None:
    pass


@registry.handler("sync_ok")
def sync_ok(job: JobContext) -> None:
    pass


@registry.handler("boom", retry=NO_WAIT)
async def boom(job: JobContext) -> None:
    raise ValueError(f"boom on attempt {job.attempt}")


@registry.handler("sync_boom", retry=LONG_WAIT)
def sync_boom(job: JobContext) -> None:
    raise KeyError("sync boom")


@registry.handler("slow", timeout=0.5)
async def slow(job: JobContext) -> None:
    await asyncio.sleep(600)


@registry.handler("sync_slow", timeout=0.5)
def sync_slow(job: JobContext) -> None:
    time.sleep(3)


@registry.handler("snooze")
async def snooze(job: JobContext) -> None:
    job.snooze(3600)


@registry.handler("cancel")
def cancel(job: JobContext) -> None:
    job.cancel("no longer wanted")


@registry.handler("report")
async def report(job: JobContext) -> None:
    """Record what the handler sees, and log a line of its own."""
    log.info("testapp.ran", job_id=str(job.id))
    _mark(job, "seen", {
        "context_correlation_id": current_correlation_id(),
        "correlation_id": job.correlation_id, "attempt": job.attempt,
        "job_type": job.job_type, "queue": job.queue, "id": str(job.id),
    })  # fmt: skip


@registry.handler("sync_report")
def sync_report(job: JobContext) -> None:
    _mark(job, "seen", {"context_correlation_id": current_correlation_id()})


@registry.handler("wait", hard_timeout=600)
async def wait(job: JobContext) -> None:
    """Mark `started`, then wait for the file `go` (at most `seconds`);
    mark `cancelled` if the worker cancels it."""
    _mark(job, "started")
    deadline = time.monotonic() + float(job.payload.get("seconds", 600))
    try:
        # The test creates `go` from another process: a file is all there is to poll.
        while not _exists(job, "go") and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.02)
    except asyncio.CancelledError:
        _mark(job, "cancelled")
        raise
    _mark(job, "finished")


@registry.handler("sync_wait")
def sync_wait(job: JobContext) -> None:
    _mark(job, "started")
    deadline = time.monotonic() + float(job.payload.get("seconds", 600))
    while not _exists(job, "go") and time.monotonic() < deadline:
        time.sleep(0.02)
    _mark(job, "finished")
