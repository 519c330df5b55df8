"""Stopping `jobvisor run`: SIGTERM drains, a job longer than the drain is
released (attempt not counted) and finished by the next supervisor, a second
SIGTERM or a SIGQUIT cuts the drain short."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

from jobvisor import Queue
from jobvisor.supervisor.arbiter import STOP_MARGIN
from tests.support.invariants import assert_invariants
from tests.support.service import Service, by_status, job
from tests.support.wait import wait_until

SHUTDOWN_TIMEOUT = 3.0
# What "within the shutdown timeout plus a small margin" allows on a loaded machine.
EXIT_WITHIN = SHUTDOWN_TIMEOUT + STOP_MARGIN + 10


def test_sigterm_during_a_stream_of_jobs_exits_0_and_loses_nothing(
    queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = queue.url
    ids = queue.enqueue_many([{"job_type": "sleep", "payload": {"seconds": 0.05}}] * 400)
    service = start_service(url, tmp_path, {"JOBVISOR_SHUTDOWN_TIMEOUT": str(SHUTDOWN_TIMEOUT)})
    service.wait_ready()
    wait_until(lambda: by_status(url).get("completed", 0) >= 20, what="20 jobs completed")
    assert by_status(url).get("running", 0) > 0 or by_status(url).get("pending", 0) > 0

    assert service.stop(timeout=EXIT_WITHIN) == 0

    counts = by_status(url)
    assert set(counts) <= {"completed", "pending"}, counts
    assert sum(counts.values()) == len(ids)
    assert not service.events("worker.killed")
    assert service.events("worker.exited")  # both drained and exited on their own
    assert_invariants(url)


def test_a_job_longer_than_the_drain_is_released_and_finished_by_the_next_supervisor(
    queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = queue.url
    marker = str(tmp_path / "ran-once")
    long_job = queue.enqueue("sleep_once", {"seconds": 600, "marker": marker}, max_attempts=1)
    settings = {"JOBVISOR_SHUTDOWN_TIMEOUT": "1"}
    first = start_service(url, tmp_path, settings, name="first")
    wait_until(lambda: job(url, long_job)["status"] == "running", what="the long job running")
    # Its handler started (it leaves the marker first): a stop between the
    # claim and the handler's start would leave the next run sleeping instead.
    wait_until(lambda: os.path.exists(marker), what="the long job's handler running")

    assert first.stop(timeout=1 + STOP_MARGIN + 10) == 0

    row = job(url, long_job)
    assert row["status"] == "pending", row
    assert row["attempts"] == 0  # released: the operator interrupted it, it did not fail
    assert not first.events("worker.killed")
    assert_invariants(url)

    second = start_service(url, tmp_path, settings, name="second")
    wait_until(lambda: job(url, long_job)["status"] == "completed", what="the job completed")
    assert job(url, long_job)["attempts"] == 1
    assert second.stop() == 0
    assert_invariants(url)


def test_a_second_sigterm_cuts_the_drain_short(
    pg_queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = pg_queue.url
    long_job = pg_queue.enqueue("sleep_first", {"seconds": 600})
    # A drain of ten minutes: only the second signal can end this test in time.
    service = start_service(url, tmp_path, {"JOBVISOR_SHUTDOWN_TIMEOUT": "600"})
    wait_until(lambda: job(url, long_job)["status"] == "running", what="the long job running")

    service.signal(signal.SIGTERM)
    service.wait_event("supervisor.stopping", mode="graceful")
    service.signal(signal.SIGTERM)

    assert service.wait_exit(STOP_MARGIN + 30) == 0
    assert service.events("supervisor.stopping", mode="fast")
    row = job(url, long_job)
    assert row["status"] == "pending" and row["attempts"] == 0, row
    assert_invariants(url)


def test_sigquit_stops_at_once_and_releases_running_jobs(
    pg_queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = pg_queue.url
    ids = pg_queue.enqueue_many([{"job_type": "sleep_first", "payload": {"seconds": 600}}] * 3)
    service = start_service(url, tmp_path, {"JOBVISOR_SHUTDOWN_TIMEOUT": "600"})
    wait_until(lambda: by_status(url).get("running") == 3, what="three jobs running")

    service.signal(signal.SIGQUIT)

    assert service.wait_exit(STOP_MARGIN + 30) == 0
    for job_id in ids:
        row = job(url, job_id)
        assert row["status"] == "pending" and row["attempts"] == 0, row
    assert not service.events("worker.killed")
    assert_invariants(url)
