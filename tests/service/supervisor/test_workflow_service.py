"""Workflows of every shape through a real `jobvisor run`, on both engines:
a fan-out and fan-in of 10,000, a chain of 100, each failure policy, a retry
that keeps what completed, a cancel that stops the running node, and the
supervisor killed with SIGKILL in the middle of a fan-in. Every run of a
node is noted in a file, so "the child fires once" is counted, not assumed."""

from __future__ import annotations

import os
import signal
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

import jobvisor
from jobvisor import JobStatus, Queue
from tests.service.supervisor.workflow_app import counted, flaky, gather, sleeper, step
from tests.support.invariants import assert_invariants
from tests.support.service import Service, any_alive, births
from tests.support.wait import wait_until

APP = {"JOBVISOR_APP": "tests.service.supervisor.workflow_app:registry"}


def _finished(queue: Queue, wid: uuid.UUID) -> bool:
    return queue.workflow(wid).finished


def _runs(log: Path) -> Counter[str]:
    return Counter(log.read_text().splitlines()) if log.exists() else Counter()


def _sink_ran_last(log: Path) -> bool:
    """Whether the fan-in's one run came after every leaf noted its run."""
    lines = log.read_text().splitlines()
    return lines.count("sink") == 1 and lines[-1] == "sink"


def _fan(wf: jobvisor.Workflow, width: int, log: Path, ms: int = 0) -> None:
    """root -> `width` leaves -> one sink that notes its run."""
    root = wf.add("leaf", {"log": str(log)})
    leaves = [wf.add("leaf", {"log": str(log), "ms": ms}, after=[root]) for _ in range(width)]
    wf.after(*leaves).add("sink", {"log": str(log)})


@pytest.mark.long
@pytest.mark.timeout(600)
def test_a_fan_out_and_in_of_ten_thousand_fires_the_child_once(
    queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    log = tmp_path / "runs"
    wf = jobvisor.Workflow("wide")
    _fan(wf, 10_000, log)
    wid = queue.enqueue_workflow(wf)
    settings = {**APP, "JOBVISOR_CONCURRENCY": "50"}
    service = start_service(queue.url, tmp_path, settings)
    wait_until(lambda: _finished(queue, wid), timeout=480, what="10,002 jobs finished")
    status = queue.workflow(wid)
    assert status.counts == {JobStatus.COMPLETED: 10_002}
    # Each leaf ran once, the sink once and after every leaf; it took no result.
    assert _runs(log) == {"leaf": 10_001, "sink": 1}
    assert _sink_ran_last(log)
    assert status.jobs[-1].result == 0
    assert service.stop() == 0
    assert_invariants(queue.url)


def test_a_chain_of_a_hundred_runs_in_order_each_step_once(
    queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    log = tmp_path / "runs"
    wf = jobvisor.Workflow("chain")
    previous = wf.add(step, 0, log=str(log))
    for _ in range(99):
        previous = wf.add(step, previous.result, log=str(log))
    wid = queue.enqueue_workflow(wf)
    service = start_service(queue.url, tmp_path, APP)
    wait_until(lambda: _finished(queue, wid), timeout=120, what="the chain finished")
    status = queue.workflow(wid)
    assert status.counts == {JobStatus.COMPLETED: 100}
    assert status.jobs[-1].result == 100
    assert log.read_text().splitlines() == [str(n) for n in range(100)]  # in order, once each
    assert service.stop() == 0
    assert_invariants(queue.url)


def test_each_failure_policy_end_to_end_and_a_retry_releases_the_waiting_child(
    queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    log, fixed = tmp_path / "runs", tmp_path / "fixed"
    wf = jobvisor.Workflow("policies")
    bad = wf.add(flaky, str(log), str(fixed))
    for policy in ("cancel", "run", "wait"):
        wf.add("witness", {"log": str(log), "name": policy, "got": bad.result},
               on_parent_failure=policy)  # fmt: skip
    wid = queue.enqueue_workflow(wf)
    service = start_service(queue.url, tmp_path, APP)

    def settled() -> bool:
        jobs = {job.node: job.status for job in queue.workflow(wid).jobs}
        return jobs["flaky"] is JobStatus.DEAD and jobs["witness-2"] is JobStatus.COMPLETED

    wait_until(settled, what="the failed parent and its 'run' child settled")
    status = queue.workflow(wid)
    assert status.job("witness").status is JobStatus.CANCELLED
    assert status.job("witness-3").status is JobStatus.WAITING
    ran = status.job("witness-2").result
    assert ran["payload"]["got"] is None and ran["failed"] == {"flaky": "dead"}
    assert _runs(log) == {"flaky": 1, "run": 1}

    fixed.touch()
    # The parent and the cancelled child start again; the "wait" child waits on.
    assert queue.retry_workflow(wid) == 2
    wait_until(lambda: _finished(queue, wid), what="the retried workflow finished")
    status = queue.workflow(wid)
    assert status.counts == {JobStatus.COMPLETED: 4}, status
    assert status.job("witness-3").result["payload"]["got"] == "fixed"
    assert status.job("witness").result["payload"]["got"] == "fixed"
    assert _runs(log) == {"flaky": 2, "run": 1, "cancel": 1, "wait": 1}
    assert service.stop() == 0
    assert_invariants(queue.url)


def test_a_retried_node_runs_again_and_the_completed_keep_their_results(
    queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    log, fixed = tmp_path / "runs", tmp_path / "fixed"
    wf = jobvisor.Workflow("retry")
    a = wf.add(counted, "a", str(log))
    b = wf.add(flaky, str(log), str(fixed))
    wf.add(gather, str(log), a.result, b.result)
    wid = queue.enqueue_workflow(wf)
    service = start_service(queue.url, tmp_path, APP)
    wait_until(lambda: queue.workflow(wid).job("gather").status is JobStatus.CANCELLED,
               what="the failure cancelled the child")  # fmt: skip
    a_before = queue.workflow(wid).job("counted")
    fixed.touch()
    assert queue.retry_workflow(wid) == 2
    wait_until(lambda: _finished(queue, wid), what="the retried workflow finished")
    status = queue.workflow(wid)
    assert status.counts == {JobStatus.COMPLETED: 3}, status
    assert status.job("gather").result == "a+fixed"
    assert status.job("counted") == a_before  # not run again: same attempts, result, finish
    assert _runs(log) == {"a": 1, "flaky": 2, "gather": 1}
    assert service.stop() == 0
    assert_invariants(queue.url)


def test_cancelling_a_running_workflow_stops_its_running_node(
    queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    started, log = tmp_path / "started", tmp_path / "runs"
    wf = jobvisor.Workflow("cancelled")
    a = wf.add(sleeper, str(started))
    wf.after(a).add(counted, "after", str(log))
    wf.add(counted, "beside", str(log))
    wid = queue.enqueue_workflow(wf)
    # A short lease: SQLite hears a cancel at the next renewal (every half lease).
    service = start_service(queue.url, tmp_path, {**APP, "JOBVISOR_LEASE": "2"})
    wait_until(started.exists, what="the sleeper started")
    # Completed, not only run: a handler's run is logged before its completion is written.
    wait_until(lambda: queue.workflow(wid).job("counted-2").status is JobStatus.COMPLETED,
               what="the independent node completed")  # fmt: skip
    assert queue.cancel_workflow(wid, reason="test") == 2  # the sleeper asked, its child now
    wait_until(lambda: _finished(queue, wid), what="the workflow finished")
    status = queue.workflow(wid)
    sleeping = status.job("sleeper")
    assert sleeping.status is JobStatus.CANCELLED
    assert sleeping.last_error == "test"
    service.wait_event("job.cancel_requested", job_id=str(sleeping.id))
    service.wait_event("job.cancelled", job_id=str(sleeping.id))
    assert status.job("counted").status is JobStatus.CANCELLED
    assert status.job("counted-2").status is JobStatus.COMPLETED
    assert _runs(log) == {"beside": 1}
    assert service.stop() == 0
    assert_invariants(queue.url)


@pytest.mark.timeout(300)
def test_the_supervisor_killed_mid_fan_in_loses_nothing_and_the_child_fires_once(
    queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    log = tmp_path / "runs"
    wf = jobvisor.Workflow("killed")
    # Leaves of 100 ms: 16 slots run 160 a second, so the orphaned workers,
    # which see their parent gone within a heartbeat (1 s) and then drain,
    # cannot finish the fan before they stop.
    _fan(wf, 1000, log, ms=100)
    wid = queue.enqueue_workflow(wf)
    # A short lease, so that what the dead service held comes back in seconds.
    settings = {**APP, "JOBVISOR_LEASE": "3", "JOBVISOR_CONCURRENCY": "8"}
    first = start_service(queue.url, tmp_path, settings, name="first")

    def some_done() -> bool:
        counts = queue.workflow(wid).counts
        return counts.get(JobStatus.COMPLETED, 0) >= 200

    wait_until(some_done, what="a part of the fan-out done")
    workers = births(first.worker_pids().values())
    os.kill(first.pid, signal.SIGKILL)
    first.wait_exit(30)
    # Its workers see their parent gone and stop; none may run on.
    wait_until(lambda: not any_alive(workers), timeout=90,
               what="the orphaned workers gone")  # fmt: skip
    counts = queue.workflow(wid).counts
    assert counts.get(JobStatus.WAITING) == 1 and counts.get(JobStatus.COMPLETED, 0) < 1002
    assert "sink" not in _runs(log)
    second = start_service(queue.url, tmp_path, settings, name="second")
    wait_until(lambda: _finished(queue, wid), timeout=240, what="the workflow finished")
    status = queue.workflow(wid)
    assert status.counts == {JobStatus.COMPLETED: 1002}, status.counts
    assert _runs(log)["leaf"] >= 1001  # a leaf the kill cut short ran again
    assert _sink_ran_last(log)
    assert second.stop() == 0
    assert_invariants(queue.url)
