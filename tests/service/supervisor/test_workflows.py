"""Workflows through a real `jobvisor run`, on both engines: typed tasks
hand their results down a diamond, and a worker killed with SIGKILL in the
middle of a workflow loses nothing: its job runs again, the child once."""

from __future__ import annotations

import decimal
import os
import re
import signal
import uuid
from collections.abc import Callable
from pathlib import Path

import jobvisor
from jobvisor import JobStatus, Queue
from tests.service.supervisor.workflow_app import (
    Report,
    build_report,
    fetch_orders,
    fetch_refunds,
    held,
    publish,
)
from tests.support.invariants import assert_invariants
from tests.support.service import Service, http_get
from tests.support.wait import wait_until

from .test_crashes import running_on

APP = {"JOBVISOR_APP": "tests.service.supervisor.workflow_app:registry"}


def _finished(queue: Queue, wid: uuid.UUID) -> bool:
    return queue.workflow(wid).finished


def test_a_diamond_of_typed_tasks_hands_each_result_down(
    queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    log = tmp_path / "published.txt"
    wf = jobvisor.Workflow("nightly-report")
    a = wf.add(fetch_orders, day="2026-12-04")
    b = wf.add(fetch_refunds, day="2026-12-04")
    c = wf.add(build_report, day="2026-12-04", orders=a.result, refunds=b.result)
    wf.add(publish, c.result, log=str(log))
    wid = queue.enqueue_workflow(wf)
    service = start_service(queue.url, tmp_path, APP)
    wait_until(lambda: _finished(queue, wid), what="the workflow finished")
    status = queue.workflow(wid)
    assert status.counts == {JobStatus.COMPLETED: 4}, status
    assert all(job.attempts == 1 for job in status.jobs)
    report = queue.get(status.job("build_report").id)
    assert build_report.result(report) == Report("2026-12-04", 2, decimal.Decimal("13.00"))
    assert status.job("publish").result == "2026-12-04: 2 orders, net 13.00"
    assert log.read_text() == "2026-12-04 13.00\n"  # published once
    assert service.stop() == 0
    assert_invariants(queue.url)


def test_a_worker_killed_mid_workflow_loses_nothing_and_the_child_fires_once(
    queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    started, release, log = tmp_path / "started", tmp_path / "release", tmp_path / "log"
    wf = jobvisor.Workflow("killed")
    a = wf.add(held, str(started), str(release))
    b = wf.add(fetch_refunds, day="x")
    c = wf.add(build_report, day="x", orders=[], refunds=b.result)
    wf.after(a).add(publish, c.result, log=str(log))
    wid = queue.enqueue_workflow(wf)
    service = start_service(queue.url, tmp_path, APP)
    service.wait_ready()
    (held_id,) = [job.id for job in queue.workflow(wid).jobs if job.node == "held"]
    worker_id = wait_until(lambda: running_on(queue.url, held_id), what="the held job running")
    wait_until(started.exists, what="the held job started")
    # The held job alone in its worker when it dies (the other branch done):
    # the crash is charged to it, a second attempt (a worker that dies with
    # several jobs gives their attempts back).
    wait_until(
        lambda: queue.workflow(wid).counts.get(JobStatus.COMPLETED, 0) == 2,
        what="the other branch done",
    )
    os.kill(service.worker_pids()[worker_id], signal.SIGKILL)
    service.wait_event("worker.jobs_requeued", worker_id=worker_id, timeout=30)
    wait_until(lambda: len(started.read_text().splitlines()) == 2, what="the held job again")
    assert queue.workflow(wid).job("publish").status is JobStatus.WAITING
    release.touch()
    wait_until(lambda: _finished(queue, wid), what="the workflow finished")
    status = queue.workflow(wid)
    assert status.counts == {JobStatus.COMPLETED: 4}, status
    assert status.job("held").attempts == 2 and status.job("held").result == 2
    assert status.job("publish").attempts == 1
    assert log.read_text() == "x -1.75\n"  # the child ran once
    assert service.stop() == 0
    assert_invariants(queue.url)


def _workflows_metric(port: int) -> dict[str, float]:
    body = http_get(port, "/metrics")[1]
    return {
        state: float(value)
        for state, value in re.findall(r'^jobvisor_workflows\{state="(\w+)"\} (\S+)$', body, re.M)
    }


def _noop_workflow(queue: Queue, name: str, on: str = "default") -> uuid.UUID:
    wf = jobvisor.Workflow(name)
    a = wf.add("noop", {}, queue=on)
    wf.add("noop", {}, after=[a], queue=on)
    return queue.enqueue_workflow(wf)


def test_the_leader_reports_workflows_by_state_in_metrics(
    queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    done = _noop_workflow(queue, "done")
    queue.cancel_workflow(_noop_workflow(queue, "stopped"))
    queue.pause("held")
    _noop_workflow(queue, "waiting", on="held")
    settings = {"JOBVISOR_HTTP_ADDR": "127.0.0.1:0"}
    service = start_service(queue.url, tmp_path, settings)
    port = int(service.wait_event("http.listening")[0]["port"])
    wait_until(lambda: _finished(queue, done), what="the workflow finished")
    expected = {"active": 1.0, "completed": 1.0, "failed": 1.0}
    wait_until(lambda: _workflows_metric(port) == expected, what="the workflows gauge")
    assert service.stop() == 0
    assert_invariants(queue.url)


def test_only_the_leader_reports_workflows_and_the_next_one_takes_over(
    pg_queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = pg_queue.url
    pg_queue.pause("held")
    for n in range(3):
        _noop_workflow(pg_queue, f"wf-{n}", on="held")
    settings = {"JOBVISOR_HTTP_ADDR": "127.0.0.1:0", "JOBVISOR_SUMMARY_INTERVAL": "0.5"}
    a = start_service(url, tmp_path, settings, name="a")
    b = start_service(url, tmp_path, settings, name="b")
    ports = {s: int(s.wait_event("http.listening")[0]["port"]) for s in (a, b)}

    def reporting() -> list[Service]:
        return [s for s in (a, b) if _workflows_metric(ports[s])]

    leader = wait_until(lambda: reporting() if len(reporting()) == 1 else [], what="one report")
    (leader_service,) = leader
    assert leader_service.events("leader.elected")
    assert _workflows_metric(ports[leader_service]) == {
        "active": 3.0,
        "completed": 0.0,
        "failed": 0.0,
    }
    other = b if leader_service is a else a
    assert _workflows_metric(ports[other]) == {}
    assert leader_service.stop() == 0
    wait_until(lambda: _workflows_metric(ports[other]).get("active") == 3.0, what="a new report")
    assert other.stop() == 0
    assert_invariants(url)
