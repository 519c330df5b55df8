"""What a claimed job costs as claimers are added (PostgreSQL): counts, not
times. While some transaction keeps the claimed jobs' entries in the claim
index (no vacuum may remove them, and no scan may mark them dead), the
claims are bounded (`ops.ClaimBounds`). A bounded claim of a fleet starts
past the newest mark its filter's claims left (JOB_CLAIM_AFTER), so it does
not read again, each claimer for itself, the jobs the others took since
its own last claim: the entries read per claimed job stay the same with 12
claimers as with 2. (SQLite has one writer at a time and no bounded claim.)"""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest

import jobvisor
from jobvisor.queue.ops import hints
from tests.support.invariants import assert_invariants, status_counts

BATCH = 100
ROUNDS = 8


@pytest.fixture(autouse=True)
def _bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every full claim counts as slow, as on a table with a dead head, and
    the periodic full claim does not come due within a test: every claim
    after a claimer's first is bounded."""
    monkeypatch.setattr(hints, "FULL_CLAIM_SLOW", 0.0)
    monkeypatch.setattr(hints, "FULL_CLAIM_EVERY", 1e9)


def _counts(conn: psycopg.Connection[Any]) -> tuple[int, int]:
    """(claim index entries read, rows updated) of the jobs table so far."""
    conn.execute("SELECT pg_stat_clear_snapshot()")
    row = conn.execute(
        "SELECT i.idx_tup_read, t.n_tup_upd FROM pg_stat_user_indexes AS i"
        " JOIN pg_stat_user_tables AS t USING (relid)"
        " WHERE i.indexrelname = 'jobvisor_jobs_claim_idx'"
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def _entries_read_per_job(pg_url: str, claimers: int) -> float:
    """Claimers take turns (each claim lands between two of every other's,
    the way racing claimers interleave), each with its own queue and
    bounds, while another session's transaction stays open; returns the
    claim index entries read per claimed job."""
    jobs = claimers * ROUNDS * BATCH
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("TRUNCATE jobvisor_jobs, jobvisor_claim_marks CASCADE")
        with jobvisor.connect(pg_url) as q:
            q.enqueue_many([{"job_type": "t"}] * jobs)
        before, updated = _counts(conn)
        queues = [jobvisor.connect(pg_url) for _ in range(claimers)]
        with psycopg.connect(pg_url) as holder:
            holder.execute("SELECT txid_current()")  # idle in transaction from here on
            try:
                for _ in range(ROUNDS):
                    for i, q in enumerate(queues):
                        got = q.claim(f"w{i}", limit=BATCH)
                        assert len(got) == BATCH
                        q.complete_many(got)
            finally:
                for q in queues:
                    q.close()  # each server process reports its counts as it ends
            holder.rollback()
        # Wait for every claimer's counts: two updates per job (claim, completion).
        deadline = time.monotonic() + 30
        while (counts := _counts(conn))[1] < updated + 2 * jobs:
            assert time.monotonic() < deadline, "the servers' counts never arrived"
            time.sleep(0.1)
    return (counts[0] - before) / jobs


def test_entries_read_per_claimed_job_do_not_grow_with_the_claimers(pg_url: str) -> None:
    with jobvisor.connect(pg_url) as q:
        q.migrate()
    two = _entries_read_per_job(pg_url, 2)
    twelve = _entries_read_per_job(pg_url, 12)
    # Each claimer's own bound alone: the 11 others' jobs since its last
    # claim read again by every claim (about 12 per job against 2).
    assert twelve <= 2 * two, (two, twelve)
    assert status_counts(pg_url) == {"completed": 12 * ROUNDS * BATCH}
    assert_invariants(pg_url)


def test_the_marks_stay_a_few_hundred_rows_however_many_claims(pg_url: str) -> None:
    with jobvisor.connect(pg_url) as q:
        q.migrate()
        q.enqueue_many([{"job_type": "t"}] * 400)
        claimed = 0
        while got := q.claim("w", limit=1):
            q.complete_many(got)
            claimed += 1
        assert claimed == 400
    with psycopg.connect(pg_url) as conn:
        row = conn.execute("SELECT count(*) FROM jobvisor_claim_marks").fetchone()
    assert row is not None and 250 <= row[0] <= 256, row
    assert status_counts(pg_url) == {"completed": 400}
