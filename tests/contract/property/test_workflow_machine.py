"""Workflows as a state machine, on both engines: hypothesis draws a DAG
(each node's parents among the nodes before it, each edge with a failure
policy), then interleaves claims by two workers with completions, failures,
crashes (a worker's death through `requeue_crashed`, or every lease expired
and reaped on a moved clock), cancels and workflow retries.

After every step: what runs is exactly what the model's workers hold
(nothing stuck running), no node completed twice, and every job that may
run (pending or running) has all its parents finished, each failed one
under a "run" edge. At each claim the same holds of the claimed job. At the
end the rest is drained: every job is finished except those a "wait" edge
holds, and each cancelled one was cancelled by us or by a "cancel" edge."""

from __future__ import annotations

import collections
import datetime as dt
import itertools
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import jobvisor
from jobvisor import Job, JobStatus, Queue, RetryPolicy
from jobvisor.queue.workflows import NodeSpec
from tests.support.invariants import assert_invariants

POLICIES = ["cancel", "run", "wait"]
FAILED = {JobStatus.DEAD, JobStatus.CANCELLED}
MAY_RUN = {JobStatus.PENDING, JobStatus.RETRYABLE, JobStatus.RUNNING}
WORKERS = ["w1", "w2"]
LEASE = 30.0
EPOCH = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)

SETTINGS = settings(
    max_examples=20,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

Graph = list[dict[int, str]]


@st.composite
def graphs(draw: st.DrawFn) -> Graph:
    """Per node, its parents (index -> policy)."""
    size = draw(st.integers(min_value=1, max_value=8))
    nodes: Graph = []
    for index in range(size):
        parents = draw(st.sets(st.integers(0, index - 1), max_size=3)) if index else set()
        nodes.append({p: draw(st.sampled_from(POLICIES)) for p in sorted(parents)})
    return nodes


class _Spec:
    """A workflow as `enqueue_workflow` takes it."""

    name = "machine"

    def __init__(self, specs: list[NodeSpec]) -> None:
        self.specs = specs


class Clock:
    def __init__(self) -> None:
        self.seconds = 0.0

    def __call__(self) -> dt.datetime:
        return EPOCH + dt.timedelta(seconds=self.seconds)


@pytest.fixture
def clocked(url: str) -> Iterator[tuple[Queue, Clock]]:
    clock = Clock()
    q = jobvisor.connect(
        url, clock=clock, lease=LEASE, default_retry=RetryPolicy(base=0.0, cap=0.0, jitter=0.0)
    )
    q.migrate()
    try:
        yield q, clock
    finally:
        q.close()


def test_workflows_under_random_interleavings(clocked: tuple[Queue, Clock], url: str) -> None:
    q, clock = clocked
    examples = itertools.count()

    class WorkflowMachine(RuleBasedStateMachine):
        """One workflow per example, on a queue of its own."""

        @initialize(graph=graphs())
        def start(self, graph: Graph) -> None:
            self.queue = f"m{next(examples)}"
            self.graph = graph
            specs = [
                NodeSpec(f"n{i}", {"job_type": "node", "queue": self.queue, "max_attempts": 2},
                         tuple(parents.items()))
                for i, parents in enumerate(graph)
            ]  # fmt: skip
            self.wid = q.enqueue_workflow(_Spec(specs))
            self.node_of = {job.id: int(job.node[1:]) for job in q.workflow(self.wid).jobs}
            self.held: dict[int, tuple[Job, str]] = {}
            self.completions: collections.Counter[int] = collections.Counter()
            self.cancelled_by_us: set[int] = set()
            # Nodes running on at a retry after a failed parent (under "run"):
            # a retry leaves a running job alone, so they may outrun that parent.
            self.went_on: set[int] = set()

        def statuses(self) -> dict[int, JobStatus]:
            return {self.node_of[job.id]: job.status for job in q.workflow(self.wid).jobs}

        def check_parents(self, node: int, now: dict[int, JobStatus]) -> None:
            for parent, policy in self.graph[node].items():
                assert now[parent].terminal, (node, parent, now)
                if now[parent] in FAILED:
                    assert policy == "run", (node, parent, policy, now)

        @rule(worker=st.sampled_from(WORKERS))
        def claim(self, worker: str) -> None:
            claimed = q.claim(worker, queues=[self.queue], limit=1)
            if not claimed:
                return
            (job,) = claimed
            node = self.node_of[job.id]
            assert node not in self.held and not self.completions[node], node
            self.check_parents(node, self.statuses())
            self.held[node] = (job, worker)

        def _take(self, pick: int) -> tuple[int, Job]:
            node = sorted(self.held)[pick % len(self.held)]
            job, _ = self.held.pop(node)
            return node, job

        @precondition(lambda self: self.held)
        @rule(pick=st.integers(0, 10))
        def complete(self, pick: int) -> None:
            node, job = self._take(pick)
            q.complete(job, result=node)
            self.completions[node] += 1

        @precondition(lambda self: self.held)
        @rule(pick=st.integers(0, 10))
        def fail(self, pick: int) -> None:
            _, job = self._take(pick)
            q.fail(job, "boom")

        @precondition(lambda self: self.held)
        @rule(worker=st.sampled_from(WORKERS))
        def crash(self, worker: str) -> None:
            """The worker's process died: the supervisor requeues what it held."""
            q.requeue_crashed(worker, error="killed")
            self.held = {n: held for n, held in self.held.items() if held[1] != worker}

        @precondition(lambda self: self.held)
        @rule()
        def leases_expire(self) -> None:
            """Every worker vanished unseen: their leases run out and are reaped."""
            clock.seconds += LEASE + 1
            q.reap_expired()
            self.held.clear()

        @rule(pick=st.integers(0, 10))
        def cancel(self, pick: int) -> None:
            jobs = q.workflow(self.wid).jobs
            target = jobs[pick % len(jobs)]
            if not target.status.terminal and target.status is not JobStatus.RUNNING:
                q.cancel(target.id)
                self.cancelled_by_us.add(self.node_of[target.id])

        @rule()
        def retry(self) -> None:
            now = self.statuses()
            self.went_on |= {
                node for node in self.held if any(now[p] in FAILED for p in self.graph[node])
            }
            q.retry_workflow(self.wid)

        @invariant()
        def nothing_runs_unheld_and_nothing_runs_early(self) -> None:
            if not hasattr(self, "wid"):
                return
            now = self.statuses()
            running = {node for node, status in now.items() if status is JobStatus.RUNNING}
            assert running == set(self.held), (running, self.held)
            assert all(count == 1 for count in self.completions.values()), self.completions
            for node, status in now.items():
                if status in MAY_RUN and node not in self.went_on:
                    self.check_parents(node, now)

        def teardown(self) -> None:
            if not hasattr(self, "wid"):
                return
            for node, (job, _) in list(self.held.items()):
                q.complete(job, result=node)
                self.completions[node] += 1
            due = {JobStatus.PENDING, JobStatus.RETRYABLE}
            while due & set(self.statuses().values()):
                for job in q.claim("drain", queues=[self.queue], limit=10):
                    self.check_parents(self.node_of[job.id], self.statuses())
                    q.complete(job, result=self.node_of[job.id])
                    self.completions[self.node_of[job.id]] += 1
            assert all(count == 1 for count in self.completions.values()), self.completions
            final = self.statuses()
            for node, state in final.items():
                parents = self.graph[node]
                if state is JobStatus.WAITING:
                    assert any(
                        final[p] is JobStatus.WAITING or (final[p] in FAILED and policy == "wait")
                        for p, policy in parents.items()
                    ), (node, final)
                elif state is JobStatus.CANCELLED and node not in self.cancelled_by_us:
                    assert any(
                        final[p] in FAILED and policy == "cancel" for p, policy in parents.items()
                    ), (node, final)
                else:
                    assert state.terminal, (node, final)
            q.cancel_workflow(self.wid)

    run_state_machine_as_test(WorkflowMachine, settings=SETTINGS)
    assert_invariants(url)
