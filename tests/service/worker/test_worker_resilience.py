"""The worker against a hostile world: its database connections killed
mid-run (PostgreSQL), and its parent process dying."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

import jobvisor
from jobvisor import JobStatus, Queue
from tests.support.invariants import assert_invariants
from tests.support.wait import wait_until
from tests.support.worker import DEADLINE, ROOT, WorkerProcess, worker_env

TEST_APP_NAME = "jobvisor-worker-test"


@pytest.fixture
def pg_queue(pg_url: str) -> Iterator[Queue]:
    """The test's own queue, on connections `terminate_other_backends` spares."""
    queue = jobvisor.connect(f"{pg_url}?application_name={TEST_APP_NAME}")
    queue.migrate()
    try:
        yield queue
    finally:
        queue.close()


def terminate_other_backends(url: str) -> int:
    """pg_terminate_backend on every connection to this database but the test's."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND application_name <> %s",
            [TEST_APP_NAME],
        ).fetchall()
    return len(rows)


def completed_at_least(queue: Queue, count: int) -> Callable[[], bool]:
    return lambda: queue.summary().count(JobStatus.COMPLETED) >= count


def test_terminated_connections_are_survived_and_nothing_is_lost(
    pg_url: str, pg_queue: Queue, tmp_path: Path
) -> None:
    # A long poll interval: after the kills only NOTIFY (re-LISTENed) or the
    # poll that follows every reconnect can find new jobs quickly.
    payload = {"dir": str(tmp_path), "seconds": 0.1}
    ids = pg_queue.enqueue_many([{"job_type": "wait", "payload": payload} for _ in range(40)])
    with WorkerProcess(pg_url, concurrency="4", poll_interval="60") as worker:
        worker.wait_started()
        for round_ in range(3):
            wait_until(completed_at_least(pg_queue, 5 * round_), "some progress between kills")
            # The terminations race with the worker's own traffic: the pool,
            # the listener, or both may be hit; whatever is hit must recover.
            assert terminate_other_backends(pg_url) >= 1
            ids.append(pg_queue.enqueue("ok"))  # enqueued while the worker reconnects
        worker.wait_log("queue.listen_lost")
        worker.wait_log("queue.listen_restored")
        wait_until(lambda: pg_queue.summary().count(JobStatus.COMPLETED) == len(ids),
                   f"all {len(ids)} jobs completed")  # fmt: skip
        late = pg_queue.enqueue("ok")  # after recovery: found by NOTIFY, not the 60s poll
        wait_until(lambda: pg_queue.get(late).status == JobStatus.COMPLETED, "the late job")
        assert worker.stop() == 0
    summary = pg_queue.summary()
    assert summary.count(JobStatus.COMPLETED) == summary.total == len(ids) + 1
    assert_invariants(pg_url)


INTERMEDIATE = textwrap.dedent(
    """
    import os, subprocess, sys, time
    from jobvisor.worker.protocol import CONTROL_FD_ENV
    read_fd, write_fd = os.pipe()
    env = dict(os.environ, **{CONTROL_FD_ENV: str(write_fd)})
    with open(sys.argv[1], "wb") as log:
        worker = subprocess.Popen([sys.executable, "-m", "jobvisor.worker"], env=env,
                                  pass_fds=(write_fd,), stderr=log, stdout=subprocess.DEVNULL)
    os.close(write_fd)
    buffer = b""
    while b'"ready"' not in buffer:
        chunk = os.read(read_fd, 4096)
        if not chunk:
            sys.exit("the worker never said ready")
        buffer += chunk
    print(worker.pid, flush=True)
    while True:
        os.read(read_fd, 4096)  # keep draining heartbeats until killed
    """
)


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")  # a zombie has exited; its new parent reaps it


def test_a_worker_whose_parent_dies_drains_and_exits(
    url: str, queue: Queue, tmp_path: Path
) -> None:
    job = queue.enqueue("wait", {"dir": str(tmp_path)})
    log = tmp_path / "worker.log"
    parent = subprocess.Popen(
        [sys.executable, "-c", INTERMEDIATE, str(log)],
        env=worker_env(url, shutdown_timeout="1"), cwd=ROOT,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    worker_pid = 0
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline()
        if not line.strip().isdigit():
            parent.kill()
            assert parent.stderr is not None
            raise AssertionError(f"no worker pid from the parent: {parent.stderr.read()}")
        worker_pid = int(line)
        wait_until((tmp_path / f"{job}.started").exists, "the job to start")
        parent.kill()
        parent.wait(DEADLINE)
        wait_until(lambda: _gone(worker_pid), "the orphaned worker to exit")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(DEADLINE)
        for stream in (parent.stdout, parent.stderr):
            if stream is not None:
                stream.close()
        if worker_pid and not _gone(worker_pid):
            os.kill(worker_pid, signal.SIGKILL)
    text = log.read_text()
    assert "worker.parent_gone" in text, text
    released = queue.get(job)
    assert (released.status, released.attempts) == (JobStatus.PENDING, 0)
    assert_invariants(url)


def test_claims_carry_the_worker_id_from_the_environment(sqlite_url: str) -> None:
    with jobvisor.connect(sqlite_url) as queue:
        queue.migrate()
        worker_id = "w-" + uuid.uuid4().hex[:12]
        with WorkerProcess(sqlite_url, worker_id=worker_id) as worker:
            worker.wait_started()
            job = queue.enqueue("ok")
            wait_until(lambda: queue.get(job).status == JobStatus.COMPLETED, "the job")
            assert worker.stop() == 0
        started = worker.events("worker.started")[0]
        assert started["worker_id"] == worker_id
        assert queue.get(job).worker_id == worker_id
        assert_invariants(sqlite_url)


def test_a_worker_started_standalone_gets_a_random_id(sqlite_url: str) -> None:
    with jobvisor.connect(sqlite_url) as queue:
        queue.migrate()
    ids = set()
    for _ in range(2):
        with WorkerProcess(sqlite_url) as worker:
            worker.wait_started()
            ids.add(worker.events("worker.started")[0]["worker_id"])
            assert worker.stop() == 0
    assert len(ids) == 2 and all(i.startswith("w-") for i in ids)
