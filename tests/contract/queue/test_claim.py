"""claim: atomic under concurrent claimers (threads and processes), ordering,
filters, schedules, and what a claim records."""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import threading

import pytest

import jobvisor
from jobvisor import JobStatus, Queue
from jobvisor.queue.ops import hints
from tests.support.invariants import assert_invariants, status_counts
from tests.support.queue import Clock, MakeQueue, child_claim_all, close_to, run_in_processes


def test_empty_queue_returns_nothing(queue: Queue, url: str) -> None:
    assert queue.claim("w") == []
    assert queue.claim("w", limit=50, queues=["x"], job_types=["y"]) == []
    assert_invariants(url)


def test_claim_records_attempt_token_lease_and_worker(
    cqueue: Queue, clock: Clock, url: str
) -> None:
    jid = cqueue.enqueue("t")
    (job,) = cqueue.claim("worker-a", lease=45)
    assert job.id == jid
    assert job.status is JobStatus.RUNNING
    assert job.attempts == 1
    assert job.worker_id == "worker-a"
    assert job.claim_token is not None
    assert close_to(job.lease_expires_at, clock() + dt.timedelta(seconds=45))
    assert close_to(job.started_at, clock())
    stored = cqueue.get(jid)
    assert stored.claim_token == job.claim_token
    assert stored.status is JobStatus.RUNNING
    assert stored.worker_id == "worker-a"
    assert_invariants(url)


def test_claim_uses_the_default_lease(make_queue: MakeQueue, clock: Clock) -> None:
    q = make_queue(clock=clock, lease=12.5)
    q.enqueue("t")
    (job,) = q.claim("w")
    assert close_to(job.lease_expires_at, clock() + dt.timedelta(seconds=12.5))


def test_each_claim_gets_a_fresh_token(queue: Queue) -> None:
    """One token per claim call (made by the caller, not by the statement):
    the pair (id, token) names one claim of one job."""
    queue.enqueue_many([{"job_type": "t"}] * 5)
    first = queue.claim("w", limit=2)
    second = queue.claim("w", limit=3)
    assert len({j.claim_token for j in first}) == len({j.claim_token for j in second}) == 1
    assert first[0].claim_token != second[0].claim_token
    queue.release(first[0])
    (again,) = queue.claim("w")
    assert again.id == first[0].id
    assert again.claim_token not in {first[0].claim_token, second[0].claim_token}
    # Another claim's token does not hold this job.
    forged = dataclasses.replace(second[0], claim_token=first[1].claim_token)
    with pytest.raises(jobvisor.LeaseLost):
        queue.complete(forged)
    queue.complete(first[1])
    assert queue.get(second[0].id).status is JobStatus.RUNNING


def test_priority_then_run_at_then_id(cqueue: Queue, clock: Clock, url: str) -> None:
    t0 = clock()
    low = cqueue.enqueue("t", priority=-5)
    mid_late = cqueue.enqueue("t", priority=1, run_at=t0 - dt.timedelta(seconds=10))
    mid_early = cqueue.enqueue("t", priority=1, run_at=t0 - dt.timedelta(seconds=20))
    same_a = cqueue.enqueue("t", priority=1, run_at=t0 - dt.timedelta(seconds=10))
    high = cqueue.enqueue("t", priority=100)
    default = cqueue.enqueue("t")
    expected = [high, mid_early, *sorted([mid_late, same_a]), default, low]
    # Batch claims come back in claim order...
    assert [j.id for j in cqueue.claim("w", limit=3)] == expected[:3]
    # ...and one-at-a-time claims follow the same order.
    assert [cqueue.claim("w")[0].id for _ in range(3)] == expected[3:]
    assert cqueue.claim("w") == []
    assert_invariants(url)


def test_job_type_and_queue_filters(queue: Queue, url: str) -> None:
    a = queue.enqueue("email", queue="mail")
    b = queue.enqueue("resize", queue="images")
    c = queue.enqueue("email", queue="default")
    d = queue.enqueue("thumb", queue="images")
    assert queue.claim("w", job_types=["nothing"]) == []
    assert queue.claim("w", queues=["nowhere"]) == []
    assert [j.id for j in queue.claim("w", job_types=["email"], limit=10)] == [a, c]
    assert [j.id for j in queue.claim("w", queues=["images"], job_types=["thumb"])] == [d]
    assert [j.id for j in queue.claim("w", queues=[], job_types=None, limit=10)] == [b]
    assert_invariants(url)


def test_queue_filter_with_several_names(queue: Queue) -> None:
    ids = {q: queue.enqueue("t", queue=q) for q in ["a", "b", "c"]}
    got = {j.queue for j in queue.claim("w", queues=("a", "c"), limit=10)}
    assert got == {"a", "c"}
    assert queue.get(ids["b"]).status is JobStatus.PENDING


def test_a_look_for_limits_that_finds_none_never_skips_the_plain_claim(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every claim looks for limited groups again, and a plain claim that came
    # back short would rest for a minute were any about: with none, the next
    # claim still takes the job that is due.
    monkeypatch.setattr(hints, "LIMITS_RECHECK", 0.0)
    monkeypatch.setattr(hints, "PLAIN_RECHECK", 60.0)
    first = queue.enqueue("t")
    assert [j.id for j in queue.claim("w", limit=10)] == [first]  # short: 1 of 10
    second = queue.enqueue("t")
    assert [j.id for j in queue.claim("w", limit=10)] == [second]


def test_future_job_not_claimed_until_its_time(cqueue: Queue, clock: Clock, url: str) -> None:
    later = cqueue.enqueue("t", delay=60)
    at = cqueue.enqueue("t", run_at=clock() + dt.timedelta(seconds=120))
    assert cqueue.claim("w", limit=10) == []
    clock.advance(59)
    assert cqueue.claim("w", limit=10) == []
    clock.advance(1)
    assert [j.id for j in cqueue.claim("w", limit=10)] == [later]
    clock.advance(59.5)
    assert cqueue.claim("w", limit=10) == []
    clock.advance(0.5)
    assert [j.id for j in cqueue.claim("w", limit=10)] == [at]
    assert_invariants(url)


def test_a_retryable_job_waits_for_its_backoff(cqueue: Queue, clock: Clock) -> None:
    cqueue.enqueue("t")
    (job,) = cqueue.claim("w")
    assert cqueue.fail(job, "x", retry_in=30) is JobStatus.RETRYABLE
    assert cqueue.claim("w") == []
    clock.advance(30)
    (again,) = cqueue.claim("w")
    assert again.id == job.id and again.attempts == 2


def test_limit_caps_the_batch(queue: Queue) -> None:
    queue.enqueue_many([{"job_type": "t"}] * 7)
    assert len(queue.claim("w", limit=3)) == 3
    assert len(queue.claim("w", limit=10)) == 4
    assert queue.claim("w", limit=10) == []


def test_concurrent_claimers_in_threads_never_share_a_job(url: str, queue: Queue) -> None:
    total, n_threads = 600, 6
    queue.enqueue_many({"job_type": "t", "payload": {"i": i}} for i in range(total))
    start = threading.Barrier(n_threads)
    got: dict[str, list[str]] = {}
    errors: list[BaseException] = []

    def claimer(worker_id: str) -> None:
        mine: list[str] = []
        try:
            with jobvisor.connect(url) as q:
                start.wait(30)
                while jobs := q.claim(worker_id, limit=7):
                    mine.extend(str(j.id) for j in jobs)
                    assert q.complete_many(jobs) == []
        except BaseException as exc:
            errors.append(exc)
        got[worker_id] = mine

    threads = [threading.Thread(target=claimer, args=(f"w{i}",)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(100)
    assert not errors, errors
    every = [jid for ids in got.values() for jid in ids]
    dupes = [jid for jid, n in collections.Counter(every).items() if n > 1]
    assert not dupes, f"handed out twice: {dupes[:5]}"
    assert len(every) == total
    assert status_counts(url) == {"completed": total}
    assert_invariants(url)


def test_concurrent_claimers_in_processes_never_share_a_job(url: str, queue: Queue) -> None:
    total = 900
    queue.enqueue_many({"job_type": "t", "payload": {"i": i}} for i in range(total))
    results = run_in_processes(child_claim_all, [(url, f"proc-{i}", 10) for i in range(3)])
    every = [jid for ids in results for jid in ids]
    dupes = [jid for jid, n in collections.Counter(every).items() if n > 1]
    assert not dupes, f"handed out twice: {dupes[:5]}"
    assert len(every) == total
    assert status_counts(url) == {"completed": total}
    assert_invariants(url)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"worker_id": ""}, "worker_id=''"),
        ({"worker_id": "w", "limit": 0}, "limit=0"),
        ({"worker_id": "w", "limit": True}, "limit=True"),
        ({"worker_id": "w", "lease": 0}, "lease=0"),
        ({"worker_id": "w", "lease": -3}, "lease=-3"),
        ({"worker_id": "w", "queues": "mail"}, "queues='mail'"),
        ({"worker_id": "w", "job_types": [""]}, "job_types"),
    ],
)
def test_claim_refuses_bad_arguments(
    queue: Queue, url: str, kwargs: dict[str, object], named: str
) -> None:
    queue.enqueue("t")
    with pytest.raises(jobvisor.InvalidArgument) as info:
        queue.claim(**kwargs)  # type: ignore[arg-type]
    assert named in str(info.value)
    assert status_counts(url) == {"pending": 1}
