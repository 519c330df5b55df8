"""Workflows on both engines: the hand-over from parents to children (results
included), the failure policies, retry, cancel, atomic insert, refused input
and cleanup of a workflow as a whole."""

from __future__ import annotations

import collections
import json
from typing import Any

import pytest

import jobvisor
from jobvisor import AsyncQueue, InvalidArgument, Job, JobContext, JobStatus, Queue
from jobvisor.queue.internal import service_ops
from jobvisor.queue.workflows import NodeSpec, WorkflowNotFound
from tests.support.aio import run_with
from tests.support.invariants import assert_invariants, query_all
from tests.support.queue import row_count, run_in_processes
from tests.support.wait import wait_until


def _claim_and_complete(q: Queue, result: Any = None) -> list[Job]:
    """Claim every claimable job and complete each with `{"from": node}`."""
    jobs = q.claim("w", limit=100)
    for job in jobs:
        q.complete(job, result={"from": job.job_type} if result is None else result)
    return jobs


def _claim_exactly(q: Queue, count: int) -> list[Job]:
    """Claim until `count` jobs are taken (a claim may skip a just-due job
    for a moment while claims are bounded on a loaded machine: see
    `ops.ClaimBounds`); a bounded poll, never a sleep."""
    jobs: list[Job] = []

    def enough() -> bool:
        jobs.extend(q.claim("w", limit=count - len(jobs)))
        return len(jobs) >= count

    wait_until(enough, what=f"{count} claimable jobs")
    return jobs


def _statuses(q: Queue, wid: Any) -> dict[str, JobStatus]:
    return {job.node: job.status for job in q.workflow(wid).jobs}


def _diamond() -> jobvisor.Workflow:
    wf = jobvisor.Workflow("diamond")
    a = wf.add("a", {"day": 1})
    b = wf.add("b", {"orders": a.result})
    c = wf.add("c", {"refunds": a.result})
    wf.add("d", {"both": [b.result, c.result], "n": 7})
    return wf


def test_a_diamond_runs_each_job_once_after_its_parents_with_their_results(
    queue: Queue, url: str
) -> None:
    wid = queue.enqueue_workflow(_diamond())
    status = queue.workflow(wid)
    assert status.name == "diamond"
    assert status.counts == {JobStatus.PENDING: 1, JobStatus.WAITING: 3}
    assert status.job("d").parents == ("b", "c")
    assert [j.job_type for j in _claim_and_complete(queue)] == ["a"]
    second = _claim_exactly(queue, 2)
    assert sorted(j.job_type for j in second) == ["b", "c"]
    for job in second:
        assert next(iter(JobContext(job, "w").payload.values())) == {"from": "a"}
        queue.complete(job, result={"from": job.job_type})
    (last,) = _claim_exactly(queue, 1)
    ctx = JobContext(last, "w")
    assert ctx.payload == {"both": [{"from": "b"}, {"from": "c"}], "n": 7}
    assert ctx.parent_results == {"b": {"from": "b"}, "c": {"from": "c"}}
    assert ctx.failed_parents == {}
    queue.complete(last, result=42)
    done = queue.workflow(wid)
    assert done.finished and done.counts == {JobStatus.COMPLETED: 4}
    assert done.job("d").result == 42 and all(j.attempts == 1 for j in done.jobs)
    assert_invariants(url)


def test_a_chain_of_100_runs_in_order_each_taking_the_one_before(queue: Queue, url: str) -> None:
    wf = jobvisor.Workflow("long")
    node = wf.add("step", {"n": 0})
    for n in range(1, 100):
        node = wf.add("step", {"n": n, "before": node.result})
    wid = queue.enqueue_workflow(wf)
    for n in range(100):
        (job,) = _claim_exactly(queue, 1)
        payload = JobContext(job, "w").payload
        assert payload["n"] == n
        assert n == 0 or payload["before"] == n - 1
        queue.complete(job, result=n)
    assert queue.claim("w") == []
    assert queue.workflow(wid).counts == {JobStatus.COMPLETED: 100}
    assert_invariants(url)


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
            assert q.complete_many(jobs, results={j.id: str(j.payload["i"]) for j in jobs}) == []
    return got


@pytest.mark.long
def test_a_fan_in_of_10000_parents_fires_its_child_once(queue: Queue, url: str) -> None:
    wf = jobvisor.Workflow("fan-in")
    parents = [wf.add("part", {"i": i}) for i in range(10_000)]
    wf.after(*parents).add("total", {"i": -1})
    wid = queue.enqueue_workflow(wf)
    taken = run_in_processes(_claim_all, [(url, f"w{n}", 50) for n in range(4)])
    counts = collections.Counter(t for got in taken for t in got)
    # A claimer may stop before the child is due; whoever is left takes it.
    counts.update(_claim_all(url, "last", 50))
    assert counts == {"part": 10_000, "total": 1}
    status = queue.workflow(wid)
    total = status.job("total")
    assert total.status is JobStatus.COMPLETED and total.attempts == 1
    (job,) = [j for j in status.jobs if j.node == "total"]
    assert queue.get(job.id).meta is None  # it took no result: none was copied
    assert_invariants(url)


def test_cancel_policy_cancels_the_children_and_their_descendants(queue: Queue, url: str) -> None:
    wf = jobvisor.Workflow("cancel")
    a = wf.add("a", None, max_attempts=1)
    b = wf.add("b", {"x": a.result})
    wf.add("c", {"x": b.result})
    other = wf.add("other", None)
    wid = queue.enqueue_workflow(wf)
    jobs = queue.claim("w", limit=10)
    for job in jobs:
        if job.job_type == "a":
            queue.fail(job, "boom")
        else:
            queue.complete(job)
    status = queue.workflow(wid)
    assert _statuses(queue, wid) == {
        "a": JobStatus.DEAD,
        "b": JobStatus.CANCELLED,
        "c": JobStatus.CANCELLED,
        other.key: JobStatus.COMPLETED,
    }
    b_error = status.job("b").last_error or ""
    assert "parent a" in b_error and "dead" in b_error
    assert "parent b" in (status.job("c").last_error or "")
    assert status.finished and queue.claim("w") == []
    assert_invariants(url)


def test_run_policy_runs_the_child_and_names_the_failed_parent(queue: Queue, url: str) -> None:
    wf = jobvisor.Workflow("run")
    a = wf.add("a", None, max_attempts=1)
    b = wf.add("b", None)
    wf.add("c", {"a": a.result, "b": b.result}, on_parent_failure="run")
    wid = queue.enqueue_workflow(wf)
    for job in queue.claim("w", limit=10):
        if job.job_type == "a":
            queue.fail(job, "boom")
        else:
            queue.complete(job, result="b-result")
    (child,) = queue.claim("w", limit=10)
    ctx = JobContext(child, "w")
    assert ctx.payload == {"a": None, "b": "b-result"}
    assert ctx.failed_parents == {"a": "dead"}
    queue.complete(child)
    assert _statuses(queue, wid)["c"] is JobStatus.COMPLETED
    assert_invariants(url)


def test_wait_policy_waits_for_the_parent_to_be_requeued_and_complete(
    queue: Queue, url: str
) -> None:
    wf = jobvisor.Workflow("wait")
    a = wf.add("a", None, max_attempts=1)
    wf.add("c", {"a": a.result}, on_parent_failure="wait")
    wid = queue.enqueue_workflow(wf)
    (job,) = queue.claim("w")
    queue.fail(job, "boom")
    assert _statuses(queue, wid) == {"a": JobStatus.DEAD, "c": JobStatus.WAITING}
    assert queue.claim("w") == []
    queue.dead.requeue(job.id)
    (again,) = queue.claim("w")
    queue.complete(again, result="late")
    (child,) = queue.claim("w")
    assert JobContext(child, "w").payload == {"a": "late"}
    queue.complete(child)
    assert queue.workflow(wid).counts == {JobStatus.COMPLETED: 2}
    assert_invariants(url)


def test_retry_requeues_the_failed_part_and_keeps_completed_results(queue: Queue, url: str) -> None:
    wf = jobvisor.Workflow("retry")
    a = wf.add("a", None)
    b = wf.add("b", None, max_attempts=1)
    c = wf.add("c", {"a": a.result, "b": b.result})
    wf.add("d", {"c": c.result})
    wid = queue.enqueue_workflow(wf)
    for job in queue.claim("w", limit=10):
        if job.job_type == "a":
            queue.complete(job, result="kept")
        else:
            queue.fail(job, "boom")
    assert queue.workflow(wid).counts == {
        JobStatus.COMPLETED: 1,
        JobStatus.DEAD: 1,
        JobStatus.CANCELLED: 2,
    }
    assert queue.retry_workflow(wid) == 3
    assert _statuses(queue, wid) == {
        "a": JobStatus.COMPLETED,
        "b": JobStatus.PENDING,
        "c": JobStatus.WAITING,
        "d": JobStatus.WAITING,
    }
    (b_job,) = queue.claim("w", limit=10)
    assert b_job.job_type == "b" and b_job.attempts == 1
    queue.complete(b_job, result="now")
    (c_job,) = queue.claim("w", limit=10)
    assert JobContext(c_job, "w").payload == {"a": "kept", "b": "now"}
    queue.complete(c_job)
    _claim_and_complete(queue)
    done = queue.workflow(wid)
    assert done.counts == {JobStatus.COMPLETED: 4}
    assert done.job("a").attempts == 1  # never ran again
    assert queue.retry_workflow(wid) == 0
    assert_invariants(url)


def _parent_died(queue: Queue, name: str) -> Any:
    """A workflow of a parent `a` (one attempt) and a child `c` that goes on
    after it fails (three attempts), enqueued, its parent dead; its id."""
    wf = jobvisor.Workflow(name)
    a = wf.add("a", None, max_attempts=1)
    wf.add("c", {"a": a.result}, on_parent_failure="run", max_attempts=3)
    wid = queue.enqueue_workflow(wf)
    (parent,) = queue.claim("w")
    queue.fail(parent, "boom")
    return wid


def _parent_then_child(queue: Queue, wid: Any) -> None:
    """After a retry: the parent runs again first, then the child, with the
    parent's new result and no failed parent."""
    (again,) = _claim_exactly(queue, 1)
    assert again.job_type == "a"  # the child waits for its parent's new run
    queue.complete(again, result="late")
    (child,) = _claim_exactly(queue, 1)
    assert JobContext(child, "w").payload == {"a": "late"}
    assert JobContext(child, "w").failed_parents == {}
    queue.complete(child)
    assert queue.workflow(wid).counts == {JobStatus.COMPLETED: 2}


def test_retry_holds_back_a_retryable_child_that_went_on_after_a_failed_parent(
    queue: Queue, url: str
) -> None:
    wid = _parent_died(queue, "retry-retryable")
    (child,) = _claim_exactly(queue, 1)
    queue.fail(child, "child failed")  # between attempts when the workflow is retried
    assert _statuses(queue, wid) == {"a": JobStatus.DEAD, "c": JobStatus.RETRYABLE}
    assert queue.retry_workflow(wid) == 2
    assert _statuses(queue, wid) == {"a": JobStatus.PENDING, "c": JobStatus.WAITING}
    _parent_then_child(queue, wid)
    assert_invariants(url)


@pytest.mark.parametrize("ending", ["fail", "snooze", "crash"])
def test_retry_lets_a_running_child_that_went_on_finish_its_attempt_or_wait(
    queue: Queue, url: str, ending: str
) -> None:
    wid = _parent_died(queue, "retry-running")
    (child,) = queue.claim("w2")  # went on after its parent died; still running
    assert queue.retry_workflow(wid) == 1
    assert _statuses(queue, wid) == {"a": JobStatus.PENDING, "c": JobStatus.RUNNING}
    if ending == "fail":
        assert queue.fail(child, "child failed") is JobStatus.WAITING
    elif ending == "snooze":
        queue.snooze(child, 0)
    else:
        queue.requeue_crashed("w2", error="killed")
    # Its next attempt waits for the parent's new run.
    assert _statuses(queue, wid) == {"a": JobStatus.PENDING, "c": JobStatus.WAITING}
    _parent_then_child(queue, wid)
    assert_invariants(url)


def test_retry_leaves_a_running_child_that_went_on_to_complete(queue: Queue, url: str) -> None:
    wf = jobvisor.Workflow("retry-running-completes")
    a = wf.add("a", None, max_attempts=1)
    wf.add("c", {"a": a.result}, on_parent_failure="run")
    wid = queue.enqueue_workflow(wf)
    (parent,) = queue.claim("w")
    queue.fail(parent, "boom")
    (child,) = queue.claim("w")
    assert queue.retry_workflow(wid) == 1
    queue.complete(child, result="went on")
    (again,) = _claim_exactly(queue, 1)
    queue.complete(again)
    assert queue.claim("w") == []
    assert queue.workflow(wid).counts == {JobStatus.COMPLETED: 2}
    assert_invariants(url)


def test_cancel_of_a_running_workflow_stops_everything_unfinished(queue: Queue, url: str) -> None:
    wf = jobvisor.Workflow("stop")
    a = wf.add("a", None)
    wf.add("b", {"a": a.result})
    done = wf.add("done", None)
    wid = queue.enqueue_workflow(wf)
    jobs = {j.job_type: j for j in queue.claim("w", limit=10)}
    queue.complete(jobs["done"])
    assert queue.cancel_workflow(wid, reason="not today") == 2
    assert _statuses(queue, wid) == {
        "a": JobStatus.RUNNING,
        "b": JobStatus.CANCELLED,
        done.key: JobStatus.COMPLETED,
    }
    assert service_ops(queue).renew_held([jobs["a"]]).cancel_requested == {jobs["a"].id}
    queue.complete(jobs["a"])  # its worker settles it: cancelled, as requested
    status = queue.workflow(wid)
    assert status.job("a").status is JobStatus.CANCELLED and status.finished
    assert queue.claim("w") == []
    assert_invariants(url)


def test_a_workflow_goes_in_with_the_callers_transaction_or_not_at_all(
    queue: Queue, url: str
) -> None:
    with pytest.raises(RuntimeError), queue.transaction() as conn:
        queue.enqueue_workflow(_diamond(), conn=conn)
        raise RuntimeError("the caller rolls back")
    assert row_count(url) == 0
    with queue.transaction() as conn:
        wid = queue.enqueue_workflow(_diamond(), conn=conn)
    assert queue.workflow(wid).counts == {JobStatus.PENDING: 1, JobStatus.WAITING: 3}


def test_the_async_queue_builds_reads_and_retries_workflows(aqueue: AsyncQueue) -> None:
    async def body(q: AsyncQueue) -> None:
        wf = jobvisor.Workflow("async")
        a = wf.add("a", None, max_attempts=1)
        wf.add("b", {"a": a.result})
        wid = await q.enqueue_workflow(wf)
        (job,) = await q.claim("w")
        await q.fail(job, "boom")
        assert (await q.workflow(wid)).counts == {JobStatus.DEAD: 1, JobStatus.CANCELLED: 1}
        assert await q.retry_workflow(wid) == 2
        assert await q.cancel_workflow(wid) == 2

    run_with(aqueue, body)


class _Raw:
    """A workflow made by hand, past the builder's checks."""

    def __init__(self, name: Any, specs: list[Any]) -> None:
        self.name, self.specs = name, specs


BAD: dict[str, tuple[Any, str]] = {
    "cycle": (
        _Raw(
            "w",
            [NodeSpec("a", {"job_type": "a"}, ((1, "cancel"),)), NodeSpec("b", {"job_type": "b"})],
        ),
        "an earlier node",
    ),
    "self": (_Raw("w", [NodeSpec("a", {"job_type": "a"}, ((0, "cancel"),))]), "an earlier node"),
    "policy": (
        _Raw(
            "w",
            [NodeSpec("a", {"job_type": "a"}), NodeSpec("b", {"job_type": "b"}, ((0, "skip"),))],
        ),
        "on_parent_failure='skip'",
    ),
    "empty": (_Raw("w", []), "at least one job"),
    "name": (_Raw("", [NodeSpec("a", {"job_type": "a"})]), "workflow name"),
    "key twice": (
        _Raw("w", [NodeSpec("a", {"job_type": "a"}), NodeSpec("a", {"job_type": "b"})]),
        "twice",
    ),
    "key": (_Raw("w", [NodeSpec('a"b', {"job_type": "a"})]), "node key"),
    "payload": (_Raw("w", [NodeSpec("a", {"job_type": "a", "payload": {1, 2}})]), "node 'a'"),
    "job type": (_Raw("w", [NodeSpec("a", {"job_type": ""})]), "node 'a'"),
    "dedupe": (_Raw("w", [NodeSpec("a", {"job_type": "a", "dedupe_key": "k"})]), "dedupe_key='k'"),
    "stray placeholder": (
        _Raw("w", [NodeSpec("a", {"job_type": "a", "payload": {"$jobvisor.result": "z"}})]),
        "'z'",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_workflows_are_refused_and_nothing_is_written(
    queue: Queue, url: str, case: str
) -> None:
    workflow, message = BAD[case]
    with pytest.raises(InvalidArgument, match=message.replace("(", r"\(").replace("'", "'")):
        queue.enqueue_workflow(workflow)
    assert row_count(url) == 0
    ((count,),) = query_all(url, ["SELECT count(*) FROM jobvisor_workflows"])[0]
    assert count == 0


def test_the_builder_refuses_nodes_of_another_workflow_and_bad_policies() -> None:
    one, two = jobvisor.Workflow("one"), jobvisor.Workflow("two")
    a = one.add("a")
    with pytest.raises(InvalidArgument, match="added to this workflow"):
        two.add("b", None, after=[a])
    with pytest.raises(InvalidArgument, match="not in this workflow"):
        two.add("b", {"x": a.result})
    with pytest.raises(InvalidArgument, match="on_parent_failure='never'"):
        one.add("b", None, after=[a], on_parent_failure="never")
    with pytest.raises(InvalidArgument, match="workflow name"):
        jobvisor.Workflow(" ")
    assert len(two) == 0 and len(one) == 1


def test_an_unknown_workflow_is_not_found(queue: Queue) -> None:
    missing = "01a242d1-0bb6-7111-9ca2-e4bcb145433b"
    for call in (queue.workflow, queue.cancel_workflow, queue.retry_workflow):
        with pytest.raises(WorkflowNotFound, match=missing):
            call(missing)
    with pytest.raises(InvalidArgument, match="expected a UUID"):
        queue.workflow("nope")


def test_cleanup_removes_a_workflow_whole_once_every_job_is_past_retention(
    queue: Queue, url: str
) -> None:
    wf = jobvisor.Workflow("clean")
    a = wf.add("a", None)
    wf.add("b", {"a": a.result})
    wid = queue.enqueue_workflow(wf)
    _claim_and_complete(queue)
    assert queue.cleanup(0) == 0  # b still needs a's result: a stays
    assert _statuses(queue, wid)["a"] is JobStatus.COMPLETED
    _claim_and_complete(queue)
    assert queue.cleanup({"completed": None}) == 0
    assert queue.cleanup(0) == 2
    with pytest.raises(WorkflowNotFound):
        queue.workflow(wid)
    assert row_count(url) == 0
    ((edges,),) = query_all(url, ["SELECT count(*) FROM jobvisor_workflow_edges"])[0]
    assert edges == 0


def test_chain_and_group_are_workflows(queue: Queue) -> None:
    wid = queue.enqueue_workflow(jobvisor.chain(("first", {"n": 1}), "second", "third"))
    status = queue.workflow(wid)
    assert [j.node for j in status.jobs] == ["first", "second", "third"]
    assert status.job("third").parents == ("second",)
    (job,) = queue.claim("w")
    queue.complete(job, result=1)
    (job,) = queue.claim("w")
    assert JobContext(job, "w").parent_results == {"first": 1}
    assert JobContext(job, "w").payload == {"previous": 1}
    gid = queue.enqueue_workflow(jobvisor.group("x", "x", ("y", {"a": 1})))
    assert [j.node for j in queue.workflow(gid).jobs] == ["x", "x-2", "y"]
    assert queue.workflow(gid).counts == {JobStatus.PENDING: 3}


def test_plain_jobs_are_untouched_by_the_hand_over(queue: Queue, url: str) -> None:
    jid = queue.enqueue("plain", {"$jobvisor.result": "x"})
    (job,) = queue.claim("w")
    assert JobContext(job, "w").payload == {"$jobvisor.result": "x"}
    queue.complete(job, result=1)
    assert queue.get(jid).meta is None
    assert json.dumps(queue.get(jid).payload) == '{"$jobvisor.result": "x"}'
