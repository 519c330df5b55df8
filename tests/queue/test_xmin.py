"""`oldest_xmin()` names the server process whose open transaction holds back
VACUUM's horizon on the queue's database; SQLite has no such thing."""

from __future__ import annotations

import sqlite3

import psycopg

import jobvisor
from jobvisor import Queue
from jobvisor.queue import XminHolder


def _holder(url: str) -> psycopg.Connection[tuple[object, ...]]:
    """A second session that takes a transaction id and stays idle in its transaction."""
    conn = psycopg.connect(url, application_name="report-export")
    conn.execute("SELECT txid_current()")
    return conn


def test_the_open_transaction_is_named_with_its_pid_application_and_state(
    pg_url: str,
) -> None:
    with _connect(pg_url) as q, _holder(pg_url) as held:
        first = q.oldest_xmin()
        assert isinstance(first, XminHolder)
        assert first.pid == held.info.backend_pid
        assert first.application_name == "report-export"
        assert first.state == "idle in transaction"
        assert first.backend_type == "client backend"
        held.execute("SELECT pg_sleep(0.05)")
        later = q.oldest_xmin()
        assert later is not None and later.pid == first.pid
        assert later.age > first.age
        held.rollback()
        after = q.oldest_xmin()
        assert after is None or after.pid != held.info.backend_pid


def test_the_oldest_of_two_holders_is_the_one_named(pg_url: str) -> None:
    with _connect(pg_url) as q, _holder(pg_url) as older, _holder(pg_url) as newer:
        holder = q.oldest_xmin()
        assert holder is not None and holder.pid == older.info.backend_pid
        older.rollback()
        holder = q.oldest_xmin()
        assert holder is not None and holder.pid == newer.info.backend_pid


def test_sqlite_has_no_horizon_even_with_a_transaction_open(sqlite_url: str) -> None:
    with _connect(sqlite_url) as q:
        path = sqlite_url.removeprefix("sqlite:///")
        other = sqlite3.connect(path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            other.execute("SELECT count(*) FROM jobvisor_jobs").fetchone()
            assert q.oldest_xmin() is None
        finally:
            other.execute("ROLLBACK")
            other.close()


def _connect(url: str) -> Queue:
    q = jobvisor.connect(url)
    q.migrate()
    return q
