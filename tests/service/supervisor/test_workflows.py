"""Workflows through a real `jobvisor run`, on both engines: typed tasks
hand their results down a diamond, and a worker killed with SIGKILL in the
middle of a workflow loses nothing: its job runs again, the child once."""

from __future__ import annotations

import decimal
import os
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
from tests.support.service import Service
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
