"""Cancelling running jobs through a real `jobvisor run`: an async handler is
cancelled at its next await, a thread handler that checks returns, one that
ignores the request has its worker replaced after the cancel grace. The job
ends `cancelled` with who asked in its last error, on both engines (PostgreSQL
hears the notice, SQLite the next renewal)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from jobvisor import JobStatus, Queue
from tests.support.invariants import assert_invariants
from tests.support.service import Service, by_status, clean_env, job
from tests.support.wait import wait_until

REQUEST = "cancelled by request from "
# A short lease: SQLite hears a cancel at the next renewal (every half lease).
SETTINGS = {"JOBVISOR_LEASE": "2", "JOBVISOR_CANCEL_GRACE": "1"}


def _cancel_running(queue: Queue, url: str, job_type: str, **payload: object) -> str:
    jid = queue.enqueue(job_type, {"seconds": 600, **payload}, max_attempts=1)
    wait_until(lambda: job(url, jid)["status"] == "running", what=f"{job_type} running")
    assert queue.cancel(jid, reason="test") is JobStatus.RUNNING
    try:
        wait_until(lambda: job(url, jid)["status"] == "cancelled", what=f"{job_type} cancelled")
    except AssertionError as exc:  # who holds it, and since when
        raise AssertionError(f"{exc}; the job: {job(url, jid)}") from None
    row = job(url, jid)
    assert str(row["last_error"]).startswith(REQUEST), row
    assert str(row["last_error"]).endswith(": test"), row
    return str(jid)


@pytest.mark.parametrize("job_type", ["sleep", "sync_cooperative", "sync_returns_on_cancel"])
def test_a_running_handler_is_stopped_and_its_job_ends_cancelled(
    queue: Queue, tmp_path: Path, start_service: Callable[..., Service], job_type: str
) -> None:
    url = queue.url
    service = start_service(url, tmp_path, SETTINGS)
    service.wait_ready()
    jid = _cancel_running(queue, url, job_type)
    service.wait_event("job.cancel_requested", job_id=jid)
    service.wait_event("job.cancelled", job_id=jid)
    assert not service.events("worker.killed")
    # The worker goes on running jobs.
    after = queue.enqueue("noop")
    wait_until(lambda: job(url, after)["status"] == "completed", what="a job after the cancel")
    assert service.stop() == 0
    assert_invariants(url)


def test_a_thread_handler_ignoring_the_cancel_has_its_worker_replaced(
    queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = queue.url
    service = start_service(url, tmp_path, {**SETTINGS, "JOBVISOR_WORKERS": "1"})
    service.wait_ready()
    marker = str(tmp_path / "beside-ran")  # a second run of it is quick
    beside = queue.enqueue("sleep_once", {"seconds": 600, "marker": marker})
    wait_until(lambda: job(url, beside)["status"] == "running", what="the job beside it")
    jid = _cancel_running(queue, url, "sync_stubborn")
    service.wait_event("job.cancel_grace_over", job_id=jid)
    service.wait_event("worker.killed")
    row = job(url, jid)
    assert row["status"] == "cancelled" and row["attempts"] == 1, row
    # The job beside it was interrupted, not charged: it runs again and completes.
    wait_until(lambda: job(url, beside)["status"] == "completed", what="the job beside it done")
    assert job(url, beside)["attempts"] == 1  # the interrupted attempt was given back
    assert service.stop() == 0
    assert_invariants(url)


def test_jobvisor_cancel_by_type_stops_running_jobs_and_cancels_pending_ones(
    queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = queue.url
    service = start_service(url, tmp_path, {**SETTINGS, "JOBVISOR_CONCURRENCY": "2"})
    service.wait_ready()
    ids = [queue.enqueue("sleep", {"seconds": 600}) for _ in range(6)]  # 4 run, 2 wait
    wait_until(lambda: by_status(url).get("running") == 4, what="four jobs running")
    done = subprocess.run(
        [str(Path(sys.executable).with_name("jobvisor")), "cancel", "--type", "sleep", "--yes"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=clean_env(url),
    )
    assert done.returncode == 0, done.stderr
    cancelled, requested = done.stdout.split(";")
    assert int(cancelled.split()[1]) + int(requested.split()[3]) == len(ids), done.stdout
    wait_until(lambda: by_status(url) == {"cancelled": len(ids)}, what="every job cancelled")
    assert service.stop() == 0
    assert_invariants(url)
