"""enqueue_many's bulk path: the rows a binary COPY (executemany on SQLite)
writes are the rows `enqueue` writes, its quick checks refuse what
`enqueue` refuses, dedupe keys are honoured beside the COPY, and the whole
call is one transaction."""

from __future__ import annotations

import contextlib
import datetime as dt
import sqlite3
from typing import Any

import psycopg
import pytest

import jobvisor
from jobvisor import AsyncQueue, InvalidArgument, JobStatus, Queue
from jobvisor.queue import DatabaseError, NewJob
from jobvisor.queue.api import parse_url
from jobvisor.queue.model import new_job_id, new_job_ids
from tests.support.aio import run_with
from tests.support.invariants import assert_invariants, query_all
from tests.support.queue import Clock, MakeQueue, row_count

# Every column `enqueue` sets, but the id, the correlation id and the times.
COMPARED = (
    "queue, job_type, {payload}, priority, max_attempts, dedupe_key, status, attempts, {meta}"
)


def _columns(url: str, ids: list[Any]) -> list[tuple[Any, ...]]:
    """COMPARED's columns of each job, in the order of `ids`, as stored."""
    if url.startswith("postgresql"):
        columns = COMPARED.format(payload="payload::text", meta="meta::text")
    else:
        columns = COMPARED.format(payload="payload", meta="meta")
    (rows,) = query_all(url, [f"SELECT id, {columns} FROM jobvisor_jobs"])
    by_id = {str(r[0]): r[1:] for r in rows}
    return [by_id[str(i)] for i in ids]


ITEMS: list[dict[str, Any]] = [
    {"job_type": "plain"},
    {"job_type": "plain", "payload": {"to": "a@example.org", "n": [1, 2.5, None, True]}},
    {"job_type": "text", "payload": "just a string", "queue": "mail"},
    {"job_type": "list", "payload": [1, {"k": "v"}], "priority": -7, "max_attempts": 1},
    {"job_type": "unicode", "payload": {"name": "Zoë 日本 🎉", "quote": 'a "b" \\ c'}},
    {"job_type": "number", "payload": 42, "priority": 2**31 - 1},
    {"job_type": "keyed", "payload": {"k": 1}, "dedupe_key": "bulk-key"},
]


def test_bulk_rows_equal_enqueue_rows(cqueue: Queue, url: str) -> None:
    bulk = cqueue.enqueue_many(ITEMS)
    bulk_rows = _columns(url, bulk)
    one_by_one = [cqueue.enqueue(**{**item, "dedupe_key": None}) for item in ITEMS]
    single_rows = _columns(url, one_by_one)
    # The keyed item's twin was enqueued without its key; all else is equal.
    assert bulk_rows[:-1] == single_rows[:-1]
    assert bulk_rows[-1][5] == "bulk-key" and single_rows[-1][5] is None
    assert [cqueue.get(i).payload for i in bulk] == [i.get("payload", {}) for i in ITEMS]
    assert_invariants(url)


def test_payload_is_stored_as_json_not_as_a_string(pg_url: str) -> None:
    with jobvisor.connect(pg_url) as q:
        q.migrate()
        q.enqueue_many([{"job_type": "j", "payload": {"a": [1]}}, {"job_type": "j"}])
    (kinds,) = query_all(pg_url, ["SELECT jsonb_typeof(payload) FROM jobvisor_jobs"])
    assert kinds == [("object",), ("object",)]
    (found,) = query_all(
        pg_url, ["SELECT count(*) FROM jobvisor_jobs WHERE payload @> '{\"a\": [1]}'"]
    )
    assert found == [(1,)]


def test_times_of_bulk_rows(cqueue: Queue, clock: Clock) -> None:
    at = clock() + dt.timedelta(hours=2)
    ids = cqueue.enqueue_many(
        [{"job_type": "now"}, {"job_type": "later", "delay": 90}, {"job_type": "at", "run_at": at}]
    )
    now, later, fixed = (cqueue.get(i) for i in ids)
    assert now.run_at == now.created_at == clock()
    assert later.run_at == clock() + dt.timedelta(seconds=90)
    assert fixed.run_at == at
    assert {now.created_at, later.created_at, fixed.created_at} == {clock()}


def test_dedupe_keys_beside_the_copy(queue: Queue, url: str) -> None:
    live = queue.enqueue("x", dedupe_key="held")
    items: list[dict[str, Any]] = []
    for n in range(300):
        item: dict[str, Any] = {"job_type": "x", "payload": {"n": n}}
        if n % 10 == 3:
            item["dedupe_key"] = f"k{n // 20}"  # every key twice: 3 and 13, 23 and 33...
        if n == 150:
            item["dedupe_key"] = "held"
        items.append(item)
    ids = queue.enqueue_many(items)
    assert len(ids) == 300
    assert ids[150] == live
    for n in range(3, 300, 20):
        assert ids[n] == ids[n + 10], n  # the second item with a key gets the first's job
    assert len(set(ids)) == 300 - 15  # one of them the live job
    assert row_count(url) == 1 + 300 - 15 - 1
    for n in (0, 3, 149, 151, 299):
        assert queue.get(ids[n]).payload == {"n": n}
    assert_invariants(url)


def test_dedupe_key_of_a_finished_job_is_free_again(queue: Queue) -> None:
    first = queue.enqueue("x", dedupe_key="k")
    (job,) = queue.claim("w")
    queue.complete(job)
    ids = queue.enqueue_many([{"job_type": "x"}, {"job_type": "x", "dedupe_key": "k"}])
    assert ids[1] != first
    assert queue.get(ids[1]).status is JobStatus.PENDING


def _refuse_job_type(url: str, job_type: str) -> None:
    """A trigger that makes the database refuse jobs of `job_type`: a failure
    no check of ours foresees, after the COPY has written its rows."""
    if url.startswith("postgresql"):
        script = [
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            f" IF NEW.job_type = '{job_type}' THEN RAISE EXCEPTION 'refused'; END IF;"
            " RETURN NEW; END $$",
            "CREATE TRIGGER refuse BEFORE INSERT ON jobvisor_jobs"
            " FOR EACH ROW EXECUTE FUNCTION refuse()",
        ]
    else:
        script = [
            "CREATE TRIGGER refuse BEFORE INSERT ON jobvisor_jobs"
            f" WHEN NEW.job_type = '{job_type}' BEGIN SELECT RAISE(ABORT, 'refused'); END"
        ]
    engine, target = parse_url(url)
    if engine == "postgres":
        with psycopg.connect(target, autocommit=True) as conn:
            for statement in script:
                conn.execute(statement.encode())
        return
    with contextlib.closing(sqlite3.connect(target, isolation_level=None)) as lite:
        for statement in script:
            lite.execute(statement)


def test_all_or_nothing_across_copy_and_keyed_rows(queue: Queue, url: str) -> None:
    _refuse_job_type(url, "boom")
    items: list[dict[str, Any]] = [{"job_type": "ok", "payload": {"n": n}} for n in range(500)]
    items.append({"job_type": "ok", "dedupe_key": "a"})
    items.append({"job_type": "boom", "dedupe_key": "b"})  # fails after the COPY went in
    with pytest.raises(DatabaseError):
        queue.enqueue_many(items)
    assert row_count(url) == 0
    assert len(queue.enqueue_many(items[:501])) == 501


def test_all_or_nothing_in_the_callers_transaction(queue: Queue, url: str) -> None:
    items = [{"job_type": "ok"}] * 50 + [{"job_type": "ok", "dedupe_key": "k"}]
    with pytest.raises(RuntimeError), queue.transaction() as conn:
        assert len(queue.enqueue_many(items, conn=conn)) == 51
        raise RuntimeError("the caller changes its mind")
    assert row_count(url) == 0


@pytest.mark.parametrize(
    ("bad_item", "named"),
    [
        ({"job_type": "ok", "priority": True}, "priority=True"),
        ({"job_type": "ok", "priority": 2**31}, "priority=2147483648"),
        ({"job_type": "ok", "priority": 1.5}, "priority=1.5"),
        ({"job_type": "ok", "max_attempts": 0}, "max_attempts=0"),
        ({"job_type": "ok", "max_attempts": "3"}, "max_attempts='3'"),
        ({"job_type": ["ok"]}, "job_type=['ok']"),
        ({"job_type": "ok", "queue": " "}, "queue=' '"),
        ({"job_type": "ok", "payload": float("nan")}, "payload=nan"),
        ({"job_type": "ok", "payload": {"a": "\x00"}}, "NUL"),
        ({"job_type": "ok", "payload": "\ud800"}, "UTF-8"),
        ({"job_type": "ok", "payload": "x" * 2_000_000}, "expected at most"),
        ({"job_type": "ok", "payload": {"k": "\u00e9" * 600_000}}, "expected at most"),
    ],
)
def test_quick_checks_refuse_what_enqueue_refuses(
    queue: Queue, url: str, bad_item: dict[str, Any], named: str
) -> None:
    """Items that would take the quick checks (the names are known from the
    first items) are refused with `enqueue`'s words, naming their index."""
    items = [{"job_type": "ok"}, {"job_type": "ok", "queue": "default"}, bad_item]
    with pytest.raises(InvalidArgument) as bulk_info:
        queue.enqueue_many(items)
    assert str(bulk_info.value).startswith("jobs[2]: ")
    assert named in str(bulk_info.value)
    with pytest.raises(InvalidArgument) as one_info:
        queue.enqueue(**bad_item)
    assert str(bulk_info.value) == "jobs[2]: " + str(one_info.value)
    assert row_count(url) == 0


def test_newjob_items_keep_their_ids(queue: Queue) -> None:
    jobs = [NewJob.build("n", {"i": i}) for i in range(3)]
    assert queue.enqueue_many([*jobs, {"job_type": "m"}])[:3] == [j.id for j in jobs]


def test_correlation_ids_in_bulk(make_queue: MakeQueue, url: str) -> None:
    queue = make_queue()
    ids = queue.enqueue_many(
        [{"job_type": "c"}] * 100 + [{"job_type": "c", "correlation_id": "own"}]
    )
    cids = [queue.get(i).correlation_id for i in ids]
    assert cids[:100] == [i.hex for i in ids[:100]]  # each its own id
    assert cids[100] == "own"
    with jobvisor.correlation_scope("ctx"):
        ids = queue.enqueue_many([{"job_type": "c"}] * 10)
    assert {queue.get(i).correlation_id for i in ids} == {"ctx"}
    strict = make_queue(require_correlation_id=True)
    with pytest.raises(jobvisor.MissingCorrelationId):
        strict.enqueue_many([{"job_type": "a", "correlation_id": "x"}] * 5 + [{"job_type": "b"}])
    assert row_count(url) == 111


def test_job_ids_strictly_increase_across_batches() -> None:
    made = [new_job_id(), *new_job_ids(10_000), new_job_id(), *new_job_ids(3), new_job_id()]
    assert made == sorted(made)
    assert len(set(made)) == len(made)
    assert {u.version for u in made} == {7}
    assert new_job_ids(0) == []


def test_async_bulk_enqueue(aqueue: AsyncQueue, url: str) -> None:
    """The async face runs the same plan: the COPY, the keyed rows, the
    time filled in by the async runner."""

    async def body(q: AsyncQueue) -> tuple[list[Any], list[Any]]:
        held = await q.enqueue("a", dedupe_key="k")
        items: list[Any] = [{"job_type": "a", "payload": {"n": n}} for n in range(2000)]
        items.insert(1000, {"job_type": "a", "dedupe_key": "k"})
        ids = await q.enqueue_many(items)
        assert ids[1000] == held
        jobs = [await q.get(ids[n]) for n in (0, 999, 1001, 2000)]
        return ids, [j.payload for j in jobs]

    ids, payloads = run_with(aqueue, body)
    assert payloads == [{"n": 0}, {"n": 999}, {"n": 1000}, {"n": 1999}]
    assert len(set(ids)) == 2001
    assert row_count(url) == 2001
    assert_invariants(url)


def test_dedupe_keys_and_unique_keys_in_one_call(queue: Queue, url: str) -> None:
    """Rows with a dedupe key go in together, rows with `unique` one by one,
    the plain ones by the COPY: each gets the id `enqueue` would give it."""
    items: list[dict[str, Any]] = [
        {"job_type": "u", "unique": jobvisor.Unique(key="one")},
        {"job_type": "d", "dedupe_key": "k"},
        {"job_type": "p"},
        {"job_type": "u", "unique": jobvisor.Unique(key="one")},
        {"job_type": "d", "dedupe_key": "k"},
        {"job_type": "d", "dedupe_key": "other"},
    ]
    ids = queue.enqueue_many(items)
    assert ids[3] == ids[0] and ids[4] == ids[1]
    assert len(set(ids)) == 4 == row_count(url)
    assert queue.enqueue("u", unique=jobvisor.Unique(key="one")) == ids[0]
    assert queue.enqueue("d", dedupe_key="k") == ids[1]
    assert [queue.get(i).job_type for i in ids] == ["u", "d", "p", "u", "d", "d"]
    assert_invariants(url)
