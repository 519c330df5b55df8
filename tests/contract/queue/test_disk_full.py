"""A SQLite file that cannot grow (its file system full, or `max_page_count`
reached) refuses an enqueue with a clear `DatabaseError`, writes nothing,
keeps what it holds, and takes jobs again once it may grow."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest

import jobvisor
from jobvisor import Queue
from jobvisor.queue import DatabaseError, DatabaseUnavailable
from jobvisor.queue.faults import Fault, classify

BIG = {"blob": "x" * 200_000}  # more pages than the file has room for


@pytest.fixture
def sqlite_queue(sqlite_url: str) -> Iterator[Queue]:
    q = jobvisor.connect(sqlite_url)
    q.migrate()
    yield q
    q.close()


def fill_up(conn: sqlite3.Connection) -> None:
    """This connection may not grow the file past the pages it has now."""
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")


def test_a_block_goes_on_no_further_once_sqlite_rolled_it_back(sqlite_queue: Queue) -> None:
    """After a full disk SQLite rolls back the statement, and sometimes the
    whole transaction (here: a bulk insert). Then the block's later
    statements must not commit one by one, and its end must not claim a commit."""
    q = sqlite_queue
    ended = pytest.raises(DatabaseError, match="the transaction was rolled back")
    with ended, q.transaction() as conn:
        fill_up(conn)
        q.enqueue("noop", {"first": True}, conn=conn)
        with pytest.raises(DatabaseError, match="database full"):
            q.enqueue_many([{"job_type": "noop", "payload": BIG}] * 3, conn=conn)
        assert not conn.in_transaction  # what this test is about: SQLite ended it
        with pytest.raises(DatabaseError, match="the transaction was rolled back"):
            q.enqueue("noop", {"after": True}, conn=conn)
    assert q.summary().total == 0


def test_a_full_file_refuses_the_enqueue_and_keeps_what_it_holds(sqlite_queue: Queue) -> None:
    q = sqlite_queue
    stored = q.enqueue_many([{"job_type": "noop", "payload": {"n": n}} for n in range(50)])
    full = pytest.raises(DatabaseError, match="database full: the SQLite file cannot grow")
    with full as err, q.transaction() as conn:
        fill_up(conn)
        q.enqueue("noop", {"small": True}, conn=conn)
        q.enqueue("noop", BIG, conn=conn)
    assert not isinstance(err.value, DatabaseUnavailable)  # not an outage: it answers
    assert classify(err.value) is Fault.MAY_PASS  # a worker retries it
    assert q.summary().total == len(stored)  # nothing written, the small job neither

    # What it holds still runs; and once the file may grow, enqueues pass.
    jobs = q.claim("w-1", limit=100)
    assert sorted(j.id for j in jobs) == sorted(stored)
    assert q.complete_many(jobs) == []
    later = q.enqueue("noop", BIG)
    assert q.get(later).payload == BIG
    assert q.summary().count("completed") == len(stored)
