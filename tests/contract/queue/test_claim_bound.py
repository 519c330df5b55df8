"""The bounded claim (`ops.ClaimBounds`): on PostgreSQL, while the full claim
is slow (here made to count as slow), a claim starts past the last job its
queue claimed, so the index entries of claimed jobs that an
open transaction keeps from vacuum are not read again. Jobs that land behind
the bound are never lost nor left waiting: the full claim takes them when the
bounded one finds nothing, at least every `FULL_CLAIM_EVERY`, and at once after
this queue released jobs or resumed a queue. SQLite claims are never bounded;
the same contract holds on both engines."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from typing import Any, LiteralString

import psycopg
import pytest

import jobvisor
from jobvisor import Queue
from jobvisor.queue import ops
from jobvisor.queue.ops import hints
from tests.support.invariants import assert_invariants, status_counts
from tests.support.queue import Clock


@pytest.fixture(autouse=True)
def _bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every full claim counts as slow, as on a table with a dead head: the
    claims that follow one are bounded. But never as slow against a bounded
    claim that ran dry (on a busy machine one may take ten times as long as
    the other): the full claim follows it at once, as on a clean table."""
    monkeypatch.setattr(hints, "FULL_CLAIM_SLOW", 0.0)
    monkeypatch.setattr(hints, "FULL_CLAIM_SLOW_RATIO", 1e9)


def _claim_one_by_one(q: Queue) -> list[uuid.UUID]:
    """Claim one job at a time until a claim comes back empty."""
    taken: list[uuid.UUID] = []
    while got := q.claim("w", limit=1):
        taken.extend(j.id for j in got)
    return taken


def test_a_job_enqueued_behind_the_bound_is_claimed_when_the_bounded_claim_runs_dry(
    cqueue: Queue, clock: Clock, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    t0 = clock()
    first, second, third = (
        cqueue.enqueue("t", run_at=t0 - dt.timedelta(seconds=s)) for s in (30, 20, 10)
    )
    (job,) = cqueue.claim("w", limit=1)
    assert job.id == first
    old = cqueue.enqueue("t", run_at=t0 - dt.timedelta(seconds=60))
    rest = _claim_one_by_one(cqueue)
    assert sorted(rest) == sorted([second, third, old])
    assert cqueue.claim("w", limit=10) == []
    assert status_counts(url) == {"running": 4}
    assert_invariants(url)


def test_after_a_fast_full_claim_the_next_claim_is_full_and_in_claim_order(
    cqueue: Queue, clock: Clock, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a table vacuum keeps clean the full claim is fast (here: any full
    claim counts as fast), so no claim is bounded and a job that lands behind
    the last one claimed is the next claim's first."""
    monkeypatch.setattr(hints, "FULL_CLAIM_SLOW", 1e9)
    t0 = clock()
    later = cqueue.enqueue_many([{"job_type": "t", "run_at": t0 - dt.timedelta(seconds=10)}] * 3)
    (job,) = cqueue.claim("w", limit=1)
    assert job.id == later[0]
    old = cqueue.enqueue("t", run_at=t0 - dt.timedelta(seconds=60))
    (job,) = cqueue.claim("w", limit=1)
    assert job.id == old
    assert _claim_one_by_one(cqueue) == later[1:]
    assert_invariants(url)


def test_a_higher_priority_job_is_not_behind_the_bound(cqueue: Queue, url: str) -> None:
    low = cqueue.enqueue_many([{"job_type": "t"}] * 3)
    (job,) = cqueue.claim("w", limit=1)
    assert job.id == low[0]
    high = cqueue.enqueue("t", priority=10)
    (job,) = cqueue.claim("w", limit=1)
    assert job.id == high
    assert _claim_one_by_one(cqueue) == low[1:]
    assert_invariants(url)


def test_lower_priorities_follow_once_the_bounds_priority_is_done(cqueue: Queue, url: str) -> None:
    normal = cqueue.enqueue_many([{"job_type": "t"}] * 3)
    lower = cqueue.enqueue_many([{"job_type": "t", "priority": -1}] * 2)
    assert _claim_one_by_one(cqueue) == normal + lower
    assert_invariants(url)


def test_a_released_job_is_claimed_again_next(cqueue: Queue, url: str) -> None:
    ids = cqueue.enqueue_many([{"job_type": "t"}] * 4)
    a, b = cqueue.claim("w", limit=2)
    cqueue.release(a)
    (again,) = cqueue.claim("w", limit=1)
    assert again.id == a.id == ids[0]
    assert _claim_one_by_one(cqueue) == ids[2:]
    cqueue.complete(b)
    assert_invariants(url)


def test_a_queue_resumed_elsewhere_has_its_jobs_claimed(
    make_queue: Any, clock: Clock, url: str
) -> None:
    q, admin = make_queue(clock=clock), make_queue(clock=clock)
    t0 = clock()
    admin.pause("x")
    waiting = q.enqueue("t", queue="x", run_at=t0 - dt.timedelta(seconds=60))
    others = [q.enqueue("t", run_at=t0 - dt.timedelta(seconds=s)) for s in (30, 20, 10)]
    (job,) = q.claim("w", limit=1)
    assert job.id == others[0]
    admin.resume("x")  # another process: this queue's bound still stands
    assert sorted(_claim_one_by_one(q)) == sorted([*others[1:], waiting])
    assert_invariants(url)


def test_a_job_behind_the_bound_waits_one_full_claim_period_at_most(
    cqueue: Queue, clock: Clock, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the bounded claims keep finding work, the full claim still runs
    every FULL_CLAIM_EVERY and takes the job behind the bound first."""
    monkeypatch.setattr(hints, "FULL_CLAIM_EVERY", 0.2)
    monkeypatch.setattr(hints, "FULL_CLAIM_SPACING", 0.0)
    t0 = clock()
    cqueue.enqueue_many([{"job_type": "t", "run_at": t0 - dt.timedelta(seconds=10)}] * 5)
    cqueue.claim("w", limit=1)
    old = cqueue.enqueue("t", run_at=t0 - dt.timedelta(seconds=60))
    time.sleep(0.3)  # past the period: the next claim is a full one
    (job,) = cqueue.claim("w", limit=1)
    assert job.id == old
    assert_invariants(url)


def test_a_slow_full_claim_is_spaced_out_and_loses_nothing(
    make_queue: Any, clock: Clock, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the full claim is slow (here: every full claim counts as slow), a
    bounded claim that finds nothing does not run it again at once; the job
    behind the bound stays pending for the next full claim, here another
    queue's (whose first claim is a full one)."""
    monkeypatch.setattr(hints, "FULL_CLAIM_SLOW_RATIO", 0.0)
    monkeypatch.setattr(hints, "FULL_CLAIM_SPACING", 1e9)
    q = jobvisor.connect(pg_url, clock=clock)
    q.migrate()
    other = jobvisor.connect(pg_url, clock=clock)
    try:
        t0 = clock()
        newer = q.enqueue("t", run_at=t0 - dt.timedelta(seconds=10))
        (job,) = q.claim("w", limit=1)  # a full claim: the bound is `newer`
        assert job.id == newer
        old = q.enqueue("t", run_at=t0 - dt.timedelta(seconds=60))
        assert q.claim("w", limit=1) == []  # bounded, dry, and no full claim yet
        assert status_counts(pg_url) == {"running": 1, "pending": 1}
        assert [j.id for j in other.claim("w", limit=1)] == [old]
        assert_invariants(pg_url)
    finally:
        q.close()
        other.close()


def test_nothing_is_lost_or_claimed_twice_by_bounded_claimers_under_churn(
    make_queue: Any, url: str
) -> None:
    """Two queues (two bounds) claim in small batches while jobs of older
    run_at, higher and lower priorities and released jobs keep landing behind
    and around their bounds: every job is claimed, none twice."""
    a, b = make_queue(), make_queue()
    now = dt.datetime.now(dt.UTC)
    enqueued = set(a.enqueue_many([{"job_type": "t"}] * 50))
    seen: dict[uuid.UUID, int] = {}
    extras: list[dict[str, Any]] = [
        {"run_at": now - dt.timedelta(minutes=5)},
        {"priority": 5},
        {"priority": -5},
        {},
    ]
    for round_ in range(30):
        extra = extras[round_ % 4]
        enqueued.update(b.enqueue_many([{"job_type": "t", **extra}] * 3))
        for q in (a, b):
            jobs = q.claim("w", limit=4)
            if jobs and round_ % 5 == 0:
                q.release(jobs[0])
                jobs = jobs[1:]
            for job in jobs:
                seen[job.id] = seen.get(job.id, 0) + 1
                q.complete(job)
    for q in (a, b):
        while jobs := q.claim("w", limit=7):
            for job in jobs:
                seen[job.id] = seen.get(job.id, 0) + 1
                q.complete(job)
    assert set(seen) == enqueued
    assert set(seen.values()) == {1}
    assert status_counts(url) == {"completed": len(enqueued)}
    assert_invariants(url)


# --- PostgreSQL: what the bound saves -----------------------------------------


def _claim_index_pages(
    conn: psycopg.Connection[Any], sql: LiteralString, params: dict[str, Any]
) -> int:
    """Pages the statement's scans of the claim index touched, with the table's
    pages they fetched rows from (EXPLAIN ANALYZE, rolled back)."""
    with conn.transaction(force_rollback=True):
        row = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, params).fetchone()
        assert row is not None

    def walk(node: dict[str, Any]) -> int:
        own = 0
        if node.get("Index Name") == "jobvisor_jobs_claim_idx":
            own = int(node["Shared Hit Blocks"]) + int(node["Shared Read Blocks"])
        return own + sum(walk(child) for child in node.get("Plans", []))

    return walk(row[0][0]["Plan"])


def test_the_bounded_claim_skips_what_an_open_transaction_keeps(pg_url: str) -> None:
    """With another session's transaction open, every claimed job leaves a
    dead entry at the head of the claim index that no vacuum may remove: the
    full claim reads them all, the bounded claim starts past them. (Pages,
    not time: an index scan fetches rows of one table page in one visit.)"""
    with jobvisor.connect(pg_url) as q:
        q.migrate()
        q.enqueue_many([{"job_type": "t"}] * 5000)
        with psycopg.connect(pg_url) as holder, psycopg.connect(pg_url, autocommit=True) as conn:
            holder.execute("SELECT txid_current()")  # idle in transaction from here on
            taken = 0
            while taken < 4000:
                jobs = q.claim("w", limit=100)
                q.complete_many(jobs)
                taken += len(jobs)
            ctx = q._ctx
            bound = ctx.claim_bounds._bounds.get((None, None))  # due or not for a full claim
            assert bound is not None
            params = {
                "worker_id": "probe", "queues": None, "job_types": None, "limit": 10,
                "lease": 30.0, "now": dt.datetime.now(dt.UTC), "slack": 0.05, "token": uuid.uuid4(),
                "after_priority": -bound[0], "after_run_at": bound[1], "after_id": bound[2],
                "mark_filter": "probe",
            }  # fmt: skip
            conn.execute("SET enable_sort = off")
            sql = ctx.dialect.sql
            full = _claim_index_pages(conn, sql.JOB_CLAIM, params)
            bounded = _claim_index_pages(conn, sql.JOB_CLAIM_AFTER, params)
            holder.rollback()
        # The full claim reads the 4,000 dead entries and the pages of their rows;
        # the bounded one the few pages of the ten jobs it takes.
        assert bounded * 5 < full, (bounded, full)
    assert status_counts(pg_url) == {"completed": 4000, "pending": 1000}


def _jobs(n: int) -> list[jobvisor.Job]:
    at = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    return [
        jobvisor.Job(
            id=uuid.uuid4(),
            queue="q",
            job_type="t",
            payload=None,
            priority=0,
            run_at=at,
            status=jobvisor.JobStatus.RUNNING,
            attempts=1,
            max_attempts=3,
            last_error=None,
            correlation_id=None,
            dedupe_key=None,
            lease_expires_at=at,
            claim_token=uuid.uuid4(),
            worker_id="w",
            created_at=at,
            started_at=at,
            finished_at=None,
        )
        for _ in range(n)
    ]


@pytest.mark.parametrize(
    ("got", "asked", "took", "bounded"),
    [
        # A full batch (a backlog drains): slow from a tenth of FULL_CLAIM_SLOW.
        (ops.SATURATED_BATCH, ops.SATURATED_BATCH, 0.006, True),
        (200, 200, 0.006, True),
        (200, 200, 0.004, False),
        # Fewer jobs than asked, or a small batch: slow from FULL_CLAIM_SLOW only.
        (150, 200, 0.006, False),
        (ops.SATURATED_BATCH - 1, ops.SATURATED_BATCH - 1, 0.006, False),
        (1, 1, 0.049, False),
        (1, 1, 0.05, True),
        (0, 200, 0.06, True),
    ],
)
def test_a_full_claim_is_slow_sooner_when_it_filled_a_batch(
    monkeypatch: pytest.MonkeyPatch, got: int, asked: int, took: float, bounded: bool
) -> None:
    monkeypatch.setattr(hints, "FULL_CLAIM_SLOW", 0.05)
    bounds = ops.ClaimBounds()
    bounds.claimed("k", _jobs(max(got, 1)), full=True, took=0.0, asked=1)  # a bound to keep
    bounds.claimed("k", _jobs(got), full=True, took=took, asked=asked)
    assert (bounds.bound("k") is not None) is bounded
