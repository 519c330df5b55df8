"""The invariant checker itself must be able to fail: break each invariant
in a scratch table (its CHECK constraints dropped) and see it reported."""

from __future__ import annotations

import sqlite3

import psycopg
import pytest

from jobvisor import Queue
from jobvisor.queue.api import parse_url
from tests.support.invariants import assert_invariants, violations

BREAKS = {
    "a running job has a claim_token": "UPDATE jobvisor_jobs SET status = 'running'",
    "no status other than running has a claim token": (
        "UPDATE jobvisor_jobs SET claim_token = {token}"
    ),
    "attempts never exceed max_attempts": "UPDATE jobvisor_jobs SET attempts = max_attempts + 1",
    "status is one of the known statuses": "UPDATE jobvisor_jobs SET status = 'lost'",
}


def _break(url: str, statement: str) -> None:
    engine, target = parse_url(url)
    if engine == "postgres":
        with psycopg.connect(target, autocommit=True) as conn:
            for (name,) in conn.execute(
                "SELECT conname FROM pg_constraint WHERE conrelid = 'jobvisor_jobs'::regclass"
                " AND contype = 'c'"
            ).fetchall():
                conn.execute(f'ALTER TABLE jobvisor_jobs DROP CONSTRAINT "{name}"')
            conn.execute(statement.format(token="gen_random_uuid()").encode())
        return
    lite = sqlite3.connect(target, timeout=30)
    try:
        lite.execute("PRAGMA ignore_check_constraints = ON")
        lite.execute(statement.format(token="'0123456789abcdef0123456789abcdef'"))
        lite.commit()
    finally:
        lite.close()


@pytest.mark.parametrize("name", sorted(BREAKS))
def test_checker_reports_a_broken_invariant(queue: Queue, url: str, name: str) -> None:
    queue.enqueue("t")
    assert_invariants(url)
    _break(url, BREAKS[name])
    assert any(key.startswith(name) for key in violations(url)), violations(url)
    with pytest.raises(AssertionError, match="invariants broken"):
        assert_invariants(url)
