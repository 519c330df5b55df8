"""The workflow hand-over under concurrency, on both engines: completions of
parents shared by many children, racing in several processes, hand each child
over exactly once; two transactions ending a child's last two parents at
once make it pending once (PostgreSQL); a child is due from its last parent's
ending; the queues that gained a pending child are notified once each."""

from __future__ import annotations

import collections
import datetime as dt
import threading
from typing import Any

import psycopg
import pytest

import jobvisor
from jobvisor import Job, JobStatus, Queue
from jobvisor.queue.notices import Notice
from tests.support.invariants import assert_invariants, query_all
from tests.support.queue import run_in_processes
from tests.support.wait import wait_until


def _claim_all(url: str, worker_id: str, batch: int) -> list[str]:
    """Claim and complete until nothing is claimable; the job types taken."""
    got: list[str] = []
    with jobvisor.connect(url) as q:
        idle = 0
        while idle < 3:
            jobs = q.claim(worker_id, limit=batch)
            if not jobs:
                idle += 1
                continue
            idle = 0
            got.extend(j.job_type for j in jobs)
            assert q.complete_many(jobs) == []
    return got


def _open_edges_and_counts(url: str) -> tuple[int, int, int]:
    """Unsettled edges, and the lowest and highest count of open parents."""
    (edges, counts) = query_all(
        url,
        [
            "SELECT count(*) FROM jobvisor_workflow_edges WHERE NOT settled",
            "SELECT min(waiting_on), max(waiting_on) FROM jobvisor_jobs",
        ],
    )
    return int(edges[0][0]), int(counts[0][0]), int(counts[0][1])


def test_racing_batches_of_shared_parents_hand_every_child_over_once(
    queue: Queue, url: str
) -> None:
    # 300 parents, 20 children of all of them: every batch of completions
    # hands over to every child, in four processes at once.
    wf = jobvisor.Workflow("mesh")
    parents = [wf.add("part", {"i": i}) for i in range(300)]
    for n in range(20):
        wf.after(*parents).add("child", {"n": n})
    wid = queue.enqueue_workflow(wf)
    taken = run_in_processes(_claim_all, [(url, f"w{n}", 25) for n in range(4)])
    counts = collections.Counter(t for got in taken for t in got)
    # A claimer may stop before the children are due; whoever is left takes them.
    counts.update(_claim_all(url, "last", 25))
    assert counts == {"part": 300, "child": 20}
    status = queue.workflow(wid)
    assert status.counts == {JobStatus.COMPLETED: 320}
    assert all(job.attempts == 1 for job in status.jobs)
    assert _open_edges_and_counts(url) == (0, 0, 0)
    assert_invariants(url)


def _blocked_on_a_lock(url: str, pid: int) -> bool:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
        ).fetchone()
    return row is not None and row[0] == "Lock"


def _end(conn: psycopg.Connection[Any], job: Job) -> None:
    conn.execute(
        "UPDATE jobvisor_jobs SET status = 'completed', claim_token = NULL,"
        " lease_expires_at = NULL, finished_at = now() WHERE id = %s",
        (job.id,),
    )


def test_two_transactions_ending_the_last_two_parents_make_the_child_pending_once(
    pg_url: str,
) -> None:
    with jobvisor.connect(pg_url) as q:
        q.migrate()
        wf = jobvisor.Workflow("pair")
        a, b = wf.add("a"), wf.add("b")
        wf.after(a, b).add("child")
        wid = q.enqueue_workflow(wf)
        jobs = {j.job_type: j for j in q.claim("w", limit=2)}
        with (
            psycopg.connect(pg_url) as first,
            psycopg.connect(pg_url) as second,
        ):
            _end(first, jobs["a"])  # holds the child's row until it commits
            pid = second.info.backend_pid
            racer = threading.Thread(target=_end, args=(second, jobs["b"]))
            racer.start()
            wait_until(lambda: _blocked_on_a_lock(pg_url, pid), what="the second hand-over waits")
            first.commit()
            racer.join()
            second.commit()
        assert q.workflow(wid).counts == {JobStatus.COMPLETED: 2, JobStatus.PENDING: 1}
        (child,) = q.claim("w")
        assert child.job_type == "child"
        q.complete(child)
        assert q.workflow(wid).counts == {JobStatus.COMPLETED: 3}
        assert _open_edges_and_counts(pg_url) == (0, 0, 0)
        assert_invariants(pg_url)


def test_a_child_is_due_from_its_last_parents_ending_unless_due_later(
    queue: Queue, url: str
) -> None:
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=1)
    wf = jobvisor.Workflow("due")
    a = wf.add("a")
    wf.add("soon", after=[a])
    wf.add("late", after=[a], run_at=later)
    wid = queue.enqueue_workflow(wf)
    enqueued = queue.get(queue.workflow(wid).job("soon").id)
    (parent,) = queue.claim("w")
    queue.complete(parent)
    ended = queue.get(parent.id).finished_at
    assert ended is not None and enqueued.run_at <= ended
    jobs = {job.node: queue.get(job.id) for job in queue.workflow(wid).jobs}
    assert jobs["soon"].status is JobStatus.PENDING and jobs["soon"].run_at == ended
    assert jobs["late"].status is JobStatus.PENDING
    assert jobs["late"].run_at.timestamp() == pytest.approx(later.timestamp(), abs=1e-3)
    assert [j.job_type for j in queue.claim("w", limit=5)] == ["soon"]
    assert_invariants(url)


def test_each_queue_that_gained_a_pending_child_is_notified_once(pg_url: str) -> None:
    with (
        jobvisor.connect(pg_url) as q,
        psycopg.connect(pg_url, autocommit=True) as listener,
    ):
        q.migrate()
        wf = jobvisor.Workflow("spread")
        a, b = wf.add("a"), wf.add("b")
        for n in range(3):
            wf.add("x", {"n": n}, after=[a], queue="one")
        wf.add("y", after=[a], queue="two")
        wf.add("z", after=[a, b], queue="three")  # still waits on b
        q.enqueue_workflow(wf)
        jobs = {j.job_type: j for j in q.claim("w", limit=2)}
        listener.execute("LISTEN jobvisor")
        q.complete(jobs["a"])
        heard = [Notice.parse(n.payload) for n in listener.notifies(timeout=0.5, stop_after=None)]
        assert sorted((n.kind, n.queue) for n in heard) == [("job", "one"), ("job", "two")]
