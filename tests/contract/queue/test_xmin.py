"""`oldest_xmin()` names the server process whose open transaction holds back
VACUUM's horizon on the queue's database; SQLite has no such thing.

The PostgreSQL tests run on a cluster of their own: a transaction of any
database of the server may be the one named, so another suite's on a shared
server could be older than the test's."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator

import psycopg
import pytest

import jobvisor
from jobvisor import Queue
from jobvisor.queue import XminHolder
from tests.support.postgres import throwaway_cluster


@pytest.fixture(scope="module")
def _cluster_url() -> Iterator[str]:
    with throwaway_cluster() as (_, admin_url):
        yield admin_url


@pytest.fixture
def alone_url(_cluster_url: str) -> str:
    """A fresh database on the module's own cluster."""
    name = f"q_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(_cluster_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    return _cluster_url.rsplit("/", 1)[0] + "/" + name


def _holder(url: str) -> psycopg.Connection[tuple[object, ...]]:
    """A second session that takes a transaction id and stays idle in its transaction."""
    conn = psycopg.connect(url, application_name="report-export")
    conn.execute("SELECT txid_current()")
    return conn


def test_the_open_transaction_is_named_with_its_pid_application_and_state(
    alone_url: str,
) -> None:
    with _connect(alone_url) as q, _holder(alone_url) as held:
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


def test_the_oldest_of_two_holders_is_the_one_named(alone_url: str) -> None:
    with _connect(alone_url) as q, _holder(alone_url) as older, _holder(alone_url) as newer:
        holder = q.oldest_xmin()
        assert holder is not None and holder.pid == older.info.backend_pid
        older.rollback()
        holder = q.oldest_xmin()
        assert holder is not None and holder.pid == newer.info.backend_pid


def test_a_transaction_of_another_database_is_named(_cluster_url: str, alone_url: str) -> None:
    """A transaction id open in another database of the server holds this
    database's horizon back too (each snapshot here carries it as its xmin):
    it is the one named, not this database's sessions that carry its xmin."""
    with _connect(alone_url) as q, _holder(_cluster_url) as held:
        q.enqueue("t")
        with psycopg.connect(alone_url) as busy:  # a session here, its snapshot's xmin old
            busy.execute("SELECT count(*) FROM jobvisor_jobs")
            holder = q.oldest_xmin()
            assert holder is not None and holder.pid == held.info.backend_pid
            assert holder.application_name == "report-export"
        held.rollback()
        holder = q.oldest_xmin()
        assert holder is None or holder.pid != held.info.backend_pid


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
