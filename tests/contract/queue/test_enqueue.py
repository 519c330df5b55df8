"""enqueue and enqueue_many: every option, the caller's own transaction,
dedupe keys, bulk writes, notifications and correlation ids."""

from __future__ import annotations

import datetime as dt
import inspect
import sqlite3
import uuid
from typing import Any

import psycopg
import pytest

import jobvisor
from jobvisor import JobStatus, MissingCorrelationId, Queue
from jobvisor.cli import jobs as cli_jobs
from jobvisor.queue import NewJob, ops
from jobvisor.queue.api import parse_url
from jobvisor.queue.model import ENQUEUE_KEYS
from tests.support.invariants import assert_invariants, status_counts
from tests.support.queue import Clock, MakeQueue, close_to, row_count


def test_enqueue_with_every_option(cqueue: Queue, clock: Clock, url: str) -> None:
    run_at = clock() + dt.timedelta(minutes=5)
    jid = cqueue.enqueue(
        "send_email",
        {"to": "a@example.org", "n": [1, 2.5, None, True], "nested": {"k": "v"}},
        queue="mail",
        priority=7,
        run_at=run_at,
        max_attempts=3,
        dedupe_key="email:a",
        correlation_id="req-123",
    )
    job = cqueue.get(jid)
    assert job.id == jid
    assert job.job_type == "send_email"
    assert job.payload == {"to": "a@example.org", "n": [1, 2.5, None, True], "nested": {"k": "v"}}
    assert job.queue == "mail"
    assert job.priority == 7
    assert close_to(job.run_at, run_at)
    assert job.status is JobStatus.PENDING
    assert job.attempts == 0
    assert job.max_attempts == 3
    assert job.dedupe_key == "email:a"
    assert job.correlation_id == "req-123"
    assert job.last_error is None
    assert job.claim_token is None and job.worker_id is None and job.lease_expires_at is None
    assert close_to(job.created_at, clock())
    assert job.started_at is None and job.finished_at is None
    assert_invariants(url)


def test_enqueue_defaults(cqueue: Queue, clock: Clock) -> None:
    job = cqueue.get(cqueue.enqueue("plain"))
    assert job.payload == {}
    assert job.queue == "default"
    assert job.priority == 0
    assert close_to(job.run_at, clock())
    assert job.max_attempts == 20
    assert job.dedupe_key is None
    assert job.correlation_id  # generated


def test_enqueue_with_delay(cqueue: Queue, clock: Clock) -> None:
    a = cqueue.get(cqueue.enqueue("later", delay=90))
    b = cqueue.get(cqueue.enqueue("later", delay=dt.timedelta(hours=1)))
    c = cqueue.get(cqueue.enqueue("now", delay=0))
    assert close_to(a.run_at, clock() + dt.timedelta(seconds=90))
    assert close_to(b.run_at, clock() + dt.timedelta(hours=1))
    assert close_to(c.run_at, clock())


def test_run_at_in_another_timezone_is_the_same_instant(cqueue: Queue, clock: Clock) -> None:
    tz = dt.timezone(dt.timedelta(hours=-5))
    when = (clock() + dt.timedelta(hours=2)).astimezone(tz)
    job = cqueue.get(cqueue.enqueue("tz", run_at=when))
    assert close_to(job.run_at, when)


def test_job_ids_are_uuid7_in_creation_order(queue: Queue) -> None:
    ids = [queue.enqueue("x") for _ in range(20)]
    assert all(i.version == 7 for i in ids)
    assert ids == sorted(ids, key=lambda u: u.int)


def test_payload_round_trips_unicode_and_scalars(queue: Queue) -> None:
    for payload in ["plain string", 42, 1.5, [1, "two"], {"emoji": "\u2603\U0001f600"}, True]:
        assert queue.get(queue.enqueue("p", payload)).payload == payload


# --- the caller's own transaction ---------------------------------------------


def _caller_conn(url: str) -> Any:
    engine, target = parse_url(url)
    if engine == "postgres":
        return psycopg.connect(target)
    return sqlite3.connect(target, timeout=30)


@pytest.mark.parametrize("outcome", ["commit", "rollback"])
def test_enqueue_in_the_callers_transaction(queue: Queue, url: str, outcome: str) -> None:
    conn = _caller_conn(url)
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS orders (n integer)")
        conn.commit()
        conn.execute("INSERT INTO orders (n) VALUES (1)")
        jid = queue.enqueue("ship_order", {"order": 1}, conn=conn)
        many = queue.enqueue_many([{"job_type": "a"}, {"job_type": "b"}], conn=conn)
        # Not visible to anyone else before the caller decides.
        assert row_count(url) == 0
        getattr(conn, outcome)()
    finally:
        conn.close()
    ids = [jid, *many]
    if outcome == "commit":
        assert [queue.get(i).status for i in ids] == [JobStatus.PENDING] * 3
        assert row_count(url) == 3
        assert [j.id for j in queue.claim("w", limit=10)] == ids
    else:
        assert row_count(url) == 0
        for i in ids:
            with pytest.raises(jobvisor.JobNotFound):
                queue.get(i)
    assert_invariants(url)


def test_dedupe_in_the_callers_transaction(queue: Queue, url: str) -> None:
    conn = _caller_conn(url)
    try:
        a = queue.enqueue("d", dedupe_key="k", conn=conn)
        b = queue.enqueue("d", dedupe_key="k", conn=conn)
        assert a == b
        conn.commit()
    finally:
        conn.close()
    assert row_count(url) == 1


# --- dedupe --------------------------------------------------------------------


def test_dedupe_key_returns_the_live_job_and_writes_nothing(queue: Queue, url: str) -> None:
    first = queue.enqueue("report", {"v": 1}, dedupe_key="daily-report")
    before = status_counts(url)
    again = queue.enqueue("report", {"v": 2}, dedupe_key="daily-report", priority=9)
    assert again == first
    assert status_counts(url) == before
    job = queue.get(first)
    assert job.payload == {"v": 1} and job.priority == 0
    other = queue.enqueue("report", dedupe_key="weekly-report")
    assert other != first
    assert_invariants(url)


@pytest.mark.parametrize("finish", ["complete", "fail_dead", "cancel"])
def test_dedupe_key_is_free_again_once_the_job_is_finished(
    queue: Queue, url: str, finish: str
) -> None:
    first = queue.enqueue("report", dedupe_key="k", max_attempts=1)
    (job,) = queue.claim("w")
    # A running job still holds its key.
    assert queue.enqueue("report", dedupe_key="k") == first
    if finish == "complete":
        queue.complete(job)
    elif finish == "fail_dead":
        assert queue.fail(job, "boom") is JobStatus.DEAD
    else:
        queue.release(job)
        queue.cancel(first)
    second = queue.enqueue("report", dedupe_key="k")
    assert second != first
    assert queue.get(second).status is JobStatus.PENDING
    assert queue.enqueue("report", dedupe_key="k") == second
    assert row_count(url) == 2
    assert_invariants(url)


def test_dedupe_key_held_by_a_retryable_job(queue: Queue) -> None:
    first = queue.enqueue("r", dedupe_key="k")
    (job,) = queue.claim("w")
    assert queue.fail(job, "try again") is JobStatus.RETRYABLE
    assert queue.enqueue("r", dedupe_key="k") == first


# --- enqueue_many ---------------------------------------------------------------


def test_enqueue_many_returns_ids_in_order(cqueue: Queue, clock: Clock, url: str) -> None:
    items: list[Any] = [
        {"job_type": "a", "payload": {"i": 0}},
        {"job_type": "b", "payload": {"i": 1}, "queue": "q2", "priority": 5, "max_attempts": 2},
        {"job_type": "c", "delay": 60},
        {"job_type": "d", "run_at": clock() + dt.timedelta(hours=1), "correlation_id": "cid"},
        NewJob.build("e", [1, 2]),
    ]
    ids = cqueue.enqueue_many(items)
    assert len(ids) == len(set(ids)) == 5
    jobs = [cqueue.get(i) for i in ids]
    assert [j.job_type for j in jobs] == ["a", "b", "c", "d", "e"]
    assert jobs[0].payload == {"i": 0}
    assert (jobs[1].queue, jobs[1].priority, jobs[1].max_attempts) == ("q2", 5, 2)
    assert close_to(jobs[2].run_at, clock() + dt.timedelta(seconds=60))
    assert close_to(jobs[3].run_at, clock() + dt.timedelta(hours=1))
    assert jobs[3].correlation_id == "cid"
    assert jobs[4].payload == [1, 2]
    assert all(close_to(j.created_at, clock()) for j in jobs)
    assert all(j.correlation_id for j in jobs)
    assert_invariants(url)


def test_enqueue_many_bulk_path_at_scale(queue: Queue, url: str) -> None:
    ids = queue.enqueue_many({"job_type": "bulk", "payload": {"i": i}} for i in range(5000))
    assert len(set(ids)) == 5000
    assert row_count(url) == 5000
    claimed = queue.claim("w", limit=5000)
    assert sorted(j.payload["i"] for j in claimed) == list(range(5000))


def test_enqueue_many_with_dedupe_keys(queue: Queue, url: str) -> None:
    live = queue.enqueue("x", dedupe_key="old")
    ids = queue.enqueue_many(
        [
            {"job_type": "x", "dedupe_key": "new"},
            {"job_type": "x"},
            {"job_type": "x", "dedupe_key": "old"},
            {"job_type": "x", "dedupe_key": "new"},
        ]
    )
    assert ids[2] == live
    assert ids[3] == ids[0]
    assert len({ids[0], ids[1], live}) == 3
    assert row_count(url) == 3
    assert_invariants(url)


def test_enqueue_many_empty(queue: Queue, url: str) -> None:
    assert queue.enqueue_many([]) == []
    assert row_count(url) == 0


@pytest.mark.parametrize(
    ("bad_item", "named"),
    [
        ({"job_type": ""}, "job_type=''"),
        ({"job_type": "x", "payload": {1, 2}}, "payload="),
        ({"job_type": "x", "max_attempts": 0}, "max_attempts=0"),
        ({"job_type": "x", "delay": -1}, "delay=-1"),
        ({"job_type": "x", "bogus": 1}, "bogus"),
        ({"payload": {}}, "job_type"),
        ("not a mapping", "'not a mapping'"),
    ],
)
def test_enqueue_many_checks_every_item_before_writing(
    queue: Queue, url: str, bad_item: Any, named: str
) -> None:
    items = [{"job_type": "ok"}, {"job_type": "ok", "dedupe_key": "d"}, bad_item]
    with pytest.raises(jobvisor.InvalidArgument) as info:
        queue.enqueue_many(items)
    assert "jobs[2]" in str(info.value)
    assert named in str(info.value)
    assert row_count(url) == 0


# --- notifications --------------------------------------------------------------


def _notifications_until_sentinel(listener: psycopg.Connection[Any], url: str) -> list[str]:
    """Every `jobvisor` payload received before a sentinel sent after them.

    PostgreSQL delivers notifications in commit order, so once the sentinel
    (committed last) arrives, every earlier one has too: no waiting for silence."""
    with psycopg.connect(url, autocommit=True) as other:
        other.execute("NOTIFY jobvisor_test_sentinel")
    got: list[str] = []
    for note in listener.notifies(timeout=30):
        if note.channel == "jobvisor_test_sentinel":
            return got
        got.append(note.payload)
    raise AssertionError(f"no sentinel within 30s; got {got}")


@pytest.fixture
def listener(pg_url: str) -> Any:
    with jobvisor.connect(pg_url) as q:
        q.migrate()
    conn = psycopg.connect(pg_url, autocommit=True)
    conn.execute("LISTEN jobvisor")
    conn.execute("LISTEN jobvisor_test_sentinel")
    yield conn
    conn.close()


def test_notify_once_per_transaction(pg_url: str, listener: psycopg.Connection[Any]) -> None:
    with jobvisor.connect(pg_url) as q, psycopg.connect(pg_url) as conn:
        for i in range(5):
            q.enqueue("n", {"i": i}, conn=conn)
        q.enqueue_many([{"job_type": "n"}] * 3, conn=conn)
        conn.commit()
        assert _notifications_until_sentinel(listener, pg_url) == ["default"]

        q.enqueue_many([{"job_type": "n"}] * 50)
        assert _notifications_until_sentinel(listener, pg_url) == ["default"]

        q.enqueue_many([{"job_type": "n", "queue": "mail"}, {"job_type": "n", "queue": "img"}])
        assert sorted(_notifications_until_sentinel(listener, pg_url)) == ["img", "mail"]


def test_no_notify_when_rolled_back(pg_url: str, listener: psycopg.Connection[Any]) -> None:
    with jobvisor.connect(pg_url) as q, psycopg.connect(pg_url) as conn:
        q.enqueue("n", conn=conn)
        conn.rollback()
        assert _notifications_until_sentinel(listener, pg_url) == []


def test_notify_for_each_plain_enqueue(pg_url: str, listener: psycopg.Connection[Any]) -> None:
    with jobvisor.connect(pg_url) as q:
        q.enqueue("n")
        q.enqueue("n", queue="other")
        assert _notifications_until_sentinel(listener, pg_url) == ["default", "other"]


def test_notify_only_for_jobs_due_now(pg_url: str, listener: psycopg.Connection[Any]) -> None:
    now = dt.datetime.now(dt.UTC)
    with jobvisor.connect(pg_url) as q:
        q.enqueue("n", queue="past", run_at=now - dt.timedelta(minutes=1))
        q.enqueue("n", queue="future", run_at=now + dt.timedelta(hours=1))
        q.enqueue("n", queue="delayed", delay=60)
        assert _notifications_until_sentinel(listener, pg_url) == ["past"]


# --- correlation ids ------------------------------------------------------------


def test_correlation_id_from_the_context(queue: Queue) -> None:
    with jobvisor.correlation_scope("ctx-1"):
        assert jobvisor.current_correlation_id() == "ctx-1"
        a = queue.enqueue("c")
        b = queue.enqueue("c", correlation_id="explicit")
        (m,) = queue.enqueue_many([{"job_type": "c"}])
    assert jobvisor.current_correlation_id() is None
    assert queue.get(a).correlation_id == "ctx-1"
    assert queue.get(b).correlation_id == "explicit"
    assert queue.get(m).correlation_id == "ctx-1"


def test_correlation_id_is_the_jobs_own_id_when_absent(queue: Queue) -> None:
    a, b = queue.get(queue.enqueue("c")), queue.get(queue.enqueue("c"))
    assert (a.correlation_id, b.correlation_id) == (a.id.hex, b.id.hex)


def test_require_correlation_id(make_queue: MakeQueue, url: str) -> None:
    strict = make_queue(require_correlation_id=True)
    with pytest.raises(MissingCorrelationId) as info:
        strict.enqueue("needs_cid")
    assert "needs_cid" in str(info.value)
    with pytest.raises(MissingCorrelationId):
        strict.enqueue_many([{"job_type": "a", "correlation_id": "x"}, {"job_type": "b"}])
    assert row_count(url) == 0
    assert strict.get(strict.enqueue("ok", correlation_id="given")).correlation_id == "given"
    with jobvisor.correlation_scope("scoped"):
        assert strict.get(strict.enqueue("ok")).correlation_id == "scoped"
    assert row_count(url) == 2


def test_claimed_job_carries_its_correlation_id(queue: Queue) -> None:
    queue.enqueue("c", correlation_id="trace-9")
    (job,) = queue.claim("w")
    assert job.correlation_id == "trace-9"


def test_uuid_job_ids_accepted_as_strings(queue: Queue) -> None:
    jid = queue.enqueue("s")
    assert queue.get(str(jid)).id == jid
    assert isinstance(jid, uuid.UUID)


def test_the_enqueue_signature_is_newjob_builds() -> None:
    """`NewJob.build` defines the enqueue arguments; `enqueue` (and so
    `Queue.enqueue` and `AsyncQueue.enqueue`) takes exactly those, with the
    same defaults, plus the queue's own `conn`, and the command line's JSON
    lines accept exactly those keys."""
    build = list(inspect.signature(NewJob.build).parameters.values())
    enqueue = list(inspect.signature(ops.enqueue).parameters.values())
    assert enqueue[0].name == "ctx" and enqueue[-1].name == "conn"
    assert [(p.name, p.kind, p.default) for p in enqueue[1:-1]] == [
        (p.name, p.kind, p.default) for p in build
    ]
    assert tuple(p.name for p in build) == ENQUEUE_KEYS
    assert vars(cli_jobs)["ENQUEUE_KEYS"] is ENQUEUE_KEYS
