"""Cancelling a running job: the request, how it settles against every other
outcome (whichever guarded statement commits first wins), the renewal that
reports it, the PostgreSQL notice, and bulk cancels by type and queue."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

import pytest

import jobvisor
from jobvisor import AsyncQueue, InvalidArgument, Job, JobNotFound, JobStatus, Queue
from jobvisor.queue import NoticeKind
from jobvisor.queue.internal import service_ops
from tests.support.aio import run_with
from tests.support.invariants import assert_invariants
from tests.support.queue import Clock

REQUEST = "cancelled by request from "


def _running(q: Queue, job_type: str = "t", queue: str = "default", attempts: int = 3) -> Job:
    jid = q.enqueue(job_type, queue=queue, max_attempts=attempts)
    (job,) = q.claim("w", job_types=[job_type])
    assert job.id == jid
    return job


def test_cancel_of_a_running_job_is_a_request_the_worker_settles(cqueue: Queue, url: str) -> None:
    job = _running(cqueue)
    assert cqueue.cancel(job.id, reason="wrong customer") is JobStatus.RUNNING
    asked = cqueue.get(job.id)
    assert asked.status is JobStatus.RUNNING  # still held: its worker stops it
    assert asked.last_error is not None and asked.last_error.startswith(REQUEST)
    assert asked.last_error.endswith(": wrong customer")
    # A second request keeps the first one's text and changes nothing else.
    assert cqueue.cancel(job.id, reason="again") is JobStatus.RUNNING
    assert cqueue.get(job.id).last_error == asked.last_error
    other = _running(cqueue, "u")
    renewal = service_ops(cqueue).renew_held([job, other])
    assert renewal.lost == () and renewal.cancel_requested == {job.id}
    cqueue.complete(other)
    assert service_ops(cqueue).renew_held([other]).lost == (other,)
    assert_invariants(url)


SETTLE: dict[str, Callable[[Queue, Job], object]] = {
    "complete": lambda q, j: q.complete(j),
    "fail": lambda q, j: q.fail(j, "boom"),
    "snooze": lambda q, j: q.snooze(j, 60),
    "release": lambda q, j: q.release(j),
    "cancel_held": lambda q, j: q.cancel_held(j, "handler gave up"),
    "requeue_crashed": lambda q, j: q.requeue_crashed("w"),
    "requeue_crashed_culprit": lambda q, j: q.requeue_crashed("w", culprit=j.id, error="hard"),
}


@pytest.mark.parametrize("settle", sorted(SETTLE))
def test_cancel_first_then_any_outcome_ends_cancelled(cqueue: Queue, url: str, settle: str) -> None:
    job = _running(cqueue)
    cqueue.cancel(job.id)
    SETTLE[settle](cqueue, job)
    done = cqueue.get(job.id)
    assert done.status is JobStatus.CANCELLED
    assert done.finished_at is not None
    assert done.last_error is not None and done.last_error.startswith(REQUEST)
    assert cqueue.claim("w", limit=10) == []
    assert_invariants(url)


def test_cancel_first_then_the_lease_expires_ends_cancelled(
    cqueue: Queue, clock: Clock, url: str
) -> None:
    job = _running(cqueue)
    cqueue.cancel(job.id)
    clock.advance(3600)
    assert cqueue.reap_expired() == 1
    done = cqueue.get(job.id)
    assert done.status is JobStatus.CANCELLED
    assert done.last_error is not None and done.last_error.startswith(REQUEST)
    assert_invariants(url)


@pytest.mark.parametrize("settle", ["complete", "fail"])
def test_outcome_first_then_cancel_is_refused(cqueue: Queue, url: str, settle: str) -> None:
    job = _running(cqueue, attempts=1)  # a failure makes it dead
    SETTLE[settle](cqueue, job)
    before = cqueue.get(job.id)
    with pytest.raises(JobNotFound, match=before.status.value):
        cqueue.cancel(job.id)
    after = cqueue.get(job.id)
    assert after.status is before.status and after.last_error == before.last_error
    assert_invariants(url)


def test_cancel_many_by_type_and_queue_in_batches(cqueue: Queue, url: str) -> None:
    running = [_running(cqueue, "report") for _ in range(3)]
    pending = [cqueue.enqueue("report") for _ in range(4)]
    other_type = cqueue.enqueue("mail")
    other_queue = cqueue.enqueue("report", queue="slow")
    done = cqueue.cancel_many(job_type="report", queue="default", batch_size=2, reason="bad run")
    assert (done.cancelled, done.requested) == (4, 3)
    for jid in pending:
        assert cqueue.get(jid).status is JobStatus.CANCELLED
    renewal = service_ops(cqueue).renew_held(running)
    assert renewal.cancel_requested == {j.id for j in running}
    assert cqueue.get(other_type).status is JobStatus.PENDING
    assert cqueue.get(other_queue).status is JobStatus.PENDING
    # Asked once is enough: a second bulk cancel finds nothing left to do.
    again = cqueue.cancel_many(job_type="report", queue="default")
    assert (again.cancelled, again.requested) == (0, 0)
    by_queue = cqueue.cancel_many(queue="slow")
    assert (by_queue.cancelled, by_queue.requested) == (1, 0)
    assert_invariants(url)


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda q: q.cancel(uuid.uuid4(), reason=""), "reason=''"),
        (lambda q: q.cancel(uuid.uuid4(), reason=3), "reason=3"),
        (lambda q: q.cancel_many(), "expected job_type or queue"),
        (lambda q: q.cancel_many(job_type=""), "job_type"),
        (lambda q: q.cancel_many(queue="default", batch_size=0), "batch_size"),
    ],
)
def test_cancel_refuses_bad_arguments(
    queue: Queue, call: Callable[[Queue], object], named: str
) -> None:
    jid = queue.enqueue("t")
    with pytest.raises(InvalidArgument, match=named):
        call(queue)
    assert queue.get(jid).status is JobStatus.PENDING


def test_a_cancel_request_is_a_notice_on_postgres(pg_url: str) -> None:
    with jobvisor.connect(pg_url) as q:
        q.migrate()
        job = _running(q, queue="mail")

    async def body(aq: AsyncQueue) -> tuple[str, str | None, uuid.UUID | None]:
        stream = aq.notifications(["mail"])
        try:
            first = await anext(stream)
            assert first.kind == NoticeKind.MISSED
            await aq.cancel(job.id)
            notice = await asyncio.wait_for(anext(stream), 30)
            return notice.kind, notice.queue, notice.id
        finally:
            await stream.aclose()

    aq = jobvisor.connect_async(pg_url)
    assert run_with(aq, body) == (NoticeKind.CANCEL, "mail", job.id)
