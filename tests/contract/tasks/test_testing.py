"""`jobvisor.testing`: recording and inline modes (no database needed), the
pytest plugin's fixtures, and `drain` against a real queue on both engines."""

from __future__ import annotations

import asyncio
import datetime as dt
import decimal
import json
import subprocess
import uuid
from typing import Any

import pytest

from jobvisor import (
    AsyncQueue,
    InvalidArgument,
    JobContext,
    JobStatus,
    Queue,
    Registry,
    Snooze,
    current_correlation_id,
    testing,
)
from jobvisor.testing import Recorder, TestingError
from tests.support.aio import run_with
from tests.support.apps.tasks import (
    Address,
    Customer,
    Line,
    Order,
    Speed,
    add,
    explode,
    fan_out,
    later,
    registry,
    send_email,
    ship,
    whoami,
)
from tests.support.cli import JOBVISOR, clean_env
from tests.support.queue import row_count

ORDER = Order(
    id=1,
    lines=[Line("pen", 4, decimal.Decimal("1.25"))],
    ship_to=Address("2 Rue", "Brest"),
    placed_at=dt.datetime(2026, 1, 10, 8, 0, tzinfo=dt.UTC),
)
CUSTOMER = Customer(name="Lin", email="lin@example.org", since=dt.date(2024, 2, 29))


def signup(email: str) -> None:
    """Application code under test: enqueues as a side effect."""
    send_email.enqueue(to=email, subject="welcome")


# --- recording ------------------------------------------------------------------


def test_recording_writes_nothing_and_records_each_enqueue(queue: Queue, url: str) -> None:
    with registry.bind(queue), testing.recording() as jobs:
        signup("ada@example.org")
        send_email.with_options(priority=9, delay=60).enqueue("bob@example.org", "hi")
        add.enqueue_many([add.args(1, 2), add.args(3, 4)])
        asyncio.run(add.enqueue_async(5, 6))
    assert row_count(url) == 0
    assert [(j.job_type, j.payload) for j in jobs.jobs] == [
        ("send_email", {"to": "ada@example.org", "subject": "welcome"}),
        ("send_email", {"to": "bob@example.org", "subject": "hi"}),
        ("add", {"a": 1, "b": 2}),
        ("add", {"a": 3, "b": 4}),
        ("add", {"a": 5, "b": 6}),
    ]
    assert jobs.jobs[1].options["priority"] == 9
    assert jobs.jobs[1].options["delay"] == 60
    assert len({j.id for j in jobs.jobs}) == 5


def test_assert_enqueued_matches_a_payload_subset_by_task_or_job_type() -> None:
    with testing.recording() as jobs:
        signup("ada@example.org")
        ship.enqueue(ORDER, CUSTOMER)
        found = testing.assert_enqueued(send_email, to="ada@example.org")
        assert found.payload["subject"] == "welcome"
        testing.assert_enqueued("send_email", subject="welcome")
        testing.assert_enqueued(send_email, body="")  # a default counts as given
        testing.assert_enqueued(ship, order=ORDER, speed=Speed.STANDARD)  # compared as JSON
        testing.assert_not_enqueued(send_email, to="bob@example.org")
        testing.assert_not_enqueued(add)
    assert jobs.enqueued(ship, customer=CUSTOMER)[0].job_type == "ship_order"


def test_assert_failures_say_what_was_enqueued(jobvisor_recording: Recorder) -> None:
    signup("ada@example.org")
    with pytest.raises(AssertionError, match=r"no send_email job enqueued with \{'to': 'bob"):
        jobvisor_recording.assert_enqueued(send_email, to="bob@example.org")
    with pytest.raises(AssertionError, match="enqueued: send_email"):
        testing.assert_enqueued(send_email, to="bob@example.org")
    with pytest.raises(AssertionError, match=r"1 send_email job\(s\) enqueued with"):
        testing.assert_not_enqueued(send_email, to="ada@example.org")
    with pytest.raises(InvalidArgument, match="job_type_or_task=''"):
        testing.assert_enqueued("")


def test_recording_refuses_what_the_queue_would_refuse() -> None:
    with testing.recording() as jobs, pytest.raises(InvalidArgument, match="argument 'to'"):
        send_email.enqueue(to=object(), subject="x")  # type: ignore[arg-type]
    assert jobs.jobs == []


def test_modes_do_not_nest_and_asserts_need_one() -> None:
    with testing.recording(), pytest.raises(TestingError, match="do not nest"), testing.inline():
        pass
    with pytest.raises(TestingError, match="no testing mode is on"):
        testing.assert_enqueued(send_email)
    with pytest.raises(TestingError, match="no testing mode is on"):
        testing.assert_not_enqueued(send_email)


# --- inline -----------------------------------------------------------------------


def test_inline_runs_each_task_at_once_and_keeps_its_result() -> None:
    with testing.inline() as jobs:
        signup("ada@example.org")
        add.enqueue(2, 3)  # an async task, from blocking code
        job_id = ship.enqueue(ORDER, CUSTOMER, speed=Speed.EXPRESS)
    assert jobs.assert_enqueued(send_email).result == "to ada@example.org: welcome"
    assert jobs.assert_enqueued(add, a=2).result == 5
    receipt = jobs.assert_enqueued(ship)
    assert receipt.id == job_id
    assert receipt.result == {
        "order_id": 1,
        "total": "5.00",
        "city": "BREST",
        "customer_years": 2,
        "speed": "express",
        "deliver_by": "2026-01-11",
    }


def test_inline_in_async_code(jobvisor_inline: Recorder) -> None:
    async def handler() -> None:
        await add.enqueue_async(1, 1)
        await send_email.enqueue_async("a@example.org", "async")
        add.enqueue(20, 22)  # blocking enqueue while a loop runs: its own loop, in a thread
        await whoami.enqueue_async("inline")

    asyncio.run(handler())
    assert [j.result for j in jobvisor_inline.enqueued(add)] == [2, 42]
    assert jobvisor_inline.assert_enqueued(send_email).result == "to a@example.org: async"
    seen = jobvisor_inline.assert_enqueued(whoami)
    assert seen.result == {"tag": "inline", "job_id": str(seen.id), "attempt": 1}


def test_inline_raises_a_task_s_error_or_records_it() -> None:
    with testing.inline(), pytest.raises(RuntimeError, match="boom"):
        explode.enqueue("boom")
    with testing.inline(raise_errors=False) as jobs:
        explode.enqueue("bang")
    (failed,) = jobs.jobs
    assert isinstance(failed.error, RuntimeError)
    assert str(failed.error) == "bang"
    with testing.inline() as jobs:
        later.enqueue(60)  # asks to run again later: recorded, not raised
    assert isinstance(jobs.assert_enqueued(later).error, Snooze)


def test_inline_runs_what_a_task_enqueues() -> None:
    with testing.inline() as jobs:
        fan_out.enqueue(3)
    assert [(j.job_type, j.result) for j in jobs.jobs] == [
        ("add", 0),
        ("add", 2),
        ("add", 4),
        ("fan_out", 3),
    ]


# --- drain --------------------------------------------------------------------------


def test_drain_runs_every_due_job_through_the_queue(queue: Queue) -> None:
    with registry.bind(queue):
        mail = send_email.enqueue("ada@example.org", "hi")
        fan = fan_out.enqueue(2)
        failed = explode.enqueue("boom")
        snoozed = later.enqueue(3600)
        unknown = queue.enqueue("no_such_type", {}, max_attempts=1)
        future = add.with_options(delay=3600).enqueue(1, 1)
        drained = testing.drain(registry=registry)
    # By priority (send_email's is 3), then in order; fan_out's two jobs come last.
    assert drained.completed[:2] == [mail, fan]
    assert [queue.get(i).result for i in drained.completed[2:]] == [0, 2]
    assert drained.failed == [failed, unknown]
    assert drained.errors[failed].startswith("RuntimeError: boom")
    assert "no handler registered for job type 'no_such_type'" in drained.errors[unknown]
    assert drained.snoozed == [snoozed]
    assert queue.get(mail).result == "to ada@example.org: hi"
    assert queue.get(fan).result == 2
    assert queue.get(failed).status == JobStatus.DEAD
    assert queue.get(snoozed).status == JobStatus.PENDING
    assert queue.get(future).status == JobStatus.PENDING
    assert len(testing.drain(queue, registry=registry)) == 0


def test_drain_async_on_an_async_queue(aqueue: AsyncQueue) -> None:
    async def body(aq: AsyncQueue) -> tuple[testing.Drained, list[object]]:
        with registry.bind(aq):
            ids = [await add.enqueue_async(n, 1) for n in range(3)]
            ids.append(await send_email.enqueue_async("a@example.org", "threads"))
            drained = await testing.drain_async(registry=registry)
        return drained, [(await aq.get(i)).result for i in ids]

    drained, results = run_with(aqueue, body)
    assert len(drained.completed) == 4
    assert results == [1, 2, 3, "to a@example.org: threads"]


def test_drain_stops_a_job_that_never_ends(queue: Queue) -> None:
    with registry.bind(queue):
        fan_out.enqueue(5)
        with pytest.raises(TestingError, match="drain ran 3 jobs and more are due"):
            testing.drain(registry=registry, max_jobs=3)


def test_drain_needs_a_queue() -> None:
    with pytest.raises(InvalidArgument, match="expected a jobvisor Queue"):
        testing.drain(registry=registry)


def test_drain_settles_cancels_bad_results_and_async_handlers_as_a_worker_does(
    queue: Queue,
) -> None:
    local = Registry()

    @local.handler("give_up")
    def give_up(job: JobContext) -> None:
        job.cancel("not today")

    @local.handler("returns_bytes")
    def returns_bytes(job: JobContext) -> bytes:
        return b"not JSON"

    @local.handler("async_ok", timeout=5)
    async def async_ok(job: JobContext) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"seen": job.payload, "correlation_id": current_correlation_id()}

    cancelled = queue.enqueue("give_up", max_attempts=1)
    bad = queue.enqueue("returns_bytes", max_attempts=1)
    ok = queue.enqueue("async_ok", {"n": 1}, correlation_id="req-1")
    drained = testing.drain(queue, registry=local)
    assert (drained.cancelled, drained.failed, drained.completed) == ([cancelled], [bad], [ok])
    assert queue.get(cancelled).status == JobStatus.CANCELLED
    assert queue.get(cancelled).last_error == "not today"
    assert drained.errors[bad].startswith("InvalidResult: result=b'not JSON'")
    assert queue.get(bad).status == JobStatus.DEAD
    assert queue.get(ok).result == {"seen": {"n": 1}, "correlation_id": "req-1"}


def test_a_job_enqueued_by_the_command_line_runs_its_task(queue: Queue, url: str) -> None:
    """The payload shape `jobvisor enqueue` is given in docs/operations.md."""
    payload = '{"order": ' + json.dumps(ship.payload(ORDER, CUSTOMER)["order"])
    payload += ', "customer": {"name": "Lin", "email": "lin@example.org", "since": "2024-02-29"}}'
    done = subprocess.run(
        [str(JOBVISOR), "enqueue", "ship_order", "--payload", payload],
        env=clean_env(JOBVISOR_DATABASE_URL=url),
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    job_id = uuid.UUID(done.stdout.strip())
    drained = testing.drain(queue, registry=registry)
    assert drained.completed == [job_id]
    assert ship.result(queue.get(job_id)).city == "BREST"
