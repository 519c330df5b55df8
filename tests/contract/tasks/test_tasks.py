"""Typed tasks on both engines: what `enqueue` stores, what it refuses (and
then writes nothing), options, bulk enqueue, the caller's transaction, and
the queue a task finds."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import decimal
import functools
import sqlite3
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import jobvisor
from jobvisor import AsyncQueue, InvalidArgument, Queue, Registry, Unique
from jobvisor.queue.api import parse_url
from jobvisor.queue.internal import service_ops
from jobvisor.tasks import NoQueueBound, Task
from tests.support.aio import run_with
from tests.support.apps.tasks import (
    Address,
    Customer,
    Line,
    Order,
    Speed,
    add,
    registry,
    send_email,
    ship,
    sync_account,
)
from tests.support.invariants import query_all
from tests.support.queue import row_count

ORDER = Order(
    id=7,
    lines=[Line("tea", 2, decimal.Decimal("3.50")), Line("cup", 1, decimal.Decimal("9.99"))],
    ship_to=Address("1 Main St", "Lyon"),
    placed_at=dt.datetime(2026, 3, 1, 9, 30, tzinfo=dt.UTC),
)
CUSTOMER = Customer(name="Ada", email="ada@example.org", since=dt.date(2020, 5, 17))


def untyped(task: object) -> Any:
    """The task (or value) with its typing erased, to make the calls a type checker refuses."""
    return task


@pytest.fixture
def bound(queue: Queue) -> Iterator[Queue]:
    """`queue`, bound on the test app's registry for the test."""
    with registry.bind(queue):
        yield queue


def test_calling_a_task_calls_its_function() -> None:
    assert send_email("ada@example.org", "hi") == "to ada@example.org: hi"
    assert asyncio.run(add(2, 3)) == 5
    assert isinstance(send_email, Task)
    assert send_email.name == "send_email"
    assert ship.name == "ship_order"
    names = ["add", "explode", "fan_out", "later", "send_email", "ship_order", "sync_account"]
    names.append("whoami")
    assert [task.name for task in registry.tasks] == names
    assert registry.job_types == names


def test_enqueue_stores_the_arguments_by_name_with_the_task_options(bound: Queue) -> None:
    job_id = send_email.enqueue("ada@example.org", subject="hi")
    job = bound.get(job_id)
    assert job.job_type == "send_email"
    assert job.payload == {"to": "ada@example.org", "subject": "hi"}  # defaults not stored
    assert (job.queue, job.priority, job.max_attempts) == ("mail", 3, 5)


def test_structured_arguments_are_stored_as_json(bound: Queue) -> None:
    job = bound.get(ship.enqueue(ORDER, CUSTOMER, speed=Speed.EXPRESS))
    assert job.payload == {
        "order": {
            "id": 7,
            "lines": [
                {"sku": "tea", "quantity": 2, "price": "3.50"},
                {"sku": "cup", "quantity": 1, "price": "9.99"},
            ],
            "ship_to": {"street": "1 Main St", "city": "Lyon"},
            "placed_at": "2026-03-01T09:30:00+00:00",
        },
        "customer": {"name": "Ada", "email": "ada@example.org", "since": "2020-05-17"},
        "speed": "express",
    }


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: untyped(send_email).enqueue(too="x", subject="y"), "missing a required"),
        (lambda: untyped(send_email).enqueue("a", "b", "c", "d"), "too many positional"),
        (lambda: untyped(send_email).enqueue(object(), "y"), "argument 'to'=<object object"),
        (lambda: untyped(send_email).enqueue("a", float("nan")), "argument 'subject'=nan"),
        (lambda: send_email.enqueue(to="a", subject="\x00"), "argument 'subject'"),
        (lambda: untyped(add).enqueue(a={1: 2}, b=1), "argument 'a' key 1: expected a str key"),
        (
            lambda: ship.enqueue(with_lines(ORDER, [Line("x", 1, untyped(object()))]), CUSTOMER),
            "argument 'order'.lines[0].price=<object object",
        ),
    ],
    ids=["wrong-name", "too-many", "object", "nan", "nul", "int-key", "nested"],
)
def test_bad_arguments_are_refused_at_enqueue_and_nothing_is_written(
    bound: Queue, url: str, call: Any, message: str
) -> None:
    with pytest.raises(InvalidArgument) as caught:
        call()
    assert message in str(caught.value)
    assert row_count(url) == 0


def with_lines(order: Order, lines: list[Line]) -> Order:
    return dataclasses.replace(order, lines=lines)


def test_with_options_returns_a_bound_copy(bound: Queue) -> None:
    later = send_email.with_options(queue="bulk", priority=-1, delay=3600, dedupe_key="k1")
    first = later.enqueue(to="a@example.org", subject="s")
    assert later.enqueue(to="b@example.org", subject="s") == first  # the dedupe key holds
    job = bound.get(first)
    assert (job.queue, job.priority, job.max_attempts, job.dedupe_key) == ("bulk", -1, 5, "k1")
    assert job.run_at > dt.datetime.now(dt.UTC) + dt.timedelta(minutes=50)
    plain = bound.get(send_email.enqueue(to="c@example.org", subject="s"))
    assert (plain.queue, plain.priority, plain.dedupe_key) == ("mail", 3, None)
    assert later("x", "y") == "to x: y"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"priority": "high"}, "priority='high'"),
        ({"queue": ""}, "queue=''"),
        ({"delay": -1}, "delay=-1"),
        ({"max_attempts": 0}, "max_attempts=0"),
        ({"using": "postgresql://x"}, "using='postgresql://x'"),
    ],
)
def test_bad_options_are_refused_at_with_options(options: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message.replace("(", r"\(")):
        send_email.with_options(**options)


def test_bad_task_declarations_are_refused() -> None:
    local = Registry()
    with pytest.raises(InvalidArgument, match="queue=''"):
        local.task(queue="")(lambda: None)
    with pytest.raises(InvalidArgument, match="timeout=-1"):
        local.task(timeout=-1)(lambda: None)

    @local.task
    def twice() -> None: ...

    with pytest.raises(InvalidArgument, match="'twice': a handler is already registered"):
        local.task("twice")(lambda: None)
    with pytest.raises(InvalidArgument, match="has no __name__; give the task a name"):
        local.task(functools.partial(print, "x"))
    assert local.task("printer")(functools.partial(print, "x")).name == "printer"
    assert local.job_types == ["printer", "twice"]


def test_enqueue_many_takes_the_task_s_own_argument_bundles(bound: Queue, url: str) -> None:
    urgent = send_email.with_options(priority=9)
    ids = send_email.enqueue_many(
        [send_email.args(f"u{n}@example.org", "hi") for n in range(3)]
        + [urgent.args("boss@example.org", subject="now")]
    )
    jobs = [bound.get(i) for i in ids]
    assert [j.payload["to"] for j in jobs] == [f"u{n}@example.org" for n in range(3)] + [
        "boss@example.org"
    ]
    assert [j.priority for j in jobs] == [3, 3, 3, 9]
    with pytest.raises(InvalidArgument, match=r"item 1=.*expected send_email.args\(...\)"):
        send_email.enqueue_many([send_email.args("a", "b"), add.args(1, 2)])  # type: ignore[list-item]
    assert row_count(url) == 4


def test_enqueue_joins_the_caller_s_transaction(bound: Queue, url: str) -> None:
    engine, target = parse_url(url)
    conn: Any = (
        psycopg.connect(target) if engine == "postgres" else sqlite3.connect(target, timeout=30)
    )
    with contextlib.closing(conn):
        in_tx = send_email.with_options(conn=conn)
        in_tx.enqueue(to="a@example.org", subject="rolled back")
        conn.rollback()
        assert row_count(url) == 0
        kept = in_tx.enqueue(to="a@example.org", subject="committed")
        conn.commit()
    assert bound.get(kept).payload["subject"] == "committed"


def test_a_task_with_no_queue_bound_says_how_to_bind_one(url: str) -> None:
    with pytest.raises(NoQueueBound, match=r"send_email.enqueue: no Queue .*registry.bind"):
        send_email.enqueue(to="a", subject="b")
    with jobvisor.connect(url) as q:
        q.migrate()
        with registry.bind(q), pytest.raises(NoQueueBound, match=r"use \.enqueue with a Queue"):
            asyncio.run(send_email.enqueue_async(to="a", subject="b"))
        assert registry.bound(Queue) is None
        job_id = send_email.with_options(using=q).enqueue(to="a", subject="b")
        assert q.get(job_id).payload == {"to": "a", "subject": "b"}


def test_bind_as_a_context_manager_restores_the_queue_bound_before(url: str) -> None:
    local = Registry()
    with jobvisor.connect(url) as outer, jobvisor.connect(url) as inner:
        local.bind(outer)
        with local.bind(inner):
            assert local.bound(Queue) is inner
        assert local.bound(Queue) is outer
        local.unbind(outer)
        assert local.bound(Queue) is None


def test_enqueue_async_on_a_bound_async_queue(aqueue: AsyncQueue) -> None:
    async def body(aq: AsyncQueue) -> list[Any]:
        with registry.bind(aq):
            one = await add.enqueue_async(1, b=2)
            many = await add.enqueue_many_async([add.args(n, n) for n in range(3)])
            jobs = [await aq.get(i) for i in [one, *many]]
        return [j.payload for j in jobs]

    assert run_with(aqueue, body) == [{"a": 1, "b": 2}] + [{"a": n, "b": n} for n in range(3)]


def test_arguments_rebuild_the_declared_types(bound: Queue) -> None:
    job = bound.get(ship.enqueue(ORDER, CUSTOMER, note="fragile"))
    arguments = ship.arguments(job.payload)
    assert arguments.arguments == {
        "order": ORDER,
        "customer": CUSTOMER,
        "speed": Speed.STANDARD,
        "note": "fragile",
    }
    assert isinstance(arguments.arguments["customer"], Customer)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ([1, 2], "is not a JSON object of arguments by name"),
        ({"a": 1}, "missing a required argument: 'b'"),
        ({"a": 1, "b": 2, "c": 3}, "unexpected argument 'c'"),
    ],
)
def test_a_payload_that_does_not_fit_the_signature_fails_at_run(payload: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        add.arguments(payload)


def test_job_ids_are_uuids(bound: Queue) -> None:
    assert isinstance(send_email.enqueue(to="a", subject="b"), uuid.UUID)


def test_one_call_makes_one_payload_however_it_is_spelled(bound: Queue) -> None:
    """An argument equal to its default is left out, so `unique=Unique(by_args=True)`
    sees the same job in `f(42)`, `f(account=42)` and `f(42, full=False)`."""
    first = sync_account.enqueue(42)
    assert sync_account.enqueue(account=42, full=False) == first
    assert bound.get(first).payload == {"account": 42}
    full = sync_account.enqueue(42, full=True)
    assert full != first
    assert bound.get(full).payload == {"account": 42, "full": True}
    assert send_email.payload("a", "b", body="") == {"to": "a", "subject": "b"}
    assert untyped(sync_account).payload(42, full=0) == {"account": 42, "full": 0}  # not False


def test_unique_and_on_conflict_options(bound: Queue) -> None:
    keyed = send_email.with_options(unique=Unique(key="digest"), on_conflict="replace")
    first = keyed.enqueue("a@example.org", "old")
    assert keyed.enqueue("a@example.org", "new") == first
    assert bound.get(first).payload["subject"] == "new"  # replaced while pending
    with pytest.raises(InvalidArgument, match=r"unique='digest': expected a jobvisor\.Unique"):
        send_email.with_options(unique=untyped("digest"))
    with pytest.raises(InvalidArgument, match="on_conflict='merge'"):
        send_email.with_options(on_conflict="merge")
    with pytest.raises(InvalidArgument, match="on_conflict='merge'"):
        Registry().task(on_conflict="merge")(lambda: None)


def test_a_task_declares_limits_and_enqueues_with_a_concurrency_key(queue: Queue, url: str) -> None:
    local = Registry()

    @local.task(key_concurrency=1, rate="10/s")
    def sync_tenant(tenant: int) -> None: ...

    assert [(lim.name, lim.key_concurrency, lim.rate) for lim in local.limits] == [
        ("sync_tenant", 1, "10/s")
    ]
    with pytest.raises(InvalidArgument, match="rate='often'"):
        local.task("other", rate="often")(lambda: None)
    service_ops(queue).limits_sync(local.limits, job_types=local.job_types)
    with local.bind(queue):
        for tenant in (1, 1, 2):
            sync_tenant.with_options(concurrency_key=f"tenant:{tenant}").enqueue(tenant)
    assert len(queue.claim("w", limit=10)) == 2  # one per tenant


def test_fleet_limits_and_the_concurrency_key(bound: Queue, url: str) -> None:
    local = Registry()

    @local.task(concurrency=4, key_concurrency=1, rate="10/s")
    def sync_ledger(account: int) -> None: ...

    (limit,) = local.limits
    assert (limit.name, limit.concurrency, limit.key_concurrency, limit.rate) == (
        "sync_ledger",
        4,
        1,
        "10/s",
    )
    job_id = sync_ledger.with_options(using=bound, concurrency_key="account:7").enqueue(7)
    ((key,),) = query_all(
        url, [f"SELECT concurrency_key FROM jobvisor_jobs WHERE id = '{job_id}'"]
    )[0]
    assert key == "account:7"
    with pytest.raises(InvalidArgument, match="rate='fast'"):
        local.task(rate="fast")(lambda: None)
    with pytest.raises(InvalidArgument, match="concurrency_key=''"):
        sync_ledger.with_options(concurrency_key="")
