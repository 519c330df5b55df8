"""A job parked in a sleep or a wait for a signal, with the rest of the
queue, on both engines: a cancel (before or while it ran) ends it cancelled
at once; it holds no concurrency slot; a paused queue keeps it until the
resume, a signal meanwhile kept; it keeps its unique and dedupe keys."""

from __future__ import annotations

from jobvisor import Job, JobStatus, Queue, Unique
from jobvisor.queue import internal, ops
from tests.support.invariants import assert_invariants
from tests.support.queue import Clock, MakeQueue


def _park(q: Queue, job: Job, signal: str = "go") -> None:
    wait = internal.service_ops(q).step_wait(job, 0, f"signal:{signal}", signal=signal)
    assert wait.outcome is ops.Waited.PARKED


def test_a_cancel_asked_while_it_ran_ends_it_cancelled_when_it_parks(
    queue: Queue, url: str
) -> None:
    queue.enqueue("t")
    (job,) = queue.claim("w")
    assert queue.cancel(job.id) is JobStatus.RUNNING  # asked: its worker stops it
    _park(queue, job)
    done = queue.get(job.id)
    assert done.status is JobStatus.CANCELLED and done.finished_at is not None
    assert queue.claim("w") == []
    assert_invariants(url)


def test_a_parked_job_holds_no_concurrency_slot(queue: Queue, url: str) -> None:
    queue.set_limit(job_type="t", concurrency=1)
    first = queue.enqueue("t")
    second = queue.enqueue("t")
    (job,) = queue.claim("w", limit=2)
    assert job.id == first
    assert queue.claim("w") == []  # the one slot is taken
    _park(queue, job)
    (other,) = queue.claim("w")  # the parked one gave its slot back
    assert other.id == second
    queue.signal(first, "go")
    assert queue.claim("w") == []  # due again, but the slot is the other's now
    queue.complete(other)
    (resumed,) = queue.claim("w")
    assert resumed.id == first and resumed.attempts == 1
    assert_invariants(url)


def test_a_paused_queue_keeps_a_parked_job_until_resumed(
    make_queue: MakeQueue, clock: Clock
) -> None:
    q = make_queue(clock=clock)
    q.enqueue("t", queue="mail")
    (job,) = q.claim("w", queues=["mail"])
    _park(q, job)
    q.pause("mail")
    q.signal(job.id, "go")  # kept, and makes it due
    assert q.get(job.id).run_at <= clock()
    assert q.claim("w", queues=["mail"]) == []
    q.resume("mail")
    (again,) = q.claim("w", queues=["mail"])
    wait = internal.service_ops(q).step_wait(again, 0, "signal:go", signal="go")
    assert wait.outcome is ops.Waited.DONE


def test_a_parked_job_keeps_its_unique_and_dedupe_keys(queue: Queue, url: str) -> None:
    unique = queue.enqueue("sync", {"n": 1}, unique=Unique(key="account:1"))
    deduped = queue.enqueue("mail", {"n": 1}, dedupe_key="mail:1")
    for job in queue.claim("w", limit=2):
        _park(queue, job)
    assert queue.get(unique).status is JobStatus.PENDING
    assert queue.enqueue("sync", {"n": 2}, unique=Unique(key="account:1")) == unique
    assert queue.enqueue("mail", {"n": 2}, dedupe_key="mail:1") == deduped
    assert queue.get(unique).payload == {"n": 1} and queue.get(deduped).payload == {"n": 1}
    assert_invariants(url)
