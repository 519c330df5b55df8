"""A real `python -m jobvisor.worker` process against a real database: jobs
run, fail, time out, snooze and cancel; signals drain or release; a lost
lease drops the result. Every scenario ends with the table's invariants."""

from __future__ import annotations

import datetime as dt
import json
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

import jobvisor
from jobvisor import JobStatus, Queue
from jobvisor.worker.claiming import EXPRESS_MIN_CONCURRENCY
from tests.support.invariants import assert_invariants
from tests.support.wait import wait_until
from tests.support.worker import ROOT, WorkerProcess, running_worker, steal_lease, worker_env


def status_of(queue: Queue, job_id: uuid.UUID) -> JobStatus:
    return queue.get(job_id).status


def wait_status(queue: Queue, job_id: uuid.UUID, *statuses: JobStatus) -> None:
    wait_until(lambda: status_of(queue, job_id) in statuses, f"job {job_id} to be {statuses}")


def marker(folder: Path, job_id: uuid.UUID, name: str) -> Path:
    return folder / f"{job_id}.{name}"


def wait_marker(folder: Path, job_id: uuid.UUID, name: str) -> Any:
    path = marker(folder, job_id, name)
    wait_until(path.exists, f"handler marker {path.name}")
    return json.loads(path.read_text())


def job_dir(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    return folder


def test_a_stream_of_jobs_completes(url: str, queue: Queue) -> None:
    first = queue.enqueue_many([{"job_type": "ok"} for _ in range(200)])
    first += queue.enqueue_many([{"job_type": "sync_ok"} for _ in range(40)])
    with running_worker(url, concurrency="8"):
        more = [queue.enqueue("ok") for _ in range(30)]
        more += queue.enqueue_many([{"job_type": "ok", "queue": "other"} for _ in range(30)])
        total = len(first) + len(more)
        wait_until(lambda: queue.summary().count(JobStatus.COMPLETED) == total,
                   f"{total} completed jobs")  # fmt: skip
    assert queue.summary().by_status()[JobStatus.COMPLETED] == total
    assert queue.summary().total == total
    assert_invariants(url)


def test_failures_are_retried_until_dead_with_the_error_and_traceback(
    url: str, queue: Queue
) -> None:
    boom = queue.enqueue("boom", max_attempts=3)
    sync_boom = queue.enqueue("sync_boom", max_attempts=5)
    unknown = queue.enqueue("no_such_type", max_attempts=1)
    with running_worker(url):
        wait_status(queue, boom, JobStatus.DEAD)
        wait_status(queue, sync_boom, JobStatus.RETRYABLE)
    dead = queue.get(boom)
    assert dead.attempts == 3
    assert dead.last_error is not None
    first_line, _, frames = dead.last_error.partition("\n")
    assert first_line == "ValueError: boom on attempt 3"
    assert "app.py" in frames and "in boom" in frames
    retryable = queue.get(sync_boom)
    assert retryable.attempts == 1
    assert retryable.last_error is not None
    assert retryable.last_error.startswith("KeyError: 'sync boom'\n")
    assert retryable.run_at > dt.datetime.now(dt.UTC) + dt.timedelta(minutes=30)
    # No handler here: never claimed, it waits, attempts untouched, for a worker that has one.
    waiting = queue.get(unknown)
    assert (waiting.status, waiting.attempts, waiting.last_error) == (JobStatus.PENDING, 0, None)
    assert_invariants(url)


def test_a_handler_past_its_timeout_fails(url: str, queue: Queue) -> None:
    slow = queue.enqueue("slow", max_attempts=1)
    sync_slow = queue.enqueue("sync_slow", max_attempts=1)
    with running_worker(url):
        wait_status(queue, slow, JobStatus.DEAD)
        wait_status(queue, sync_slow, JobStatus.DEAD)
    assert queue.get(slow).last_error == "TimeoutError: slow ran past its 0.5s timeout"
    assert queue.get(sync_slow).last_error == "TimeoutError: sync_slow ran past its 0.5s timeout"
    assert_invariants(url)


def test_a_handler_snoozes_or_cancels_its_job(url: str, queue: Queue) -> None:
    snoozed = queue.enqueue("snooze")
    cancelled = queue.enqueue("cancel")
    with running_worker(url) as worker:
        worker.wait_log("job.snoozed", job_id=str(snoozed))
        wait_status(queue, cancelled, JobStatus.CANCELLED)
    job = queue.get(snoozed)
    assert (job.status, job.attempts) == (JobStatus.PENDING, 0)
    assert job.run_at > dt.datetime.now(dt.UTC) + dt.timedelta(minutes=50)
    gone = queue.get(cancelled)
    assert (gone.attempts, gone.last_error) == (1, "no longer wanted")
    assert_invariants(url)


def test_the_correlation_id_reaches_the_handler_and_every_log_line(
    url: str, queue: Queue, tmp_path: Path
) -> None:
    secret = "payload-must-not-be-logged"
    report = queue.enqueue("report", {"dir": str(tmp_path), "secret": secret},
                           correlation_id="corr-async")  # fmt: skip
    sync_report = queue.enqueue("sync_report", {"dir": str(tmp_path), "secret": secret},
                                correlation_id="corr-thread")  # fmt: skip
    failing = queue.enqueue("boom", {"secret": secret}, max_attempts=1, correlation_id="corr-fail")
    with running_worker(url, log_level="debug") as worker:
        seen = wait_marker(tmp_path, report, "seen")
        seen_in_thread = wait_marker(tmp_path, sync_report, "seen")
        wait_status(queue, failing, JobStatus.DEAD)
        own_line = worker.wait_log("testapp.ran", job_id=str(report))
        started = worker.wait_log("job.started", job_id=str(report))
        worker.wait_log("job.completed", job_id=str(report))
        dead = worker.wait_log("job.dead", job_id=str(failing))
    assert seen["context_correlation_id"] == seen["correlation_id"] == "corr-async"
    assert (seen["attempt"], seen["job_type"], seen["queue"]) == (1, "report", "default")
    assert seen_in_thread["context_correlation_id"] == "corr-thread"
    assert own_line["correlation_id"] == "corr-async"
    assert started["correlation_id"] == "corr-async"
    assert {"job_type", "queue", "attempt", "worker_id"} <= started.keys()
    assert dead["correlation_id"] == "corr-fail"
    assert dead["error"] == "ValueError: boom on attempt 1"
    assert not [line for line in worker.stderr_lines if secret in line]
    assert_invariants(url)


def test_sigterm_lets_a_short_job_finish_and_releases_a_long_one(
    url: str, queue: Queue, tmp_path: Path
) -> None:
    short_dir, long_dir = job_dir(tmp_path, "short"), job_dir(tmp_path, "long")
    short = queue.enqueue("wait", {"dir": str(short_dir)})
    long = queue.enqueue("wait", {"dir": str(long_dir)})
    with WorkerProcess(url, shutdown_timeout="3") as worker:
        wait_marker(short_dir, short, "started")
        wait_marker(long_dir, long, "started")
        worker.send(signal.SIGTERM)
        worker.wait_log("worker.stopping")
        (short_dir / "go").touch()  # the short job ends within the drain window
        assert worker.wait_exit() == 0
    assert marker(short_dir, short, "finished").exists()
    assert marker(long_dir, long, "cancelled").exists()
    done = queue.get(short)
    assert (done.status, done.attempts) == (JobStatus.COMPLETED, 1)
    released = queue.get(long)
    assert (released.status, released.attempts) == (JobStatus.PENDING, 0)
    assert released.claim_token is None
    assert_invariants(url)


@pytest.mark.parametrize(
    "signals", [[signal.SIGQUIT], [signal.SIGTERM, signal.SIGTERM]], ids=["sigquit", "sigterm2"]
)
def test_a_fast_stop_releases_running_jobs_at_once(
    url: str, queue: Queue, tmp_path: Path, signals: list[int]
) -> None:
    job = queue.enqueue("wait", {"dir": str(tmp_path)})
    sync_job = queue.enqueue("sync_wait", {"dir": str(tmp_path), "seconds": 5})
    # A drain window far beyond the test's deadline: only a fast stop ends in time.
    with WorkerProcess(url, shutdown_timeout="3600") as worker:
        wait_marker(tmp_path, job, "started")
        wait_marker(tmp_path, sync_job, "started")
        for sig in signals:
            worker.send(sig)
            worker.wait_log("worker.stopping")
        assert worker.wait_exit() == 0
    for job_id in (job, sync_job):
        released = queue.get(job_id)
        assert (released.status, released.attempts) == (JobStatus.PENDING, 0)
    assert_invariants(url)


def test_a_lost_lease_drops_the_handlers_result(url: str, queue: Queue, tmp_path: Path) -> None:
    job = queue.enqueue("wait", {"dir": str(tmp_path)})
    with running_worker(url, lease="60") as worker:
        wait_marker(tmp_path, job, "started")
        steal_lease(url, job)
        (tmp_path / "go").touch()
        wait_marker(tmp_path, job, "finished")
        worker.wait_log("job.lease_lost", job_id=str(job))
    row = queue.get(job)
    assert (row.status, row.worker_id) == (JobStatus.RUNNING, "thief")
    assert_invariants(url)


def test_a_lost_lease_cancels_the_running_handler(url: str, queue: Queue, tmp_path: Path) -> None:
    job = queue.enqueue("wait", {"dir": str(tmp_path)})
    with running_worker(url, lease="1") as worker:  # renewed every half second
        wait_marker(tmp_path, job, "started")
        steal_lease(url, job)
        wait_marker(tmp_path, job, "cancelled")
        worker.wait_log("job.lease_lost", job_id=str(job))
    assert not marker(tmp_path, job, "finished").exists()
    row = queue.get(job)
    assert (row.status, row.worker_id) == (JobStatus.RUNNING, "thief")
    assert_invariants(url)


def test_the_control_channel_reports_ready_heartbeats_hard_limits_and_metrics(
    sqlite_url: str, tmp_path: Path
) -> None:
    with _migrated(sqlite_url) as queue:
        job = queue.enqueue("wait", {"dir": str(tmp_path), "seconds": 0.05})
        failed = queue.enqueue("boom", max_attempts=1)
        with WorkerProcess(sqlite_url, control=True) as worker:
            wait_until(lambda: worker.control("ready"), "a ready message")
            wait_status(queue, job, JobStatus.COMPLETED)
            wait_status(queue, failed, JobStatus.DEAD)
            wait_until(lambda: len(worker.control("hb")) >= 2, "two heartbeats")
            wait_until(lambda: _outcomes(worker.control("metrics")) >= {"completed", "dead"},
                       "metrics of the completed and the dead job")  # fmt: skip
            assert worker.stop() == 0
        assert {"t": "job", "id": str(job), "hard": 600.0} in worker.messages
        assert {"t": "end", "id": str(job)} in worker.messages
        entries = [e for m in worker.control("metrics") for e in m.get("jobs", [])]
        completed = [e for e in entries if e["outcome"] == "completed"]
        assert sum(e["count"] for e in completed) == 1
        assert completed[0]["job_type"] == "wait" and len(completed[0]["seconds"]) == 1
        assert sum(m.get("claimed", 0) for m in worker.control("metrics")) == 2
        assert_invariants(sqlite_url)


def _migrated(url: str) -> Queue:
    queue = jobvisor.connect(url)
    queue.migrate()
    return queue


def _outcomes(messages: list[dict[str, Any]]) -> set[str]:
    return {e["outcome"] for m in messages for e in m.get("jobs", [])}


@pytest.mark.long
def test_boot_failures_exit_with_their_codes(sqlite_url: str) -> None:
    def run(**settings: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "jobvisor.worker"], env=worker_env(sqlite_url, **settings),
            cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip

    bad_setting = run(concurrency="zero")
    assert bad_setting.returncode == 78
    assert bad_setting.stderr.strip().count("\n") == 0
    assert "JOBVISOR_CONCURRENCY='zero'" in bad_setting.stderr
    bad_app = run(app="tests.worker.no_such_module:registry")
    assert bad_app.returncode == 3
    assert "cannot import 'tests.worker.no_such_module'" in bad_app.stderr
    not_migrated = run()
    assert not_migrated.returncode == 78
    assert "worker.boot_failed" in not_migrated.stderr
    assert "run `jobvisor migrate`" in not_migrated.stderr
    unreachable = run(database_url=f"sqlite:///{sqlite_url.removeprefix('sqlite:///')}.d/x/j.db")
    assert unreachable.returncode == 69
    assert "cannot reach the database" in unreachable.stderr


def test_a_database_that_refuses_the_worker_exits_78(pg_url: str) -> None:
    missing = pg_url.rsplit("/", 1)[0] + "/jv_no_such_database"
    refused = subprocess.run(
        [sys.executable, "-m", "jobvisor.worker"], env=worker_env(missing),
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert refused.returncode == 78
    assert 'database \\"jv_no_such_database\\" does not exist' in refused.stderr


@pytest.mark.parametrize(
    ("app", "at_once"),
    [
        # Every handler async: 200 jobs at once.
        ("tests.service.worker.async_app:registry", 200),
        # One plain function (threads): 20.
        ("tests.service.worker.async_app:threaded", 20),
    ],
)
def test_the_default_concurrency_follows_the_handlers(
    url: str, queue: Queue, tmp_path: Path, app: str, at_once: int
) -> None:
    jobs = at_once + 30
    release = tmp_path / "release"
    queue.enqueue_many([{"job_type": "hold", "payload": {"release": str(release)}}] * jobs)
    with WorkerProcess(url, app=app) as worker:
        started = worker.wait_log("worker.started")
        assert started["concurrency"] == at_once
        # With LISTEN, a worker with many slots leaves one to express claims.
        express = url.startswith("postgresql") and at_once >= EXPRESS_MIN_CONCURRENCY
        claimed = at_once - 1 if express else at_once
        wait_until(
            lambda: queue.summary().count(JobStatus.RUNNING) == claimed,
            f"{claimed} jobs running at once",
        )
        release.touch()
        worker.send(signal.SIGTERM)
        assert worker.wait_exit() == 0
    assert queue.summary().count(JobStatus.RUNNING) == 0
    assert_invariants(url)
