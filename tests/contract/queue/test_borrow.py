"""`borrow`: a queue on a connection another library owns, in that
connection's transaction, on both engines."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from jobvisor import InvalidArgument, JobNotFound, JobStatus, Queue
from jobvisor.queue.api import borrow, parse_url


@pytest.fixture
def owned(queue: Queue, url: str) -> Iterator[Any]:
    """A driver connection of the test's own, as an application holds one:
    in a transaction it controls."""
    engine, target = parse_url(url)
    conn: Any
    if engine == "postgres":
        conn = psycopg.connect(target)
    else:
        conn = sqlite3.connect(target, isolation_level=None)
        conn.execute("BEGIN")
    try:
        yield conn
    finally:
        conn.close()


def test_a_borrowed_queue_writes_in_its_owners_transaction(
    queue: Queue, owned: Any, url: str
) -> None:
    borrowed = borrow(lambda: owned, engine=queue.engine)
    job_id = borrowed.enqueue("t", {"n": 1})
    assert borrowed.get(job_id).payload == {"n": 1}  # its owner sees its own work
    with pytest.raises(JobNotFound):
        queue.get(job_id)  # nobody else does, yet
    owned.rollback()
    with pytest.raises(JobNotFound):
        borrowed.get(job_id)
    kept = borrowed.enqueue("t", {"n": 2})
    owned.commit()
    assert queue.get(kept).status is JobStatus.PENDING


def test_a_borrowed_queue_refuses_to_migrate(url: str) -> None:
    engine, target = parse_url(url)
    owner: Any = psycopg.connect(target) if engine == "postgres" else sqlite3.connect(target)
    try:
        borrowed = borrow(lambda: owner, engine=engine)
        with pytest.raises(InvalidArgument, match="borrowed connection"):
            borrowed.migrate()
        with pytest.raises(InvalidArgument, match="engine='mysql'"):
            borrow(lambda: owner, engine="mysql")
    finally:
        owner.close()


def test_a_borrowed_queue_prepares_nothing(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as owner:
        from jobvisor import connect  # noqa: PLC0415

        with connect(pg_url) as q:
            q.migrate()
        borrowed = borrow(lambda: owner, engine="postgres")
        job_id = borrowed.enqueue("t")
        for _ in range(10):
            borrowed.get(job_id)
        prepared = owner.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()
        assert prepared == (0,)
