"""Workflows under random graphs and random endings, on both engines.

Hypothesis draws a DAG (each node's parents among the nodes before it, each
edge with a failure policy), then a sequence of steps on whatever is
claimable: complete it, fail it, crash its worker, or cancel a job. Whatever
the order, every claim takes a job whose parents have all finished, each
failed one under a "run" edge; no job completes twice; and once nothing is
left to claim, every job is finished except those a "wait" edge holds, and
each cancelled job was cancelled by a parent's "cancel" edge or by us."""

from __future__ import annotations

import collections
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jobvisor
from jobvisor import JobStatus, Queue, RetryPolicy
from jobvisor.queue.workflows import NodeSpec
from tests.support.invariants import assert_invariants

POLICIES = ["cancel", "run", "wait"]
FAILED = {JobStatus.DEAD, JobStatus.CANCELLED}
STEPS = ["complete", "complete", "complete", "fail", "crash", "cancel"]


@st.composite
def graphs(draw: st.DrawFn) -> list[list[tuple[int, str]]]:
    """Per node, its (parent index, policy) pairs."""
    size = draw(st.integers(min_value=1, max_value=9))
    nodes = []
    for index in range(size):
        parents = draw(st.sets(st.integers(0, index - 1), max_size=3)) if index else set()
        nodes.append([(p, draw(st.sampled_from(POLICIES))) for p in sorted(parents)])
    return nodes


class _Graph:
    """A workflow with one policy per edge, as `NodeSpec`s."""

    name = "random"

    def __init__(self, specs: list[NodeSpec]) -> None:
        self.specs = specs


@pytest.fixture
def fast_queue(url: str) -> Iterator[Queue]:
    q = jobvisor.connect(url, default_retry=RetryPolicy(base=0.0, cap=0.0, jitter=0.0))
    q.migrate()
    try:
        yield q
    finally:
        q.close()


def _clear(q: Queue) -> None:
    for job in q.claim("sweeper", limit=1000):
        q.complete(job)
    q.cleanup(0)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(graph=graphs(), steps=st.lists(st.sampled_from(STEPS), min_size=40, max_size=40),
       picks=st.lists(st.integers(0, 50), min_size=40, max_size=40))  # fmt: skip
def test_every_child_runs_once_after_its_parents_under_their_policies(
    fast_queue: Queue, url: str, graph: list[list[tuple[int, str]]], steps: list[str],
    picks: list[int],
) -> None:  # fmt: skip
    q = fast_queue
    specs = [
        NodeSpec(f"n{index}", {"job_type": f"n{index}", "max_attempts": 2}, tuple(parents))
        for index, parents in enumerate(graph)
    ]
    wid = q.enqueue_workflow(_Graph(specs))
    ids = {job.id: int(job.node[1:]) for job in q.workflow(wid).jobs}
    edges = {i: dict(parents) for i, parents in enumerate(graph)}
    cancelled_by_us: set[int] = set()
    completions: collections.Counter[int] = collections.Counter()

    def node_status() -> dict[int, JobStatus]:
        return {ids[job.id]: job.status for job in q.workflow(wid).jobs}

    for step, pick in zip(steps, picks, strict=True):
        if step == "cancel":
            jobs = q.workflow(wid).jobs
            target = jobs[pick % len(jobs)]
            if not target.status.terminal and target.status is not JobStatus.RUNNING:
                q.cancel(target.id)
                cancelled_by_us.add(ids[target.id])
            continue
        claimed = q.claim("w", limit=1)
        if not claimed:
            continue
        (job,) = claimed
        node = ids[job.id]
        now = node_status()
        for parent, policy in edges[node].items():
            assert now[parent].terminal, (node, parent, now)
            if now[parent] in FAILED:
                assert policy == "run", (node, parent, policy, now)
        if step == "complete":
            q.complete(job, result=node)
            completions[node] += 1
        elif step == "fail":
            q.fail(job, "boom")
        else:
            q.requeue_crashed("w", culprit=job.id, error="killed")
    # Drain: whatever is still claimable completes.
    # (A bounded claim may pass a just-due job by for a moment: drain by status.)
    due = {JobStatus.PENDING, JobStatus.RETRYABLE}
    while due & set(node_status().values()):
        for job in q.claim("w", limit=10):
            q.complete(job, result=ids[job.id])
            completions[ids[job.id]] += 1
    assert all(count == 1 for count in completions.values()), completions
    final = node_status()
    for node, state in final.items():
        parents = edges[node]
        if state is JobStatus.WAITING:
            # Held by a parent that is itself held, or failed under "wait".
            assert any(
                final[p] is JobStatus.WAITING or (final[p] in FAILED and policy == "wait")
                for p, policy in parents.items()
            ), (node, final)
        elif state is JobStatus.CANCELLED and node not in cancelled_by_us:
            assert any(
                final[p] in FAILED and policy == "cancel" for p, policy in parents.items()
            ), (node, final)
        else:
            assert state.terminal, (node, final)
        if state is JobStatus.COMPLETED:
            assert all(final[p] is JobStatus.COMPLETED or policy == "run"
                       for p, policy in parents.items()), (node, final)  # fmt: skip
    assert_invariants(url)
    q.cancel_workflow(wid)
    _clear(q)
