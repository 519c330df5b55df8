"""The handlers the supervisor tests run (`JOBVISOR_APP=tests.service.supervisor.app:registry`).

Each misbehaves in one way a real handler can: sleeps, kills its own process,
blocks the event loop, overruns a hard time limit."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from typing import Any

from jobvisor.worker import JobContext, Registry

registry = Registry()


def _payload(job: JobContext) -> dict[str, Any]:
    return job.payload if isinstance(job.payload, dict) else {}


@registry.handler("noop")
async def noop(job: JobContext) -> None:
    """Does nothing."""


@registry.handler("sleep")
async def sleep(job: JobContext) -> None:
    """Sleeps `seconds` on the event loop (cancellable)."""
    await asyncio.sleep(float(_payload(job).get("seconds", 0.05)))


@registry.handler("sleep_first")
async def sleep_first(job: JobContext) -> None:
    """Sleeps `seconds` on its first attempt only; any later attempt is quick."""
    if job.attempt == 1:
        await asyncio.sleep(float(_payload(job).get("seconds", 60)))


@registry.handler("sleep_once")
async def sleep_once(job: JobContext) -> None:
    """Sleeps `seconds` the first time it runs (it leaves the file `marker`
    behind); any later run is quick. For jobs whose attempt was given back."""
    marker = str(_payload(job)["marker"])
    try:
        os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    except FileExistsError:
        return
    await asyncio.sleep(float(_payload(job).get("seconds", 60)))


@registry.handler("record")
def record(job: JobContext) -> None:
    """Appends its job id to the file `path` (one short line: an atomic append)."""
    fd = os.open(str(_payload(job)["path"]), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{job.id}\n".encode())
    finally:
        os.close(fd)


@registry.handler("crash", max_attempts=3)
def crash(job: JobContext) -> None:
    """Kills its own worker, as a segfault or the OOM killer would."""
    os.kill(os.getpid(), signal.SIGKILL)


@registry.handler("block_loop", max_attempts=1)
async def block_loop(job: JobContext) -> None:
    """Blocking code in an `async def`: the worker's event loop stops turning."""
    time.sleep(float(_payload(job).get("seconds", 60)))  # noqa: ASYNC251 - the point


@registry.handler("sync_sleep", hard_timeout=1.5, max_attempts=1)
def sync_sleep(job: JobContext) -> None:
    """Blocking code in the thread pool, past its hard time limit."""
    time.sleep(float(_payload(job).get("seconds", 60)))


@registry.handler("leave_orphan", max_attempts=1)
def leave_orphan(job: JobContext) -> None:
    """Starts a short-lived child, writes its pid to `path`, and kills its own
    worker: the child is orphaned while it still runs."""
    child = subprocess.Popen(["sleep", str(_payload(job).get("seconds", 1))])
    with open(str(_payload(job)["path"]), "w") as out:
        out.write(str(child.pid))
    os.kill(os.getpid(), signal.SIGKILL)


@registry.handler("sync_cooperative", max_attempts=1)
def sync_cooperative(job: JobContext) -> None:
    """Blocking code that checks for a cancel now and then."""
    deadline = time.monotonic() + float(_payload(job).get("seconds", 600))
    while time.monotonic() < deadline:
        job.raise_if_cancelled()
        time.sleep(0.01)


@registry.handler("sync_stubborn", max_attempts=3)
def sync_stubborn(job: JobContext) -> None:
    """Blocking code that never looks at a cancel request."""
    time.sleep(float(_payload(job).get("seconds", 600)))


@registry.handler("answer")
async def answer(job: JobContext) -> Any:
    """Returns `payload["value"]`: its result."""
    return _payload(job).get("value")


@registry.handler("sync_answer")
def sync_answer(job: JobContext) -> Any:
    """`answer` in a thread."""
    return _payload(job).get("value")


@registry.handler("unstorable")
async def unstorable(job: JobContext) -> Any:
    """Returns a value that is not JSON: the job fails."""
    return {"not json": {1, 2}}


@registry.handler("sync_returns_on_cancel", max_attempts=1)
def sync_returns_on_cancel(job: JobContext) -> None:
    """Blocking code that returns normally once its cancel was requested."""
    deadline = time.monotonic() + float(_payload(job).get("seconds", 600))
    while time.monotonic() < deadline and not job.cancel_requested:
        time.sleep(0.01)
