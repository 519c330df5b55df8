"""Taking jobs back: reap_expired (and its race with a renewal), lease
fencing between two workers, and requeue_crashed."""

from __future__ import annotations

import datetime as dt
import sqlite3
import threading

import psycopg
import pytest

import jobvisor
from jobvisor import InvalidArgument, JobStatus, LeaseLost, Queue, RetryPolicy
from jobvisor.queue.api import parse_url
from jobvisor.queue.drivers.postgres import sql as sql_postgres
from jobvisor.queue.drivers.sqlite import sql as sql_sqlite
from jobvisor.queue.ops.recovery import CRASH_LIMIT
from tests.support.invariants import assert_invariants
from tests.support.queue import Clock, MakeQueue, close_to, table_snapshot
from tests.support.wait import wait_until


def test_reap_expired_returns_jobs_to_retryable_or_dead(
    cqueue: Queue, clock: Clock, url: str
) -> None:
    retry = cqueue.enqueue("t", max_attempts=3)
    spent = cqueue.enqueue("t", max_attempts=1)
    fresh = cqueue.enqueue("t")
    jobs = {j.id: j for j in cqueue.claim("w-old", limit=2, lease=10)}
    assert set(jobs) == {retry, spent}
    clock.advance(5)
    (held,) = cqueue.claim("w-new", lease=60)
    assert held.id == fresh
    assert cqueue.reap_expired() == 0  # nothing expired yet
    clock.advance(5)
    assert cqueue.reap_expired() == 0  # expiry is strictly after the lease end
    clock.advance(0.5)
    assert cqueue.reap_expired() == 2
    back = cqueue.get(retry)
    assert back.status is JobStatus.RETRYABLE
    assert back.attempts == 1  # the attempt stays counted
    assert back.last_error is not None and "w-old" in back.last_error
    assert back.run_at > clock()  # backoff
    dead = cqueue.get(spent)
    assert dead.status is JobStatus.DEAD and dead.finished_at is not None
    assert cqueue.get(fresh).status is JobStatus.RUNNING
    assert cqueue.reap_expired() == 0
    assert_invariants(url)


def test_reaper_after_a_renewal_leaves_the_job_alone(cqueue: Queue, clock: Clock, url: str) -> None:
    cqueue.enqueue("t")
    (job,) = cqueue.claim("w", lease=10)
    clock.advance(9)
    cqueue.renew(job)
    clock.advance(9)
    assert cqueue.reap_expired() == 0
    cqueue.complete(job)
    clock.advance(100)
    assert cqueue.reap_expired() == 0
    assert cqueue.get(job.id).status is JobStatus.COMPLETED
    assert_invariants(url)


def test_reaper_racing_a_renewal_in_flight(pg_url: str) -> None:
    """The renewal's transaction holds the row when the reaper's UPDATE starts;
    the reaper re-checks the lease on the committed row and leaves it alone."""
    with jobvisor.connect(pg_url) as q:
        q.migrate()
        q.enqueue("t")
        (job,) = q.claim("w", lease=30)
        with psycopg.connect(pg_url) as renewer:
            # The renewal, in flight: it expired the lease a moment ago and
            # is about to extend it again.
            renewer.execute(
                "UPDATE jobvisor_jobs SET lease_expires_at = now() - interval '1 second'"
                " WHERE id = %s",
                (job.id,),
            )
            renewer.commit()
            renewer.execute(
                "UPDATE jobvisor_jobs SET lease_expires_at = now() + interval '1 hour'"
                " WHERE id = %s AND claim_token = %s",
                (job.id, job.claim_token),
            )
            reaped: list[int] = []
            reaper = threading.Thread(target=lambda: reaped.append(q.reap_expired()))
            reaper.start()
            with psycopg.connect(pg_url, autocommit=True) as watch:
                wait_until(
                    lambda: (
                        watch.execute(
                            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                            " AND query LIKE '%%lease expired%%'"
                        ).fetchone()
                        == (1,)
                    ),
                    what="the reaper to wait on the renewal's row lock",
                )
            renewer.commit()
            reaper.join(60)
        assert reaped == [0]
        q.complete(job)
        assert q.get(job.id).status is JobStatus.COMPLETED
    assert_invariants(pg_url)


def test_lease_fencing(cqueue: Queue, clock: Clock, url: str) -> None:
    """Worker A's job is reaped and claimed by B: A can no longer change it."""
    jid = cqueue.enqueue("t")
    (a_job,) = cqueue.claim("worker-a", lease=10)
    clock.advance(11)
    assert cqueue.reap_expired() == 1
    clock.advance(3600)  # past any backoff
    (b_job,) = cqueue.claim("worker-b", lease=10)
    assert b_job.id == jid and b_job.attempts == 2
    assert b_job.claim_token != a_job.claim_token
    for late in (
        lambda: cqueue.complete(a_job),
        lambda: cqueue.fail(a_job, "late"),
        lambda: cqueue.renew(a_job),
        lambda: cqueue.release(a_job),
        lambda: cqueue.snooze(a_job, 1),
    ):
        with pytest.raises(LeaseLost):
            late()
    assert cqueue.complete_many([a_job]) == [a_job]
    current = cqueue.get(jid)
    assert current.status is JobStatus.RUNNING and current.worker_id == "worker-b"
    assert current.claim_token == b_job.claim_token
    cqueue.complete(b_job)
    assert cqueue.get(jid).status is JobStatus.COMPLETED
    assert_invariants(url)


def test_stale_and_current_claim_in_one_batch(cqueue: Queue, clock: Clock, url: str) -> None:
    cqueue.enqueue("t")
    (old,) = cqueue.claim("w", lease=5)
    clock.advance(6)
    cqueue.reap_expired()
    clock.advance(3600)
    (new,) = cqueue.claim("w", lease=5)
    assert cqueue.complete_many([old, new]) == [old]
    assert cqueue.get(new.id).status is JobStatus.COMPLETED
    assert_invariants(url)


def test_reap_expired_by_type_counts_what_it_took_back(
    cqueue: Queue, clock: Clock, url: str
) -> None:
    cqueue.enqueue_many([{"job_type": "resize"}] * 2 + [{"job_type": "send", "queue": "mail"}])
    cqueue.enqueue("resize")
    cqueue.claim("w-gone", limit=3, lease=10)
    cqueue.claim("w-live", lease=100)
    assert cqueue.reap_expired_by_type() == {}
    clock.advance(11)
    assert cqueue.reap_expired_by_type() == {("default", "resize"): 2, ("mail", "send"): 1}
    assert cqueue.reap_expired_by_type() == {}  # taken back once
    assert_invariants(url)


def test_requeue_crashed_charges_a_job_that_ran_alone(
    cqueue: Queue, clock: Clock, url: str
) -> None:
    a = cqueue.enqueue("t", priority=3)
    b = cqueue.enqueue("t", priority=2, max_attempts=1)
    c = cqueue.enqueue("t", priority=1)
    cqueue.claim("dead-worker")
    cqueue.claim("dead-again")
    cqueue.claim("live-worker")
    clock.advance(1)
    assert cqueue.requeue_crashed("dead-worker") == 1
    requeued = cqueue.get(a)
    assert requeued.status is JobStatus.RETRYABLE
    assert requeued.attempts == 1  # counted: alone in its worker, it is what killed it
    assert close_to(requeued.run_at, clock())  # due at once
    assert requeued.last_error is not None and "dead-worker" in requeued.last_error
    assert cqueue.requeue_crashed("dead-again") == 1
    assert cqueue.get(b).status is JobStatus.DEAD
    assert cqueue.get(c).status is JobStatus.RUNNING
    assert cqueue.requeue_crashed("dead-worker") == 0
    assert cqueue.requeue_crashed("never-existed") == 0
    (again,) = cqueue.claim("new-worker")
    assert again.id == a and again.attempts == 2
    assert_invariants(url)


def test_requeue_crashed_without_a_culprit_charges_none_of_several_until_their_crash_limit(
    cqueue: Queue, clock: Clock, url: str
) -> None:
    ids = [cqueue.enqueue("t", max_attempts=1) for _ in range(3)]
    for crash in range(1, CRASH_LIMIT):
        cqueue.claim(f"worker-{crash}", limit=3)
        clock.advance(1)
        assert cqueue.requeue_crashed(f"worker-{crash}") == 3
        for job_id in ids:  # which one killed it is not known: none loses an attempt
            back = cqueue.get(job_id)
            assert (back.status, back.attempts, back.last_error) == (JobStatus.PENDING, 0, None)
            assert close_to(back.run_at, clock())
    cqueue.claim("worker-last", limit=3)
    assert cqueue.requeue_crashed("worker-last") == 3
    for job_id in ids:  # the crash limit: each is charged
        dead = cqueue.get(job_id)
        assert (dead.status, dead.attempts) == (JobStatus.DEAD, 1)
        assert dead.last_error is not None and "worker-last" in dead.last_error
    assert_invariants(url)


def test_requeue_crashed_charges_only_a_known_culprit(
    cqueue: Queue, clock: Clock, url: str
) -> None:
    first = cqueue.enqueue("t", priority=3)
    overrun = cqueue.enqueue("t", priority=2)
    spent = cqueue.enqueue("t", priority=1, max_attempts=1)
    cqueue.claim("killed-worker", limit=3)
    cqueue.enqueue("t")
    (other,) = cqueue.claim("live-worker")
    clock.advance(1)
    error = f"hard time limit of 5s exceeded by job {overrun}"
    assert cqueue.requeue_crashed("killed-worker", error=error, culprit=overrun) == 3
    charged = cqueue.get(overrun)
    assert charged.status is JobStatus.RETRYABLE and charged.attempts == 1
    assert charged.last_error == error and close_to(charged.run_at, clock())
    for innocent in (first, spent):  # interrupted by its fault: attempt given back
        back = cqueue.get(innocent)
        assert back.status is JobStatus.PENDING and back.attempts == 0
        assert back.last_error is None and close_to(back.run_at, clock())
    assert cqueue.get(other.id).status is JobStatus.RUNNING
    # A culprit with its attempts spent is dead.
    (again,) = cqueue.claim("w2", job_types=["t"], limit=1)
    assert again.id == first
    cqueue.requeue_crashed("w2", error="boom", culprit=str(first))
    assert cqueue.get(first).status is JobStatus.RETRYABLE
    (last,) = [j for j in cqueue.claim("w3", limit=5) if j.id == spent]
    cqueue.requeue_crashed("w3", error="hard limit", culprit=last.id)
    dead = cqueue.get(spent)
    assert dead.status is JobStatus.DEAD and dead.last_error == "hard limit"
    assert_invariants(url)


def test_requeue_crashed_refuses_a_culprit_that_is_not_a_job_id(queue: Queue, url: str) -> None:
    queue.enqueue("t")
    queue.claim("w")
    before = table_snapshot(url)
    with pytest.raises(InvalidArgument, match="'nope'"):
        queue.requeue_crashed("w", culprit="nope")
    assert table_snapshot(url) == before


def test_requeue_crashed_with_an_error_text(queue: Queue) -> None:
    queue.enqueue("t")
    queue.claim("w")
    assert queue.requeue_crashed("w", error="killed by signal 9 (probably OOM)") == 1
    (job,) = queue.claim("w2")
    assert job.last_error == "killed by signal 9 (probably OOM)"


def test_a_job_that_keeps_killing_workers_ends_dead(queue: Queue, url: str) -> None:
    jid = queue.enqueue("poison", max_attempts=3)
    for n in range(3):
        (job,) = queue.claim(f"w{n}")
        assert job.id == jid
        queue.requeue_crashed(f"w{n}")
    assert queue.get(jid).status is JobStatus.DEAD
    assert queue.claim("w") == []
    assert_invariants(url)


def test_reaper_survives_jobs_with_many_attempts(cqueue: Queue, clock: Clock, url: str) -> None:
    """The backoff of a job on its 1500th attempt must not overflow the reaper's
    arithmetic: one such job would stop every expired lease being reaped."""
    many = cqueue.enqueue("t", max_attempts=5000)
    other = cqueue.enqueue("t")
    jobs = cqueue.claim("w", limit=2, lease=5)
    assert {j.id for j in jobs} == {many, other}
    _set_attempts(url, many, 1500)
    clock.advance(6)
    assert cqueue.reap_expired() == 2
    assert cqueue.get(many).status is JobStatus.RETRYABLE
    assert cqueue.get(other).status is JobStatus.RETRYABLE
    assert_invariants(url)


def _set_attempts(url: str, job_id: object, attempts: int) -> None:
    """Test set-up only: jump a running job's attempt counter."""
    engine, target = parse_url(url)
    if engine == "postgres":
        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute("UPDATE jobvisor_jobs SET attempts = %s WHERE id = %s", (attempts, job_id))
    else:
        lite = sqlite3.connect(target, timeout=30)
        with lite:
            lite.execute(
                "UPDATE jobvisor_jobs SET attempts = ? WHERE id = ?", (attempts, str(job_id))
            )
        lite.close()


def test_reap_with_the_database_clock(queue: Queue, url: str) -> None:
    queue.enqueue("t")
    queue.claim("w", lease=0.001)
    wait_until(lambda: queue.reap_expired() == 1, what="the short lease to expire")
    assert_invariants(url)


def test_reaper_honours_the_retry_policy_of_the_job_type(
    make_queue: MakeQueue, clock: Clock, url: str
) -> None:
    q = make_queue(
        clock=clock,
        retry={"slow": RetryPolicy(base=500, cap=500, jitter=0)},
        default_retry=RetryPolicy(base=7, cap=7, jitter=0),
    )
    slow, plain = q.enqueue("slow"), q.enqueue("plain")
    q.claim("w", limit=2, lease=1)
    clock.advance(2)
    assert q.reap_expired() == 2
    assert close_to(q.get(slow).run_at, clock() + dt.timedelta(seconds=500))
    assert close_to(q.get(plain).run_at, clock() + dt.timedelta(seconds=7))
    # An explicit policy replaces the default, not a type's own.
    q.enqueue("slow")
    q.enqueue("plain")
    clock.advance(1000)
    for job in q.claim("w", limit=4, lease=1):
        assert job.attempts in (1, 2)
    clock.advance(2)
    assert q.reap_expired(policy=RetryPolicy(base=60, cap=60, jitter=0)) == 4
    waits = sorted(round((q.get(i).run_at - clock()).total_seconds()) for i in (slow, plain))
    assert waits == [60, 500]  # attempt 2: slow doubles but is capped at 500
    assert_invariants(url)


def test_requeue_crashed_finds_a_workers_jobs_through_the_lease_index(
    queue: Queue, url: str
) -> None:
    """Migration 3 dropped the worker-id index (one index less to write on every
    claim): a dead worker's jobs are found among the running ones through the
    lease index (or the status index of migration 10, which holds the
    running ones together as well), never by reading the whole table."""
    queue.enqueue_many([{"job_type": "t"} for _ in range(2000)])
    done = queue.claim("busy", limit=1990)
    queue.complete_many(done)
    queue.claim("dead-worker", limit=5)
    engine, target = parse_url(url)
    if engine == "postgres":
        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute("ANALYZE jobvisor_jobs")
            indexes = [r[0] for r in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE tablename = 'jobvisor_jobs'")]  # fmt: skip
            plan = "\n".join(
                r[0] for r in conn.execute(
                    "EXPLAIN " + sql_postgres.JOB_REQUEUE_CRASHED,
                    {"worker_id": "dead-worker", "error": "x", "culprit": None, "now": None,
                     "crash_limit": CRASH_LIMIT, "alone": False},
                )
            )  # fmt: skip
    else:
        with sqlite3.connect(target) as conn:
            conn.execute("ANALYZE")
            indexes = [r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'index'"
                " AND tbl_name = 'jobvisor_jobs'")]  # fmt: skip
            plan = "\n".join(
                str(r[-1]) for r in conn.execute(
                    "EXPLAIN QUERY PLAN " + sql_sqlite.JOB_REQUEUE_CRASHED,
                    {"worker_id": "dead-worker", "error": "x", "culprit": None, "now": None,
                     "crash_limit": CRASH_LIMIT, "alone": False},
                )
            )  # fmt: skip
    assert "jobvisor_jobs_worker_idx" not in indexes
    running_only = ("jobvisor_jobs_lease_idx", "jobvisor_jobs_status_idx")
    assert any(index in plan for index in running_only), plan
    assert "Seq Scan" not in plan and "SCAN jobvisor_jobs\n" not in plan + "\n", plan
    assert queue.requeue_crashed("dead-worker") == 5
