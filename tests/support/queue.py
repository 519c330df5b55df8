"""Helpers for the queue's contract suite: a clock tests move by hand, raw
reads of the jobs table, and the bodies of child processes (spawned, so they
must live in an importable module)."""

from __future__ import annotations

import datetime as dt
import multiprocessing
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import jobvisor
from jobvisor.queue.drivers.postgres.dialect import CLOCK_SLACK
from tests.support.invariants import query_all

UTC = dt.UTC
T = TypeVar("T")

# What the contract suite's `make_queue` fixture is: `make_queue(**options)`.
MakeQueue = Callable[..., jobvisor.Queue]


class Clock:
    """An injected clock (`connect(..., clock=clock)`) that only moves when told."""

    def __init__(self, start: dt.datetime | None = None) -> None:
        base = start or dt.datetime.now(UTC)
        self._now = base.replace(microsecond=0)
        self._lock = threading.Lock()

    def __call__(self) -> dt.datetime:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> dt.datetime:
        with self._lock:
            self._now += dt.timedelta(seconds=seconds)
            return self._now


def row_count(url: str) -> int:
    """How many jobs the table holds, read on a connection of its own."""
    ((n,),) = query_all(url, ["SELECT COUNT(*) FROM jobvisor_jobs"])[0]
    return int(n)


def table_snapshot(url: str) -> list[tuple[Any, ...]]:
    """Every job row (all columns, as the engine returns them), ordered by id."""
    return query_all(url, ["SELECT * FROM jobvisor_jobs ORDER BY id"])[0]


def claimed_after_pause(url: str) -> list[tuple[Any, ...]]:
    """(id, queue) of every job a claim took after its queue was paused (the
    claim's start time against the pause's, both from the database clock).

    On PostgreSQL each process reckons that clock from its own reading, and
    two readings may differ by up to the claim's slack (`CLOCK_SLACK`, more
    than half a round trip on a busy machine): a claim that began before the
    pause may be stamped a few milliseconds after it, so only a start past
    the pause by more than the slack counts."""
    later = "" if url.startswith("sqlite") else f" + interval '{CLOCK_SLACK} seconds'"
    (rows,) = query_all(
        url,
        [
            "SELECT j.id, j.queue FROM jobvisor_jobs AS j"
            " JOIN jobvisor_queue_pauses AS p ON p.queue = j.queue"
            f" WHERE j.started_at > p.paused_at{later}"  # a constant of the test's
        ],
    )
    return rows


def queue_counts(url: str, queue: str) -> dict[str, int]:
    """How many jobs of one queue are in each status (zero counts left out)."""
    (rows,) = query_all(
        url,
        [
            "SELECT status, COUNT(*) FROM jobvisor_jobs"
            f" WHERE queue = '{queue}' GROUP BY status"  # a test's own literal name
        ],
    )
    return {str(status): int(n) for status, n in rows}


def close_to(a: dt.datetime | None, b: dt.datetime, *, within: float = 0.01) -> bool:
    """Equal up to `within` seconds (SQLite keeps times as float epoch seconds)."""
    return a is not None and abs((a - b).total_seconds()) <= within


# --- child processes -----------------------------------------------------------


def _child_main(target: Callable[..., Any], args: tuple[Any, ...], start: Any, out: Any) -> None:
    try:
        if not start.wait(120):
            raise TimeoutError("the start signal never came")
        out.put(("ok", target(*args)))
    except BaseException as exc:
        out.put(("error", f"{type(exc).__name__}: {exc}"))


def run_in_processes(
    target: Callable[..., T], args: list[tuple[Any, ...]], *, timeout: float = 120.0
) -> list[T]:
    """Run `target(*a)` for each `a` in its own spawned process, all released at
    once; their results (in completion order). A child's exception fails the test."""
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_child_main, args=(target, a, start, out)) for a in args]
    for p in procs:
        p.start()
    start.set()
    results: list[T] = []
    errors: list[str] = []
    try:
        for _ in procs:
            kind, value = out.get(timeout=timeout)
            (results if kind == "ok" else errors).append(value)
    finally:
        for p in procs:
            p.join(timeout)
            if p.is_alive():
                p.kill()
                p.join()
        out.close()
        out.join_thread()
    assert not errors, f"child processes failed: {errors}"
    return results


def child_claim_all(url: str, worker_id: str, batch: int) -> list[str]:
    """Claim and complete until the queue is empty; the ids this process got."""
    got: list[str] = []
    with jobvisor.connect(url) as q:
        while True:
            jobs = q.claim(worker_id, limit=batch)
            if not jobs:
                return got
            got.extend(str(j.id) for j in jobs)
            lost = q.complete_many(jobs)
            assert not lost, f"{worker_id} lost leases it had just taken: {lost}"


def child_migrate(url: str) -> list[int]:
    with jobvisor.connect(url) as q:
        return q.migrate()
