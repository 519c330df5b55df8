"""The outcomes of a claim: renew, complete, fail, snooze, release and
cancel_held, each guarded by the claim token; their batch forms; retries with
backoff per job type; dead at max_attempts."""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from jobvisor import InvalidArgument, Job, JobStatus, LeaseLost, Queue, RetryPolicy
from jobvisor.queue import ops
from tests.support.invariants import assert_invariants
from tests.support.queue import Clock, MakeQueue, close_to, table_snapshot

OUTCOMES: dict[str, Callable[[Queue, Job], Any]] = {
    "renew": lambda q, j: q.renew(j),
    "complete": lambda q, j: q.complete(j),
    "fail": lambda q, j: q.fail(j, "boom"),
    "snooze": lambda q, j: q.snooze(j, 10),
    "release": lambda q, j: q.release(j),
    "cancel_held": lambda q, j: q.cancel_held(j),
}


def _forged(job: Job) -> Job:
    return dataclasses.replace(job, claim_token=uuid.uuid4())


@pytest.mark.parametrize("outcome", sorted(OUTCOMES))
def test_a_wrong_claim_token_is_lease_lost_and_changes_nothing(
    queue: Queue, url: str, outcome: str
) -> None:
    queue.enqueue("t")
    (job,) = queue.claim("w")
    before = table_snapshot(url)
    with pytest.raises(LeaseLost) as info:
        OUTCOMES[outcome](queue, _forged(job))
    assert info.value.job_id == job.id
    assert str(job.id) in str(info.value)
    assert table_snapshot(url) == before
    OUTCOMES[outcome](queue, job)  # the real holder still can
    assert_invariants(url)


@pytest.mark.parametrize("outcome", sorted(OUTCOMES))
def test_an_outcome_after_the_job_left_running_is_lease_lost(
    queue: Queue, url: str, outcome: str
) -> None:
    queue.enqueue("t")
    (job,) = queue.claim("w")
    queue.complete(job)
    before = table_snapshot(url)
    with pytest.raises(LeaseLost):
        OUTCOMES[outcome](queue, job)
    assert table_snapshot(url) == before
    assert_invariants(url)


@pytest.mark.parametrize("outcome", sorted(OUTCOMES))
def test_an_unclaimed_job_is_refused(queue: Queue, url: str, outcome: str) -> None:
    jid = queue.enqueue("t")
    with pytest.raises(InvalidArgument, match="not a claimed job"):
        OUTCOMES[outcome](queue, queue.get(jid))
    assert queue.get(jid).status is JobStatus.PENDING


def test_renew_extends_the_lease(cqueue: Queue, clock: Clock, url: str) -> None:
    cqueue.enqueue("t")
    (job,) = cqueue.claim("w", lease=30)
    clock.advance(20)
    cqueue.renew(job)
    assert close_to(cqueue.get(job.id).lease_expires_at, clock() + dt.timedelta(seconds=30))
    cqueue.renew(job, lease=dt.timedelta(minutes=5))
    assert close_to(cqueue.get(job.id).lease_expires_at, clock() + dt.timedelta(minutes=5))
    clock.advance(200)
    assert cqueue.reap_expired() == 0
    cqueue.complete(job)
    assert_invariants(url)


def test_complete(cqueue: Queue, clock: Clock, url: str) -> None:
    cqueue.enqueue("t")
    (job,) = cqueue.claim("w")
    clock.advance(3)
    cqueue.complete(job)
    done = cqueue.get(job.id)
    assert done.status is JobStatus.COMPLETED
    assert done.claim_token is None and done.lease_expires_at is None
    assert close_to(done.finished_at, clock())
    assert done.attempts == 1
    assert_invariants(url)


def test_batch_renew_and_complete_report_lost_leases(cqueue: Queue, clock: Clock, url: str) -> None:
    cqueue.enqueue_many([{"job_type": "t"}] * 4)
    jobs = cqueue.claim("w", limit=4, lease=10)
    a, b, c, d = jobs
    cqueue.complete(b)  # b is no longer held
    lost = cqueue.renew_many([a, b, _forged(c), d], lease=100)
    assert [j.id for j in lost] == [b.id, c.id]
    clock.advance(50)
    assert cqueue.reap_expired() == 1  # only c: a and d were renewed
    assert cqueue.get(c.id).status is JobStatus.RETRYABLE
    lost = cqueue.complete_many([a, b, c, d])
    assert [j.id for j in lost] == [b.id, c.id]
    assert cqueue.get(a.id).status is cqueue.get(d.id).status is JobStatus.COMPLETED
    assert cqueue.renew_many([]) == [] and cqueue.complete_many([]) == []
    assert_invariants(url)


def test_release_many(queue: Queue, url: str) -> None:
    queue.enqueue_many([{"job_type": "t"}] * 3)
    jobs = queue.claim("w", limit=3)
    queue.complete(jobs[0])
    lost = queue.release_many(jobs)
    assert [j.id for j in lost] == [jobs[0].id]
    for j in jobs[1:]:
        back = queue.get(j.id)
        assert back.status is JobStatus.PENDING and back.attempts == 0
    assert_invariants(url)


def test_release_gives_the_attempt_back_and_is_due_now(
    cqueue: Queue, clock: Clock, url: str
) -> None:
    cqueue.enqueue("t", max_attempts=1)
    (job,) = cqueue.claim("w")
    clock.advance(5)
    cqueue.release(job)
    back = cqueue.get(job.id)
    assert back.status is JobStatus.PENDING
    assert back.attempts == 0
    assert back.claim_token is None and back.lease_expires_at is None
    assert close_to(back.run_at, clock())
    (again,) = cqueue.claim("w2")  # its only attempt is still available
    assert again.attempts == 1
    assert_invariants(url)


def test_snooze_runs_later_without_counting_the_attempt(
    cqueue: Queue, clock: Clock, url: str
) -> None:
    cqueue.enqueue("t", max_attempts=1)
    (job,) = cqueue.claim("w")
    cqueue.snooze(job, dt.timedelta(seconds=40))
    back = cqueue.get(job.id)
    assert back.status is JobStatus.PENDING and back.attempts == 0
    assert close_to(back.run_at, clock() + dt.timedelta(seconds=40))
    assert cqueue.claim("w") == []
    clock.advance(40)
    (again,) = cqueue.claim("w")
    cqueue.complete(again)
    assert_invariants(url)


def test_fail_retries_with_backoff_then_dead_keeping_the_error(
    make_queue: MakeQueue, clock: Clock, url: str
) -> None:
    policy = RetryPolicy(base=10, cap=25, jitter=0)
    q = make_queue(clock=clock, default_retry=policy)
    jid = q.enqueue("flaky", max_attempts=4)
    waits = []
    for attempt in range(1, 4):
        (job,) = q.claim("w")
        assert job.attempts == attempt
        assert q.fail(job, RuntimeError(f"failure {attempt}")) is JobStatus.RETRYABLE
        failed = q.get(jid)
        assert failed.status is JobStatus.RETRYABLE
        assert failed.last_error == f"RuntimeError: failure {attempt}"
        assert failed.claim_token is None and failed.finished_at is None
        waits.append((failed.run_at - clock()).total_seconds())
        clock.advance(waits[-1])
    assert [round(w, 3) for w in waits] == [10, 20, 25]  # doubling, capped
    (job,) = q.claim("w")
    assert job.attempts == 4
    assert q.fail(job, "final straw") is JobStatus.DEAD
    dead = q.get(jid)
    assert dead.status is JobStatus.DEAD
    assert dead.attempts == dead.max_attempts == 4
    assert dead.last_error == "final straw"
    assert close_to(dead.finished_at, clock())
    assert q.claim("w") == []
    assert q.dead.count() == 1
    assert_invariants(url)


def test_fail_honours_the_retry_policy_of_the_job_type(make_queue: MakeQueue, clock: Clock) -> None:
    q = make_queue(
        clock=clock,
        retry={"slow": RetryPolicy(base=300, cap=300, jitter=0)},
        default_retry=RetryPolicy(base=2, cap=2, jitter=0),
    )
    slow, fast = q.enqueue("slow"), q.enqueue("fast")
    for job in q.claim("w", limit=2):
        q.fail(job, "x")
    assert close_to(q.get(slow).run_at, clock() + dt.timedelta(seconds=300))
    assert close_to(q.get(fast).run_at, clock() + dt.timedelta(seconds=2))


def test_backoff_has_jitter_within_bounds(make_queue: MakeQueue, clock: Clock) -> None:
    q = make_queue(clock=clock, default_retry=RetryPolicy(base=100, cap=1000, jitter=0.5))
    q.enqueue_many([{"job_type": "t"}] * 30)
    jobs = q.claim("w", limit=30)
    for job in jobs:
        q.fail(job, "x")
    waits = {round((q.get(j.id).run_at - clock()).total_seconds(), 3) for j in jobs}
    assert all(50 <= w <= 100 for w in waits), waits
    assert len(waits) > 1, "jitter spreads the retries"


def test_fail_with_explicit_retry_in(cqueue: Queue, clock: Clock) -> None:
    cqueue.enqueue("t")
    (job,) = cqueue.claim("w")
    cqueue.fail(job, "x", retry_in=0)
    (again,) = cqueue.claim("w")
    assert again.attempts == 2


def test_fail_with_max_attempts_one_is_dead_at_once(queue: Queue, url: str) -> None:
    queue.enqueue("t", max_attempts=1)
    (job,) = queue.claim("w")
    assert queue.fail(job, ValueError()) is JobStatus.DEAD
    assert queue.get(job.id).last_error == "ValueError"
    assert_invariants(url)


def test_long_errors_are_truncated(queue: Queue) -> None:
    queue.enqueue("t")
    (job,) = queue.claim("w")
    queue.fail(job, "e" * 100_000)
    stored = queue.get(job.id).last_error
    assert stored == "e" * ops.MAX_ERROR_CHARS


def test_error_text_with_nul_characters_is_stored(queue: Queue, url: str) -> None:
    """An exception message may carry binary junk; PostgreSQL text refuses NUL."""
    queue.enqueue("t")
    (job,) = queue.claim("w")
    assert queue.fail(job, "bad byte \x00 here") is JobStatus.RETRYABLE
    stored = queue.get(job.id).last_error
    assert stored is not None and stored.startswith("bad byte") and stored.endswith("here")
    assert_invariants(url)


def test_cancel_held(queue: Queue, url: str) -> None:
    queue.enqueue("t")
    (job,) = queue.claim("w")
    queue.cancel_held(job, "handler gave up")
    gone = queue.get(job.id)
    assert gone.status is JobStatus.CANCELLED and gone.last_error == "handler gave up"
    assert gone.finished_at is not None
    assert_invariants(url)


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda q, j: q.snooze(j, -1), "delay=-1"),
        (lambda q, j: q.snooze(j, "soon"), "delay='soon'"),
        (lambda q, j: q.renew(j, lease=0), "lease=0"),
        (lambda q, j: q.fail(j, 42), "error=42"),
        (lambda q, j: q.fail(j, "x", retry_in=-5), "retry_in=-5"),
        (lambda q, j: q.renew_many(["nope"]), "'nope'"),
    ],
)
def test_outcomes_refuse_bad_arguments(
    queue: Queue, url: str, call: Callable[[Queue, Job], Any], named: str
) -> None:
    queue.enqueue("t")
    (job,) = queue.claim("w")
    before = table_snapshot(url)
    with pytest.raises(InvalidArgument) as info:
        call(queue, job)
    assert named in str(info.value)
    assert table_snapshot(url) == before
