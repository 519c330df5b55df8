"""Workflow jobs under flow control and retention, on both engines: once a
child is pending it is claimed as any job, so a type or queue limit counts
it with plain jobs, a paused queue holds it, priorities order it among plain
jobs; a node cannot take a unique key; and cleanup takes a workflow whole
only once its last job is past its status's retention."""

from __future__ import annotations

import collections
from typing import Any

import pytest

import jobvisor
from jobvisor import InvalidArgument, Job, JobStatus, Queue
from jobvisor.queue.model import Unique
from jobvisor.queue.workflows import WorkflowNotFound
from tests.support.invariants import assert_invariants, query_all
from tests.support.queue import Clock, row_count


def _release_root(q: Queue) -> None:
    """Claim and complete the one pending job: the root of a fan-out."""
    (root,) = q.claim("w", job_types=["root"])
    q.complete(root, result=1)


def _fan_out(name: str, children: list[dict[str, Any]]) -> jobvisor.Workflow:
    wf = jobvisor.Workflow(name)
    root = wf.add("root")
    for child in children:
        options = dict(child)
        job_type = str(options.pop("job_type"))
        wf.add(job_type, {"root": root.result}, **options)
    return wf


def _types(jobs: list[Job]) -> dict[str, int]:
    return dict(collections.Counter(j.job_type for j in jobs))


def test_a_type_limit_counts_workflow_jobs_with_plain_ones(queue: Queue, url: str) -> None:
    wid = queue.enqueue_workflow(_fan_out("capped", [{"job_type": "report"}] * 4))
    _release_root(queue)
    plain = queue.enqueue("report")
    queue.set_limit(job_type="report", concurrency=3)
    first = queue.claim("w", limit=50)
    assert _types(first) == {"report": 3}
    assert queue.claim("w", limit=50) == []
    for job in first:
        queue.complete(job)
    second = queue.claim("w", limit=50)
    assert _types(second) == {"report": 2}
    children = {j.id for j in queue.workflow(wid).jobs if j.node != "root"}
    assert {j.id for j in first + second} == children | {plain}
    assert_invariants(url)


def test_a_queue_limit_holds_a_child_made_pending_in_its_queue(queue: Queue) -> None:
    queue.enqueue_workflow(_fan_out("slow", [{"job_type": "child", "queue": "slow"}] * 3))
    queue.set_limit(queue="slow", concurrency=1)
    _release_root(queue)
    (one,) = queue.claim("w", limit=50, queues=["slow"])
    assert queue.claim("w", limit=50, queues=["slow"]) == []
    queue.complete(one)
    assert len(queue.claim("w", limit=50, queues=["slow"])) == 1


def test_a_paused_queue_holds_a_child_until_it_is_resumed(queue: Queue, url: str) -> None:
    wid = queue.enqueue_workflow(_fan_out("paused", [{"job_type": "mail", "queue": "mail"}]))
    queue.pause("mail")
    _release_root(queue)
    assert queue.workflow(wid).job("mail").status is JobStatus.PENDING  # handed over
    assert queue.claim("w", limit=50, queues=["mail", "default"]) == []  # but not claimed
    queue.resume("mail")
    (child,) = queue.claim("w", limit=50, queues=["mail"])
    assert child.job_type == "mail" and child.meta == {"parents": {"root": 1}}
    queue.complete(child)
    assert queue.workflow(wid).finished
    assert_invariants(url)


def test_priorities_order_workflow_children_among_plain_jobs(queue: Queue) -> None:
    wf = _fan_out(
        "ordered",
        [
            {"job_type": "low", "priority": 1},
            {"job_type": "high", "priority": 9},
            {"job_type": "mid", "priority": 5},
        ],
    )
    queue.enqueue_workflow(wf)
    _release_root(queue)
    queue.enqueue("plain", priority=7)
    claimed = queue.claim("w", limit=10)  # in claim order
    assert [j.job_type for j in claimed] == ["high", "plain", "mid", "low"]


def test_a_node_with_a_unique_key_is_refused_and_nothing_is_written(queue: Queue, url: str) -> None:
    wf = jobvisor.Workflow("unique")
    a = wf.add("a")
    wf.add("b", {"a": a.result}, unique=Unique(key="nightly", period=60))
    with pytest.raises(InvalidArgument, match=r"unique=.*a workflow job takes no unique"):
        queue.enqueue_workflow(wf)
    assert row_count(url) == 0
    ((count,),) = query_all(url, ["SELECT count(*) FROM jobvisor_workflows"])[0]
    assert count == 0


def test_retention_takes_a_workflow_only_once_its_last_job_is_past_it(
    cqueue: Queue, clock: Clock, url: str
) -> None:
    wf = jobvisor.Workflow("kept")
    a = wf.add("a")
    wf.add("b", {"a": a.result}, max_attempts=1)
    wid = cqueue.enqueue_workflow(wf)
    plain = cqueue.enqueue("plain")
    while jobs := cqueue.claim("w", job_types=["a", "plain"]):
        for job in jobs:
            cqueue.complete(job)
    clock.advance(3600)
    assert cqueue.cleanup(60) == 1  # the plain job; a is long done, but b has not run
    assert cqueue.workflow(wid).job("a").status is JobStatus.COMPLETED
    (b,) = cqueue.claim("w")
    cqueue.fail(b, "boom")
    clock.advance(30)
    assert cqueue.cleanup(60) == 0  # b ended 30 s ago
    clock.advance(60)
    assert cqueue.cleanup({"completed": 60, "dead": None}) == 0  # dead ones are kept
    assert len(cqueue.workflow(wid).jobs) == 2
    assert cqueue.cleanup(60) == 2
    with pytest.raises(WorkflowNotFound):
        cqueue.workflow(wid)
    assert row_count(url) == 0
    with pytest.raises(LookupError):
        cqueue.get(plain)
