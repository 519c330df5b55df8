"""DESIGN.md's invariants, checked against the jobs table itself with SQL.

`assert_invariants(url)` works on both engines (it takes the database URL),
so the queue's contract suite and the worker and supervisor tests can all
end a scenario with it."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

import psycopg

from jobvisor.queue.api import parse_url

STATUSES = ("pending", "running", "retryable", "completed", "dead", "cancelled")

# Each check selects the offending rows (id, status, ...), so an empty result
# means the invariant holds.
CHECKS: dict[str, str] = {
    "a running job has a claim_token, a worker_id and a lease_expires_at": (
        "SELECT id, status, claim_token, worker_id, lease_expires_at FROM jobvisor_jobs "
        "WHERE status = 'running' AND "
        "(claim_token IS NULL OR worker_id IS NULL OR lease_expires_at IS NULL)"
    ),
    "no status other than running has a claim token": (
        "SELECT id, status, claim_token FROM jobvisor_jobs "
        "WHERE status <> 'running' AND claim_token IS NOT NULL"
    ),
    "attempts never exceed max_attempts (and are not negative)": (
        "SELECT id, status, attempts, max_attempts FROM jobvisor_jobs "
        "WHERE attempts > max_attempts OR attempts < 0 OR max_attempts < 1"
    ),
    "status is one of the known statuses": (
        "SELECT id, status FROM jobvisor_jobs WHERE status NOT IN "
        "('pending', 'running', 'retryable', 'completed', 'dead', 'cancelled', 'waiting')"
    ),
    "a terminal job has finished_at, a live job has none": (
        "SELECT id, status, finished_at FROM jobvisor_jobs WHERE "
        "(status IN ('completed', 'dead', 'cancelled') AND finished_at IS NULL) OR "
        "(status IN ('pending', 'running', 'retryable') AND finished_at IS NOT NULL)"
    ),
    "a running job was started": (
        "SELECT id, status FROM jobvisor_jobs "
        "WHERE status = 'running' AND (started_at IS NULL OR attempts < 1)"
    ),
    "at most one live job per dedupe key": (
        "SELECT dedupe_key, COUNT(*) FROM jobvisor_jobs "
        "WHERE dedupe_key IS NOT NULL AND status IN ('pending', 'running', 'retryable') "
        "GROUP BY dedupe_key HAVING COUNT(*) > 1"
    ),
}


def query_all(url: str, queries: Sequence[str]) -> list[list[tuple[Any, ...]]]:
    """Run read-only queries on their own connection; the rows of each."""
    engine, target = parse_url(url)
    if engine == "postgres":
        with psycopg.connect(target, autocommit=True) as conn:
            return [conn.execute(q).fetchall() for q in queries]
    lite = sqlite3.connect(target, timeout=30)
    try:
        return [lite.execute(q).fetchall() for q in queries]
    finally:
        lite.close()


def violations(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every broken invariant with its offending rows (empty when all hold)."""
    results = query_all(url, list(CHECKS.values()))
    return {name: rows for name, rows in zip(CHECKS, results, strict=True) if rows}


def assert_invariants(url: str) -> None:
    """Fail with the offending rows if any invariant of the jobs table is broken."""
    broken = violations(url)
    assert not broken, "job invariants broken:\n" + "\n".join(
        f"- {name}: {rows[:5]!r}" for name, rows in broken.items()
    )


def status_counts(url: str) -> dict[str, int]:
    """How many jobs are in each status (zero counts left out)."""
    (rows,) = query_all(url, ["SELECT status, COUNT(*) FROM jobvisor_jobs GROUP BY status"])
    return {str(status): int(n) for status, n in rows}
