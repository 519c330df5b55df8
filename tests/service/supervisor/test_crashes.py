"""Workers that die or hang: each is replaced, and the jobs it held are back
at once (not after their lease), counted as an attempt so that a job that
keeps killing its worker ends `dead`. A worker that cannot boot, or too many
crashes in a row, stop the supervisor instead of a fork storm."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

import jobvisor
from jobvisor import Queue
from jobvisor.exitcodes import ExitCode
from jobvisor.worker.protocol import EXIT_BOOT_FAILED
from tests.support.invariants import assert_invariants
from tests.support.service import Service, any_alive, births, by_status, is_alive, job, jobs
from tests.support.wait import wait_until


def running_on(url: str, job_id: uuid.UUID) -> str:
    row = job(url, job_id)
    return str(row["worker_id"]) if row["status"] == "running" else ""


def test_kill_9_of_a_worker_requeues_its_jobs_at_once_and_replaces_it(
    queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = queue.url
    held = queue.enqueue("sleep_first", {"seconds": 600})
    service = start_service(url, tmp_path)
    service.wait_ready()
    worker_id = wait_until(lambda: running_on(url, held), what="the job running")
    pid = service.worker_pids()[worker_id]

    os.kill(pid, signal.SIGKILL)

    # The lease is 120 s: only the supervisor's requeue brings it back this soon.
    requeued = service.wait_event("worker.jobs_requeued", worker_id=worker_id, timeout=20)
    assert requeued[0]["count"] == 1
    exited = service.events("worker.exited", worker_id=worker_id)
    assert "SIGKILL" in exited[0]["exit"] and "OOM" in exited[0]["exit"]
    wait_until(lambda: job(url, held)["status"] == "completed", what="the job completed")
    row = job(url, held)
    assert row["attempts"] == 2  # the killed attempt counted
    service.wait_event("worker.ready", count=3)  # the replacement
    assert len(service.live_workers()) == 2
    assert service.stop() == 0
    assert_invariants(url)


@pytest.mark.long
def test_a_job_that_always_kills_its_worker_ends_dead_while_others_flow(
    pg_queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = pg_queue.url
    poison = pg_queue.enqueue("crash", max_attempts=5)
    others = pg_queue.enqueue_many([{"job_type": "noop"}] * 100)
    # Five deaths against a budget of two: each is charged to the job that
    # caused it (its attempts), not to the service, which keeps running.
    service = start_service(url, tmp_path, {"JOBVISOR_MAX_RESTARTS": "2"})

    wait_until(lambda: job(url, poison)["status"] == "dead", what="the poison job dead")
    row = job(url, poison)
    assert row["attempts"] == 5
    assert "SIGKILL" in str(row["last_error"])
    wait_until(lambda: by_status(url).get("completed") == len(others), what="the others done")
    # Charged when it ran alone, or at its crash limit beside others.
    assert len(service.events("worker.exited")) >= 5
    charged = service.wait_event("worker.crash_charged_to_jobs", count=5)  # the crashes, all
    assert all(event["jobs"] >= 1 for event in charged)  # the poison job, and any beside it
    assert not service.events("supervisor.crash_loop")
    service.check_running("the poison job's last death")
    assert service.stop() == 0
    assert_invariants(url)


def test_a_worker_killed_by_one_job_costs_the_jobs_beside_it_no_attempt(
    url: str, queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    beside = queue.enqueue_many(
        [{"job_type": "sleep", "payload": {"seconds": 4}, "max_attempts": 1}] * 20
    )
    service = start_service(url, tmp_path, {"JOBVISOR_CONCURRENCY": "20"})
    service.wait_ready()
    wait_until(lambda: by_status(url).get("running") == 20, what="the jobs beside it running")
    poison = queue.enqueue("crash", max_attempts=1)

    wait_until(lambda: job(url, poison)["status"] == "dead", what="the poison job dead")
    wait_until(lambda: by_status(url).get("completed") == len(beside), what="the others done")
    assert service.events("worker.exited")
    assert service.stop() == 0
    assert_invariants(url)


def test_a_handler_that_blocks_the_event_loop_gets_its_worker_killed_and_replaced(
    pg_queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = pg_queue.url
    blocker = pg_queue.enqueue("block_loop", {"seconds": 600}, max_attempts=1)
    service = start_service(url, tmp_path, {"JOBVISOR_WORKER_TIMEOUT": "3"})

    killed = service.wait_event("worker.killed", reason="unresponsive", signal="SIGABRT")
    worker_id = killed[0]["worker_id"]
    service.wait_event("worker.exited", worker_id=worker_id)
    wait_until(lambda: job(url, blocker)["status"] == "dead", what="the blocking job dead")
    assert "event loop was blocked" in str(job(url, blocker)["last_error"])
    # faulthandler's dump: where the loop was stuck.
    assert any("block_loop" in line for line in service.lines())
    wait_until(lambda: len(service.live_workers()) == 2, what="the replacement")
    after = pg_queue.enqueue("noop")
    wait_until(lambda: job(url, after)["status"] == "completed", what="a job after it")
    assert service.stop() == 0
    assert_invariants(url)


def test_a_sync_handler_past_its_hard_limit_is_killed_and_its_job_failed(
    pg_queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = pg_queue.url
    # One worker, so that a job runs beside the overrun one when it is killed.
    beside = pg_queue.enqueue("sleep", {"seconds": 3}, priority=1)
    overrun = pg_queue.enqueue("sync_sleep", {"seconds": 600}, max_attempts=1)
    service = start_service(url, tmp_path, {"JOBVISOR_WORKERS": "1"})

    killed = service.wait_event("worker.killed", reason="hard_limit")
    assert killed[0]["job_id"] == str(overrun)
    wait_until(lambda: job(url, overrun)["status"] == "dead", what="the job failed")
    assert "hard time limit" in str(job(url, overrun)["last_error"])
    # The job beside it was not at fault: back with its attempt given back,
    # then run to the end by the replacement.
    wait_until(lambda: job(url, beside)["status"] == "completed", what="the job beside it")
    assert job(url, beside)["attempts"] == 1
    assert job(url, beside)["last_error"] is None
    wait_until(lambda: len(service.live_workers()) == 1, what="the replacement")
    assert service.stop() == 0
    assert_invariants(url)


def test_kill_9_of_the_parent_makes_its_workers_exit(
    pg_queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = pg_queue.url
    pg_queue.enqueue("sleep", {"seconds": 1})
    service = start_service(url, tmp_path, {"JOBVISOR_SHUTDOWN_TIMEOUT": "2"})
    service.wait_ready()
    workers = births(service.worker_pids().values())
    assert set(workers) == service.live_workers()

    os.kill(service.pid, signal.SIGKILL)
    service.wait_exit(10)

    wait_until(lambda: not any_alive(workers), timeout=30,
               what="the orphaned workers to exit")  # fmt: skip
    assert by_status(url).get("running", 0) == 0
    assert_invariants(url)


def test_a_worker_that_cannot_boot_stops_the_supervisor_with_its_code(
    sqlite_url: str, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    broken = {"JOBVISOR_APP": "tests.service.supervisor.broken_app:registry"}
    service = start_service(sqlite_url, tmp_path, broken)

    assert service.wait_exit(60) == EXIT_BOOT_FAILED
    assert service.events("supervisor.stopped", exit_code=EXIT_BOOT_FAILED)
    # One worker per slot, none restarted: no fork storm.
    assert len(service.events("worker.spawned")) <= 2
    assert service.events("supervisor.worker_cannot_boot")
    assert_invariants(sqlite_url)


def test_too_many_crashes_in_the_window_stop_the_supervisor_non_zero(
    pg_queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = pg_queue.url
    pg_queue.enqueue_many([{"job_type": "noop"}] * 5)
    # Workers that boot, run, and die on their own holding no job: a crash
    # loop that no job explains.
    dying = {
        "JOBVISOR_APP": "tests.service.supervisor.dying_app:registry",
        "JOBVISOR_MAX_RESTARTS": "2",
    }
    service = start_service(url, tmp_path, dying)

    assert service.wait_exit(60) == ExitCode.CRASH_LOOP
    assert service.events("supervisor.stopped", exit_code=ExitCode.CRASH_LOOP)
    assert service.events("supervisor.crash_loop")
    # Two slots, two restarts; and the replacement of the crash that spends
    # the budget may be spawned already: a slot is restarted at once, the
    # crash charged once its requeue has answered (slow on a busy machine).
    assert len(service.events("worker.spawned")) <= 2 + 2 + 1
    assert not service.events("worker.crash_charged_to_jobs")
    assert all(row["status"] in ("completed", "pending") for row in jobs(url))
    assert_invariants(url)


def test_orphans_of_a_dead_worker_are_reaped_by_the_supervisor(
    sqlite_url: str, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    with jobvisor.connect(sqlite_url) as queue:
        queue.migrate()
        pid_file = tmp_path / "orphan.pid"
        queue.enqueue("leave_orphan", {"path": str(pid_file), "seconds": 1})
    service = start_service(sqlite_url, tmp_path, {"JOBVISOR_LOG_LEVEL": "debug"})

    orphan = int(wait_until(lambda: pid_file.exists() and pid_file.read_text(), what="the pid"))
    # The supervisor is a subreaper: the orphan became its child, and its exit
    # is collected instead of lingering as a zombie.
    service.wait_event("supervisor.orphan_reaped", pid=orphan)
    assert not is_alive(orphan)
    assert service.stop() == 0
    assert_invariants(sqlite_url)
