"""Durable handlers for the service tests, loaded by real worker processes as
`JOBVISOR_APP=tests.service.supervisor.durable_app:registry`. Each step's side
effect appends a line to a file in the job's `dir`, so a test counts how
often it really ran; `_hold` waits for the test's go-ahead between steps."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

from jobvisor import JobContext, Registry, RetryPolicy, SignalTimeout
from jobvisor.tasks import current_job

registry = Registry()
NO_WAIT = RetryPolicy(base=0.0, cap=0.0, jitter=0.0)


def effect(folder: str, name: str) -> str:
    """A step's side effect: one line more in `folder/name`."""
    with (Path(folder) / name).open("a") as out:
        out.write("ran\n")
    return f"{name} done"


def _mark(folder: str, name: str) -> Path:
    with (Path(folder) / name).open("a") as out:
        out.write("reached\n")
    return Path(folder) / f"go-{name}"


async def _hold(folder: str, name: str) -> None:
    go = _mark(folder, name)
    while not go.exists():  # noqa: ASYNC110 (a file the test creates: nothing to await)
        await asyncio.sleep(0.02)


def _hold_sync(folder: str, name: str) -> None:
    go = _mark(folder, name)
    while not go.exists():
        time.sleep(0.02)


@registry.handler("three_steps", max_attempts=10)
async def three_steps(job: JobContext) -> list[Any]:
    folder = job.payload["dir"]
    results = []
    for name in ("charge", "call", "mail"):
        results.append(await job.step(name, effect, folder, name))
        await _hold(folder, f"after-{name}")
    return results


@registry.handler("three_steps_sync", max_attempts=10)
def three_steps_sync(job: JobContext) -> list[Any]:
    folder = job.payload["dir"]
    results = []
    for name in ("charge", "call", "mail"):
        results.append(job.step_sync(name, effect, folder, name))
        _hold_sync(folder, f"after-{name}")
    return results


@registry.handler("sleeper", max_attempts=1)
async def sleeper(job: JobContext) -> str:
    folder = job.payload["dir"]
    await job.step("before", effect, folder, "before")
    await job.sleep(job.payload["seconds"])
    return str(await job.step("after", effect, folder, "after"))


@registry.handler("sleeper_sync", max_attempts=1)
def sleeper_sync(job: JobContext) -> str:
    folder = job.payload["dir"]
    job.step_sync("before", effect, folder, "before")
    job.sleep_sync(job.payload["seconds"])
    return str(job.step_sync("after", effect, folder, "after"))


@registry.handler("approval", max_attempts=1)
async def approval(job: JobContext) -> Any:
    folder = job.payload["dir"]
    await job.step("ask", effect, folder, "ask")
    await job.set_event("stage", "asked")
    try:
        answer = await job.wait_signal("approved", timeout=job.payload.get("timeout"))
    except SignalTimeout:
        return "timed out"
    return await job.step("record", lambda: {"approved": answer})


@registry.handler("approval_sync", max_attempts=1)
def approval_sync(job: JobContext) -> Any:
    folder = job.payload["dir"]
    job.step_sync("ask", effect, folder, "ask")
    job.set_event_sync("stage", "asked")
    try:
        answer = job.wait_signal_sync("approved", timeout=job.payload.get("timeout"))
    except SignalTimeout:
        return "timed out"
    return job.step_sync("record", lambda: {"approved": answer})


@registry.handler("reordered", max_attempts=2, retry=NO_WAIT)
async def reordered(job: JobContext) -> str:
    """Steps a, b; b in front once `flip` exists (the code changed)."""
    folder = job.payload["dir"]
    order = ("b", "a") if (Path(folder) / "flip").exists() else ("a", "b")
    await job.step(order[0], effect, folder, order[0])
    if job.attempt == 1:
        await _hold(folder, "after-first")
        raise RuntimeError("first attempt fails after its first step")
    await job.step(order[1], effect, folder, order[1])
    return "done"


@registry.handler("fenced", max_attempts=5, retry=NO_WAIT)
async def fenced(job: JobContext) -> str:
    folder = job.payload["dir"]
    await job.step("one", effect, folder, "one")
    if job.attempt == 1:
        await _hold(folder, "after-one")
    await job.step("two", effect, folder, "two")
    return "done"


def _ledger_insert(conn: Any) -> str:
    if isinstance(conn, sqlite3.Connection):
        return "INSERT INTO ledger VALUES (?, ?)"
    return "INSERT INTO ledger VALUES (%s, %s)"


def book(conn: Any, job_id: str, name: str) -> str:
    """A transactional step's write through its connection: one ledger row."""
    conn.execute(_ledger_insert(conn), (job_id, name))
    return "booked"


async def book_async(conn: Any, job_id: str, name: str) -> str:
    done = conn.execute(_ledger_insert(conn), (job_id, name))
    if not isinstance(conn, sqlite3.Connection):  # psycopg's AsyncConnection
        await done
    return "booked"


@registry.handler("ledger", max_attempts=10)
async def ledger(job: JobContext) -> list[Any]:
    folder = job.payload["dir"]
    results = []
    for name in ("debit", "credit"):
        results.append(await job.transaction(name, book_async, str(job.id), name))
        await _hold(folder, f"after-{name}")
    return results


@registry.handler("ledger_sync", max_attempts=10)
def ledger_sync(job: JobContext) -> list[Any]:
    folder = job.payload["dir"]
    results = []
    for name in ("debit", "credit"):
        results.append(job.transaction_sync(name, book, str(job.id), name))
        _hold_sync(folder, f"after-{name}")
    return results


@registry.task(max_attempts=1)
async def typed_steps(folder: str) -> list[Any]:
    """A typed task reaches its job's steps through `current_job()`."""
    job = current_job()
    assert job is not None
    first = await job.step("charge", effect, folder, "charge")
    await job.sleep(0.2)
    return [first, await job.step("mail", effect, folder, "mail")]


@registry.task(max_attempts=1)
def typed_steps_sync(folder: str) -> list[Any]:
    job = current_job()
    assert job is not None
    first = job.step_sync("charge", effect, folder, "charge")
    job.sleep_sync(0.2)
    return [first, job.step_sync("mail", effect, folder, "mail")]


@registry.handler("short_sleeps_sync")
def short_sleeps_sync(job: JobContext) -> int:
    """Sleeps shorter than a claim's clock slack: each wake is claimed while
    the run that parked is still unwinding in its thread."""
    for _ in range(5):
        job.sleep_sync(0.01)
    return 5
