"""Uniqueness beyond live jobs: `enqueue(..., unique=Unique(...), on_conflict=...)`
on both engines and both faces: ignore, replace (debounce), period buckets
that count finished jobs, the states a key is held in, keys from the payload,
a job type's default, and bad input refused with nothing written."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import psycopg
import pytest

import jobvisor
from jobvisor import (
    AsyncQueue,
    InvalidArgument,
    JobStatus,
    JobvisorError,
    Queue,
    Registry,
    Unique,
)
from jobvisor.queue import NewJob
from tests.contract.tracing.test_migration import PENDING, make_version_1
from tests.support.aio import run_with
from tests.support.invariants import assert_invariants
from tests.support.queue import Clock, close_to, row_count

HOUR = 3600


def _start_of_hour() -> Clock:
    """A clock 30 minutes into an hour: a bucket of an hour has room either side."""
    now = dt.datetime.now(dt.UTC).replace(minute=30, second=0, microsecond=0)
    return Clock(now)


def test_ignore_returns_the_holder_and_writes_nothing(cqueue: Queue, url: str) -> None:
    first = cqueue.enqueue("sync_account", {"account": 1}, unique=Unique(key="account:1"))
    again = cqueue.enqueue("sync_account", {"account": 99}, unique=Unique(key="account:1"))
    assert again == first
    assert row_count(url) == 1
    job = cqueue.get(first)
    assert job.payload == {"account": 1}  # the first enqueue's, untouched
    assert job.unique_key == '{"job_type":"sync_account","key":"account:1"}'
    assert_invariants(url)


def test_the_job_type_is_always_part_of_the_key(cqueue: Queue, url: str) -> None:
    a = cqueue.enqueue("sync_account", unique=Unique(key="k"))
    b = cqueue.enqueue("close_account", unique=Unique(key="k"))
    assert a != b
    # Without a key or args the type alone is the key: one live job per type.
    c = cqueue.enqueue("rebuild_index", unique=Unique())
    assert cqueue.enqueue("rebuild_index", unique=Unique()) == c
    assert row_count(url) == 3


def test_replace_debounces_a_pending_job(cqueue: Queue, clock: Clock, url: str) -> None:
    unique = Unique(key="search:ada")
    first = cqueue.enqueue("reindex", {"v": 1}, unique=unique, on_conflict="replace", delay=5)
    clock.advance(3)
    again = cqueue.enqueue("reindex", {"v": 2}, unique=unique, on_conflict="replace", delay=5)
    assert again == first
    job = cqueue.get(first)
    assert job.payload == {"v": 2}
    assert close_to(job.run_at, clock() + dt.timedelta(seconds=5))
    assert job.status is JobStatus.PENDING
    assert row_count(url) == 1
    # "ignore" beside it changes nothing.
    assert cqueue.enqueue("reindex", {"v": 3}, unique=unique, delay=60) == first
    assert cqueue.get(first).payload == {"v": 2}
    assert_invariants(url)


def test_replace_leaves_a_running_or_retryable_holder_unchanged(cqueue: Queue, url: str) -> None:
    unique = Unique(key="k")
    first = cqueue.enqueue("reindex", {"v": 1}, unique=unique)
    (claimed,) = cqueue.claim("w1")
    assert cqueue.enqueue("reindex", {"v": 2}, unique=unique, on_conflict="replace") == first
    running = cqueue.get(first)
    assert (running.status, running.payload) == (JobStatus.RUNNING, {"v": 1})
    assert running.run_at == claimed.run_at
    cqueue.fail(claimed, "boom", retry_in=60)
    assert cqueue.enqueue("reindex", {"v": 3}, unique=unique, on_conflict="replace") == first
    retryable = cqueue.get(first)
    assert (retryable.status, retryable.payload) == (JobStatus.RETRYABLE, {"v": 1})
    assert row_count(url) == 1
    assert_invariants(url)


def test_a_finished_job_frees_its_key_without_a_period(cqueue: Queue, url: str) -> None:
    first = cqueue.enqueue("sync", unique=Unique(key="k"))
    (job,) = cqueue.claim("w1")
    cqueue.complete(job)
    assert cqueue.get(first).unique_key is None  # given up when it left its states
    second = cqueue.enqueue("sync", unique=Unique(key="k"))
    assert second != first
    cqueue.cancel(second)
    third = cqueue.enqueue("sync", unique=Unique(key="k"))
    assert third not in (first, second)
    assert row_count(url) == 3


def test_a_period_bucket_counts_finished_jobs(make_queue: Any, url: str) -> None:
    clock = _start_of_hour()
    q = make_queue(clock=clock)
    hourly = Unique(period=HOUR)
    first = q.enqueue("report", unique=hourly)
    start = clock().replace(minute=0)
    assert q.get(first).unique_key == (
        '{"job_type":"report","period":3600}@' + start.strftime("%Y-%m-%dT%H:%M:%SZ")
    )
    (job,) = q.claim("w1")
    q.complete(job)
    clock.advance(20 * 60)  # 10 minutes before the hour ends
    assert q.enqueue("report", unique=hourly) == first  # completed, still this hour's
    assert q.enqueue("report", unique=hourly, on_conflict="replace") == first
    assert q.get(first).status is JobStatus.COMPLETED
    clock.advance(20 * 60)  # the next hour
    second = q.enqueue("report", unique=hourly)
    assert second != first
    assert q.get(second).unique_key is not None
    assert row_count(url) == 2
    assert_invariants(url)


def test_a_dead_job_frees_its_bucket_unless_its_states_say_so(make_queue: Any, url: str) -> None:
    clock = _start_of_hour()
    q = make_queue(clock=clock)
    hourly = Unique(period=HOUR)
    first = q.enqueue("report", max_attempts=1, unique=hourly)
    (job,) = q.claim("w1")
    q.fail(job, "boom")
    assert q.get(first).status is JobStatus.DEAD
    retry = q.enqueue("report", unique=hourly)  # a failed run can be enqueued again
    assert retry != first
    strict = Unique(key="strict", period=HOUR, states=("pending", "running", "dead"))
    held = q.enqueue("report", max_attempts=1, unique=strict)
    (job,) = q.claim("w1", limit=1)
    while job.id != held:  # the other report first
        q.complete(job)
        (job,) = q.claim("w1")
    q.fail(job, "boom")
    assert q.enqueue("report", unique=strict) == held
    assert row_count(url) == 3


def test_states_say_which_statuses_hold_the_key(cqueue: Queue, url: str) -> None:
    only_pending = Unique(key="k", states=["pending"])
    assert only_pending.states == ("pending",)
    first = cqueue.enqueue("sync", {"n": 1}, unique=only_pending)
    (job,) = cqueue.claim("w1")
    assert cqueue.get(first).unique_key is None  # running: given up
    second = cqueue.enqueue("sync", {"n": 2}, unique=only_pending)
    assert second != first
    # The first comes back to pending (released): it holds no key, so it
    # cannot collide with the second, which still holds it.
    cqueue.release(job)
    assert cqueue.get(first).status is JobStatus.PENDING
    assert cqueue.get(first).unique_key is None
    assert cqueue.enqueue("sync", {"n": 3}, unique=only_pending) == second
    assert row_count(url) == 2
    assert_invariants(url)


def test_by_args_keys_on_the_payload(cqueue: Queue, url: str) -> None:
    by_args = Unique(by_args=True)
    a = cqueue.enqueue("resize", {"image": 1, "size": "s"}, unique=by_args)
    assert cqueue.enqueue("resize", {"size": "s", "image": 1}, unique=by_args) == a
    b = cqueue.enqueue("resize", {"image": 2, "size": "s"}, unique=by_args)
    assert b != a
    keyed = Unique(key="tenant:7", by_args=True)
    c = cqueue.enqueue("resize", {"image": 1, "size": "s"}, unique=keyed)
    assert c not in (a, b)
    assert cqueue.enqueue("resize", {"size": "s", "image": 1}, unique=keyed) == c
    assert row_count(url) == 3
    key = cqueue.get(c).unique_key
    assert key is not None and '"key":"tenant:7","args":"' in key


def test_a_handlers_unique_is_its_types_default(cqueue: Queue, url: str) -> None:
    registry = Registry()

    @registry.handler("digest", unique=Unique(key="daily"), on_conflict="replace")
    def digest(job: Any) -> None: ...

    assert registry.get("digest") is not None
    first = cqueue.enqueue(**registry.job("digest", {"v": 1}))
    assert cqueue.enqueue(**registry.job("digest", {"v": 2})) == first
    assert cqueue.get(first).payload == {"v": 2}  # the type's default: replace
    # An enqueue's own options win over the type's.
    other = cqueue.enqueue(**registry.job("digest", {"v": 3}, unique=Unique(key="weekly")))
    assert other != first
    ignored = cqueue.enqueue(**registry.job("digest", {"v": 4}, on_conflict="ignore"))
    assert ignored == first and cqueue.get(first).payload == {"v": 2}
    assert row_count(url) == 2


def test_enqueue_many_takes_a_unique_per_item(cqueue: Queue, url: str) -> None:
    ids = cqueue.enqueue_many(
        [
            {"job_type": "sync", "payload": {"n": 1}, "unique": Unique(key="a")},
            {"job_type": "sync", "payload": {"n": 2}, "unique": {"key": "b"}},
            {"job_type": "sync", "payload": {"n": 3}},
            {"job_type": "sync", "payload": {"n": 4}, "unique": {"key": "a"}},
            {
                "job_type": "sync",
                "payload": {"n": 5},
                "unique": {"key": "b"},
                "on_conflict": "replace",
            },
            NewJob.build("sync", {"n": 6}, unique=Unique(key="c")),
        ]
    )
    assert len(ids) == 6
    assert ids[3] == ids[0] and ids[4] == ids[1]
    assert len(set(ids)) == 4
    assert cqueue.get(ids[1]).payload == {"n": 5}
    assert cqueue.get(ids[0]).payload == {"n": 1}
    assert row_count(url) == 4
    # Another batch finds the holders of the first.
    assert cqueue.enqueue_many([{"job_type": "sync", "unique": {"key": "c"}}]) == [ids[5]]


def test_unique_in_the_callers_transaction(cqueue: Queue, url: str) -> None:
    with cqueue.transaction() as conn:
        first = cqueue.enqueue("sync", unique=Unique(key="t"), conn=conn)
        assert cqueue.enqueue("sync", unique=Unique(key="t"), conn=conn) == first
    assert cqueue.enqueue("sync", unique=Unique(key="t")) == first
    with pytest.raises(RuntimeError), cqueue.transaction() as conn:
        cqueue.enqueue("sync", unique=Unique(key="rolled back"), conn=conn)
        raise RuntimeError("roll back")
    assert row_count(url) == 1
    # The key of the rolled-back job is free.
    assert cqueue.enqueue("sync", unique=Unique(key="rolled back")) != first


def test_a_requeued_dead_job_holds_no_key(cqueue: Queue, url: str) -> None:
    first = cqueue.enqueue("sync", max_attempts=1, unique=Unique(key="k"))
    (job,) = cqueue.claim("w1")
    cqueue.fail(job, "boom")
    second = cqueue.enqueue("sync", unique=Unique(key="k"))
    cqueue.dead.requeue(first)  # back to pending beside the key's holder
    assert cqueue.get(first).unique_key is None
    assert cqueue.enqueue("sync", unique=Unique(key="k")) == second
    assert row_count(url) == 2
    assert_invariants(url)


def test_async_ignore_replace_and_period(aqueue: AsyncQueue, url: str) -> None:
    async def body(q: AsyncQueue) -> None:
        first = await q.enqueue("sync", {"v": 1}, unique=Unique(key="k"))
        assert await q.enqueue("sync", {"v": 2}, unique=Unique(key="k")) == first
        assert (await q.get(first)).payload == {"v": 1}
        again = await q.enqueue("sync", {"v": 3}, unique=Unique(key="k"), on_conflict="replace")
        assert again == first
        assert (await q.get(first)).payload == {"v": 3}
        daily = Unique(period=24 * HOUR)
        report = await q.enqueue("report", unique=daily)
        (job,) = await q.claim("w1", job_types=["report"])
        await q.complete(job)
        assert await q.enqueue("report", unique=daily) == report or _crossed_midnight()
        ids = await q.enqueue_many([{"job_type": "sync", "unique": {"key": "k"}}])
        assert ids == [first]
        with pytest.raises(InvalidArgument, match=r"unique\.states"):
            await q.enqueue("sync", unique=Unique(states=("running",)))

    run_with(aqueue, body)
    assert row_count(url) == 2


def _crossed_midnight() -> bool:
    """The database clock may pass midnight UTC between two statements."""
    now = dt.datetime.now(dt.UTC)
    return now.hour == 0 and now.minute == 0


def _bad_enqueues() -> list[tuple[Any, str]]:
    """(a function of the queue that must raise, a text its message holds)."""
    return [
        (lambda q: q.enqueue("t", unique=Unique(states=("running",))), "includes 'pending'"),
        (lambda q: q.enqueue("t", unique=Unique(states=("pending", "later"))), "'later'"),
        (lambda q: q.enqueue("t", unique=Unique(states="pending")), "list of status names"),
        (lambda q: q.enqueue("t", unique=Unique(period=0)), "unique.period=0"),
        (lambda q: q.enqueue("t", unique=Unique(period=1.5)), "whole seconds"),
        (lambda q: q.enqueue("t", unique=Unique(period=-60)), "unique.period=-60"),
        (
            lambda q: q.enqueue("t", unique=Unique(period="1h")),  # type: ignore[arg-type]
            "unique.period='1h'",
        ),
        (lambda q: q.enqueue("t", unique=Unique(key="")), "unique.key=''"),
        (lambda q: q.enqueue("t", unique=Unique(key="a\x00b")), "unique.key"),
        (
            lambda q: q.enqueue("t", unique=Unique(by_args="yes")),  # type: ignore[arg-type]
            "unique.by_args='yes'",
        ),
        (lambda q: q.enqueue("t", unique="k"), "expected a jobvisor.Unique"),
        (lambda q: q.enqueue("t", unique={"period": 60, "size": 3}), "unexpected keyword"),
        (lambda q: q.enqueue("t", unique=Unique(), on_conflict="merge"), "on_conflict='merge'"),
        (lambda q: q.enqueue("t", on_conflict="replace"), "expected unique=Unique"),
        (lambda q: q.enqueue("t", dedupe_key="d", unique=Unique()), "at most one of them"),
        (
            lambda q: q.enqueue_many(
                [{"job_type": "t", "unique": {"key": "a"}}, {"job_type": "t", "unique": 5}]
            ),
            "jobs[1]: unique=5",
        ),
    ]


@pytest.mark.parametrize("index", range(len(_bad_enqueues())))
def test_bad_unique_input_is_refused_and_nothing_written(
    queue: Queue, url: str, index: int
) -> None:
    call, text = _bad_enqueues()[index]
    with pytest.raises(InvalidArgument) as raised:
        call(queue)
    assert text in str(raised.value)
    assert row_count(url) == 0


def test_unique_is_a_frozen_value() -> None:
    unique = Unique(key="k", period=dt.timedelta(hours=1), states=["retryable", "pending"])
    assert unique.period == HOUR
    assert unique.states == ("pending", "retryable")  # in the statuses' own order
    assert unique.held_states == ("pending", "retryable", "completed")
    assert Unique(states=("pending", "completed"), period=60).held_states == (
        "pending",
        "completed",
    )
    assert Unique().held_states == ("pending", "running", "retryable")
    with pytest.raises(AttributeError):
        unique.key = "other"  # type: ignore[misc]
    assert Unique(key="k") == Unique(key="k")
    assert hash(Unique(key="k", states=("pending",))) == hash(Unique(key="k", states=["pending"]))
    # A key too long for an index entry is stored as its hash.
    long = Unique(key="\x01" * 1000).base_key("t", "{}")
    assert long.startswith('{"sha256":"') and len(long) < 100


def test_a_bad_handler_default_is_refused_at_registration() -> None:
    registry = Registry()
    with pytest.raises(InvalidArgument, match=r"expected a jobvisor\.Unique"):
        registry.add("a", lambda job: None, unique="k")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="on_conflict='merge'"):
        registry.add("b", lambda job: None, unique=Unique(), on_conflict="merge")
    assert len(registry) == 0
    registry.add("c", lambda job: None, on_conflict="replace")  # a default for the enqueue's own
    assert registry.job("c")["on_conflict"] == "replace"
    assert "unique" not in registry.job("c")


def test_unique_on_a_database_upgraded_with_jobs_in_it(url: str) -> None:
    make_version_1(url)  # jobs in every status, written before the unique columns
    with jobvisor.connect(url) as q:
        q.migrate()
        assert q.get(PENDING).unique_key is None
        first = q.enqueue("send_email", unique=Unique(key="k-1"))
        assert q.enqueue("send_email", unique=Unique(key="k-1")) == first
        (old,) = q.claim("w-new", limit=1)  # the old job, first by priority
        assert old.id == PENDING
        q.complete(old)
        assert q.get(first).unique_key is not None
    assert row_count(url) == 5
    assert_invariants(url)


def _operations_sql() -> list[str]:
    """The statements docs/operations.md gives for building the index first."""
    text = (Path(__file__).resolve().parents[3] / "docs" / "operations.md").read_text()
    section = text.split("## Unique jobs", 1)[1]
    block = section.split("```sql\n", 1)[1].split("```", 1)[0]
    return [s.strip() for s in block.split(";") if s.strip()]


def _before_migration_9(pg_url: str, jobs: int) -> None:
    """A database with `jobs` jobs, migrated up to 0009 and not 0009 itself."""
    with jobvisor.connect(pg_url) as q:
        q.migrate()
        q.enqueue_many([{"job_type": "old"}] * jobs)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP TRIGGER jobvisor_jobs_unique_release ON jobvisor_jobs")
        conn.execute("DROP INDEX jobvisor_jobs_unique_idx")
        conn.execute("ALTER TABLE jobvisor_jobs DROP COLUMN unique_key, DROP COLUMN unique_states")
        conn.execute("DELETE FROM jobvisor_migrations WHERE version = 9")


def test_an_index_built_first_concurrently_is_taken_by_migrate(pg_url: str) -> None:
    _before_migration_9(pg_url, 100)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for statement in _operations_sql():
            conn.execute(statement.encode())
    with jobvisor.connect(pg_url) as q:
        assert q.migrate() == [9]
        first = q.enqueue("sync", unique=Unique(key="k"))
        assert q.enqueue("sync", unique=Unique(key="k")) == first
        (job,) = q.claim("w1", job_types=["sync"])
        q.complete(job)
        assert q.get(first).unique_key is None  # the trigger came with the migration
    assert row_count(pg_url) == 101


def test_an_invalid_index_stops_migrate_saying_what_to_do(pg_url: str) -> None:
    _before_migration_9(pg_url, 2)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        add_column, build = _operations_sql()
        conn.execute(add_column.encode())
        conn.execute("UPDATE jobvisor_jobs SET unique_key = 'same'")  # the build will fail
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute(build.encode())
    with (
        jobvisor.connect(pg_url) as q,
        pytest.raises(JobvisorError, match="DROP INDEX CONCURRENTLY"),
    ):
        q.migrate()
    with psycopg.connect(pg_url) as conn:
        recorded = conn.execute("SELECT version FROM jobvisor_migrations WHERE version = 9")
        assert recorded.fetchall() == []
