"""Retention and operations: cleanup, summary, dead jobs, cancel."""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections.abc import Callable

import pytest

from jobvisor import InvalidArgument, JobNotFound, JobStatus, Queue
from jobvisor.queue import TypeRequeue
from tests.support.invariants import assert_invariants, status_counts
from tests.support.queue import Clock, close_to, row_count


def _finish(q: Queue, status: str, n: int = 1, *, job_type: str = "t") -> list[uuid.UUID]:
    """n jobs brought to a terminal `status` now."""
    ids = q.enqueue_many([{"job_type": job_type, "max_attempts": 1}] * n)
    if status == "cancelled":
        for i in ids:
            q.cancel(i)
        return ids
    jobs = q.claim("w", limit=n, job_types=[job_type])
    assert len(jobs) == n
    for job in jobs:
        if status == "completed":
            q.complete(job)
        else:
            q.fail(job, "no more")
    return ids


def test_cleanup_removes_only_old_terminal_jobs(cqueue: Queue, clock: Clock, url: str) -> None:
    old = [
        *_finish(cqueue, "completed", 2),
        *_finish(cqueue, "dead"),
        *_finish(cqueue, "cancelled"),
    ]
    clock.advance(3600)
    recent = _finish(cqueue, "completed")
    pending = cqueue.enqueue("t")
    retryable = cqueue.enqueue("t")
    cqueue.claim("w", job_types=["t"])  # claims `pending` (older id)
    (running,) = cqueue.claim("w2")
    assert running.id == retryable
    cqueue.fail(running, "again")
    cqueue.enqueue("t2")
    cqueue.claim("w3", job_types=["t2"])  # one running
    clock.advance(60)
    assert cqueue.cleanup(dt.timedelta(minutes=30)) == 4
    for i in old:
        with pytest.raises(JobNotFound):
            cqueue.get(i)
    assert cqueue.get(recent[0]).status is JobStatus.COMPLETED
    assert status_counts(url) == {"completed": 1, "running": 2, "retryable": 1}
    assert cqueue.cleanup(30) == 1  # seconds
    assert cqueue.cleanup(0) == 0
    assert status_counts(url) == {"running": 2, "retryable": 1}
    del pending
    assert_invariants(url)


def test_cleanup_in_batches(cqueue: Queue, clock: Clock, url: str) -> None:
    _finish(cqueue, "completed", 25)
    clock.advance(10)
    assert cqueue.cleanup(5, batch_size=4) == 25
    assert row_count(url) == 0


def test_cleanup_with_a_retention_per_status(cqueue: Queue, clock: Clock, url: str) -> None:
    _finish(cqueue, "completed", 2)
    _finish(cqueue, "dead", 3)
    _finish(cqueue, "cancelled", 4)
    clock.advance(2 * 86400)
    deleted = cqueue.cleanup({"completed": 3600, JobStatus.DEAD: dt.timedelta(days=7)})
    assert deleted == 2
    assert status_counts(url) == {"dead": 3, "cancelled": 4}
    assert cqueue.cleanup({"dead": 86400, "cancelled": None}) == 3
    assert status_counts(url) == {"cancelled": 4}
    assert_invariants(url)


@pytest.mark.parametrize(
    ("older_than", "batch_size", "named"),
    [
        (-1, 10, "older_than=-1"),
        ("1h", 10, "older_than='1h'"),
        ({"pending": 10}, 10, "'pending' is not terminal"),
        ({"finished": 10}, 10, "'finished' is not a job status"),
        ({"dead": -5}, 10, "older_than[dead]=-5"),
        (10, 0, "batch_size=0"),
    ],
)
def test_cleanup_refuses_bad_arguments(
    cqueue: Queue, clock: Clock, url: str, *, older_than: object, batch_size: int, named: str
) -> None:
    _finish(cqueue, "completed")
    clock.advance(100)
    with pytest.raises(InvalidArgument) as info:
        cqueue.cleanup(older_than, batch_size=batch_size)  # type: ignore[arg-type]
    assert named in str(info.value)
    assert row_count(url) == 1


def test_summary_counts_and_its_table(cqueue: Queue, clock: Clock, url: str) -> None:
    assert cqueue.summary().total == 0
    empty = str(cqueue.summary())
    assert "total" in empty and "pending" in empty
    cqueue.enqueue_many([{"job_type": "e", "queue": "mail"}] * 3)
    cqueue.enqueue("r", queue="images", delay=600)
    _finish(cqueue, "dead", job_type="x")
    clock.advance(90)
    (job,) = cqueue.claim("w", queues=["mail"])
    s = cqueue.summary()
    assert s.total == 5
    assert s.count(JobStatus.PENDING) == 3
    assert s.count("pending", "mail") == 2
    assert s.count(JobStatus.RUNNING, "mail") == 1
    assert s.count(JobStatus.DEAD) == 1
    assert s.by_status()[JobStatus.PENDING] == 3
    assert s.oldest_pending_age["mail"] == pytest.approx(90, abs=0.5)
    assert "images" not in s.oldest_pending_age  # not due yet
    d = s.to_dict()
    assert d["total"] == 5 and d["queues"]["mail"]["pending"] == 2
    lines = str(s).splitlines()
    header = lines[0].split()
    assert header[:7] == ["queue", "pending", "running", "retryable", "completed", "dead",
                          "cancelled"]  # fmt: skip
    rows = {line.split()[0]: line.split() for line in lines if line[:1].isalpha()}
    assert rows["mail"][1:3] == ["2", "1"]
    assert rows["images"][1] == "1"
    assert rows["default"][5] == "1"
    assert rows["total"][1:7] == ["3", "1", "0", "0", "1", "0"]
    assert rows["mail"][-1] == "90.0s"
    assert len({len(line) for line in lines if set(line) == {"-", " "}}) == 1
    cqueue.complete(job)
    assert_invariants(url)


def test_dead_jobs(cqueue: Queue, clock: Clock, url: str) -> None:
    first = _finish(cqueue, "dead", job_type="a")[0]
    clock.advance(1)
    second = _finish(cqueue, "dead", job_type="b")[0]
    alive = cqueue.enqueue("c")
    assert cqueue.dead.count() == 2
    assert [j.id for j in cqueue.dead.list()] == [first, second]  # oldest first
    assert [j.id for j in cqueue.dead.list(1)] == [first]
    assert [j.id for j in cqueue.dead.list(0)] == [first, second]  # non-positive: 100
    assert [j.id for j in cqueue.dead.list(-5)] == [first, second]
    assert [j.id for j in cqueue.dead.list(job_type="b")] == [second]
    got = cqueue.dead.get(first)
    assert got.status is JobStatus.DEAD and got.last_error == "no more"
    with pytest.raises(JobNotFound, match="not dead"):
        cqueue.dead.get(alive)
    missing = uuid.uuid4()
    for call in (cqueue.dead.get, cqueue.dead.requeue, cqueue.dead.discard, cqueue.get,
                 cqueue.cancel):  # fmt: skip
        with pytest.raises(JobNotFound) as info:
            call(missing)
        assert str(missing) in str(info.value)

    clock.advance(5)
    cqueue.dead.requeue(first)
    back = cqueue.get(first)
    assert back.status is JobStatus.PENDING and back.attempts == 0
    assert back.finished_at is None and close_to(back.run_at, clock())
    later = clock() + dt.timedelta(hours=1)
    cqueue.dead.requeue(second, run_at=later)
    assert close_to(cqueue.get(second).run_at, later)
    assert cqueue.dead.count() == 0
    with pytest.raises(JobNotFound, match="not dead"):
        cqueue.dead.requeue(first)
    (again,) = cqueue.claim("w", job_types=["a"])
    assert again.id == first and again.attempts == 1
    cqueue.fail(again, "still broken")
    assert cqueue.dead.count() == 1
    cqueue.dead.discard(first)
    assert cqueue.dead.count() == 0
    with pytest.raises(JobNotFound):
        cqueue.get(first)
    with pytest.raises(JobNotFound, match="not dead"):
        cqueue.dead.discard(alive)
    assert cqueue.get(alive).status is JobStatus.PENDING
    assert_invariants(url)


def test_dead_requeue_refuses_a_naive_time(queue: Queue) -> None:
    jid = _finish(queue, "dead")[0]
    with pytest.raises(InvalidArgument, match="run_at="):
        queue.dead.requeue(jid, run_at=dt.datetime(2030, 1, 1))
    assert queue.get(jid).status is JobStatus.DEAD


def test_dead_requeue_when_a_live_job_holds_the_dedupe_key(queue: Queue, url: str) -> None:
    queue.enqueue("t", dedupe_key="k", max_attempts=1)
    (job,) = queue.claim("w")
    queue.fail(job, "x")
    live = queue.enqueue("t", dedupe_key="k")
    with pytest.raises(InvalidArgument) as info:
        queue.dead.requeue(job.id)
    assert str(live) in str(info.value)
    assert queue.get(job.id).status is JobStatus.DEAD
    assert_invariants(url)


def test_dead_jobs_of_a_type_counted_and_discarded_in_batches(queue: Queue, url: str) -> None:
    doomed = _finish(queue, "dead", 5, job_type="broken")
    kept = _finish(queue, "dead", 2, job_type="other")
    done = _finish(queue, "completed", 1, job_type="broken")
    alive = queue.enqueue("broken")
    assert queue.dead.count(job_type="broken") == 5
    assert queue.dead.count(job_type="other") == 2 and queue.dead.count() == 7
    assert queue.dead.count(job_type="nothing") == 0

    assert queue.dead.discard_type("broken", batch_size=2) == 5  # batches of 2, 2 and 1
    for jid in doomed:
        with pytest.raises(JobNotFound):
            queue.get(jid)
    assert [queue.get(i).status for i in kept] == [JobStatus.DEAD] * 2
    assert queue.get(done[0]).status is JobStatus.COMPLETED  # only dead jobs go
    assert queue.get(alive).status is JobStatus.PENDING
    assert queue.dead.discard_type("broken") == 0
    assert_invariants(url)


def test_dead_jobs_of_a_type_requeued_in_batches(queue: Queue, url: str) -> None:
    plain = _finish(queue, "dead", 5, job_type="broken")
    queue.enqueue("broken", dedupe_key="free", max_attempts=1)
    queue.enqueue("broken", dedupe_key="taken", max_attempts=1)
    keyed = {j.dedupe_key: j for j in queue.claim("w", limit=2, job_types=["broken"])}
    for job in keyed.values():
        queue.fail(job, "no more")
    live = queue.enqueue("report", dedupe_key="taken")  # holds the key of a dead job
    kept = _finish(queue, "dead", 2, job_type="other")
    done = _finish(queue, "completed", 1, job_type="broken")
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)

    result = queue.dead.requeue_type("broken", run_at=later, batch_size=2)  # batches 2, 2, 1
    assert result == TypeRequeue(requeued=6, held=(keyed["taken"].id,))
    for jid in [*plain, keyed["free"].id]:
        job = queue.get(jid)
        assert job.status is JobStatus.PENDING and job.attempts == 0
        assert job.finished_at is None and close_to(job.run_at, later)
    assert queue.get(keyed["taken"].id).status is JobStatus.DEAD
    assert queue.get(live).status is JobStatus.PENDING
    assert [queue.get(i).status for i in kept] == [JobStatus.DEAD] * 2  # other types stay
    assert queue.get(done[0]).status is JobStatus.COMPLETED  # only dead jobs move
    assert queue.dead.requeue_type("broken") == TypeRequeue(requeued=0, held=(keyed["taken"].id,))
    assert_invariants(url)


def test_dead_jobs_of_a_type_requeued_now_are_claimable(queue: Queue, url: str) -> None:
    ids = _finish(queue, "dead", 3, job_type="broken")
    assert queue.dead.requeue_type("broken").requeued == 3
    assert sorted(j.id for j in queue.claim("w", limit=5)) == sorted(ids)
    assert_invariants(url)


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda q: q.dead.discard_type(""), "job_type=''"),
        (lambda q: q.dead.discard_type(None), "job_type=None"),
        (lambda q: q.dead.discard_type("t", batch_size=0), "batch_size=0"),
        (lambda q: q.dead.count(job_type=""), "job_type=''"),
        (lambda q: q.dead.requeue_type(""), "job_type=''"),
        (lambda q: q.dead.requeue_type("t", batch_size=0), "batch_size=0"),
        (lambda q: q.dead.requeue_type("t", run_at=dt.datetime(2030, 1, 1)), "run_at="),
    ],
)
def test_dead_of_a_type_refuses_bad_arguments(
    queue: Queue, call: Callable[[Queue], object], named: str
) -> None:
    (dead,) = _finish(queue, "dead")
    with pytest.raises(InvalidArgument, match=re.escape(named)):
        call(queue)
    assert queue.get(dead).status is JobStatus.DEAD


def test_cancel(cqueue: Queue, clock: Clock, url: str) -> None:
    pending = cqueue.enqueue("t")
    retryable = cqueue.enqueue("t", priority=1)
    (job,) = cqueue.claim("w")
    assert job.id == retryable
    cqueue.fail(job, "x")
    running = cqueue.enqueue("t", priority=2)
    (held,) = cqueue.claim("w", limit=1)
    assert held.id == running
    cqueue.cancel(pending)
    cqueue.cancel(str(retryable))
    for jid in (pending, retryable):
        gone = cqueue.get(jid)
        assert gone.status is JobStatus.CANCELLED and close_to(gone.finished_at, clock())
    with pytest.raises(JobNotFound, match="cancelled"):
        cqueue.cancel(pending)
    clock.advance(10_000)
    assert cqueue.claim("w", limit=10) == []  # cancelled jobs never run
    cqueue.complete(held)
    with pytest.raises(JobNotFound, match="completed"):
        cqueue.cancel(running)
    assert_invariants(url)
