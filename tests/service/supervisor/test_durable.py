"""Durable steps, sleeps and signals through a real `jobvisor run`, on both
engines: a worker killed after each step in turn runs no step twice; a sleep
outlives a SIGTERM rollout; signals before and during a wait are delivered,
after the job ended refused; a wait times out; a step order changed under a
job fails it with both names; a worker that lost its lease records no step;
a worker killed right after each transactional step commits leaves exactly
one row per step in the table the steps wrote."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from jobvisor import InvalidArgument, JobStatus, Queue
from jobvisor.queue import internal
from tests.support.invariants import assert_invariants, query_all
from tests.support.service import Service, job
from tests.support.wait import wait_until

from .test_crashes import running_on

APP = {"JOBVISOR_APP": "tests.service.supervisor.durable_app:registry"}


def _count(folder: Path, name: str) -> int:
    path = folder / name
    return len(path.read_text().splitlines()) if path.exists() else 0


def _status(queue: Queue, job_id: uuid.UUID) -> JobStatus:
    return queue.get(job_id).status


def _ended(queue: Queue, job_id: uuid.UUID) -> bool:
    return queue.get(job_id).status in {JobStatus.COMPLETED, JobStatus.DEAD, JobStatus.CANCELLED}


def _parked(queue: Queue, job_id: uuid.UUID) -> bool:
    log = internal.service_ops(queue).step_log(job_id)
    return _status(queue, job_id) is JobStatus.PENDING and any(s.status == "waiting" for s in log)


@pytest.mark.parametrize("job_type", ["three_steps", "three_steps_sync"])
def test_a_worker_killed_after_each_step_runs_each_step_once(
    queue: Queue, tmp_path: Path, start_service: Callable[..., Service], job_type: str
) -> None:
    job_id = queue.enqueue(job_type, {"dir": str(tmp_path)}, max_attempts=10)
    service = start_service(queue.url, tmp_path, APP)
    for name in ("charge", "call", "mail"):
        marker = f"after-{name}"
        wait_until(lambda: _count(tmp_path, marker) >= 1, what=marker)  # noqa: B023
        worker_id = running_on(queue.url, job_id)
        assert worker_id
        os.kill(service.worker_pids()[worker_id], signal.SIGKILL)
        service.wait_event("worker.jobs_requeued", worker_id=worker_id, timeout=30)
        (tmp_path / f"go-after-{name}").touch()
    wait_until(lambda: _ended(queue, job_id), what="the job ended")
    done = queue.get(job_id)
    assert done.status is JobStatus.COMPLETED, done.last_error
    assert done.result == ["charge done", "call done", "mail done"]
    assert [_count(tmp_path, n) for n in ("charge", "call", "mail")] == [1, 1, 1]
    log = internal.service_ops(queue).step_log(job_id)
    assert [(s.name, s.status) for s in log] == [
        ("charge", "completed"),
        ("call", "completed"),
        ("mail", "completed"),
    ]
    assert service.stop() == 0
    assert_invariants(queue.url)


@pytest.mark.parametrize("job_type", ["ledger", "ledger_sync"])
def test_a_worker_killed_after_each_transaction_step_commits_each_once(
    queue: Queue, tmp_path: Path, start_service: Callable[..., Service], job_type: str
) -> None:
    with queue.transaction() as conn:
        conn.execute("CREATE TABLE ledger (job_id TEXT NOT NULL, step TEXT NOT NULL)")
    job_id = queue.enqueue(job_type, {"dir": str(tmp_path)}, max_attempts=10)
    service = start_service(queue.url, tmp_path, APP)
    for name in ("debit", "credit"):
        marker = f"after-{name}"
        wait_until(lambda: _count(tmp_path, marker) >= 1, what=marker)  # noqa: B023
        worker_id = running_on(queue.url, job_id)
        assert worker_id
        os.kill(service.worker_pids()[worker_id], signal.SIGKILL)  # right after the commit
        service.wait_event("worker.jobs_requeued", worker_id=worker_id, timeout=30)
        (tmp_path / f"go-after-{name}").touch()
    wait_until(lambda: _ended(queue, job_id), what="the job ended")
    done = queue.get(job_id)
    assert done.status is JobStatus.COMPLETED, done.last_error
    assert done.result == ["booked", "booked"]
    (rows,) = query_all(queue.url, ["SELECT job_id, step FROM ledger ORDER BY step DESC"])
    assert [tuple(r) for r in rows] == [(str(job_id), "debit"), (str(job_id), "credit")]
    log = internal.service_ops(queue).step_log(job_id)
    assert [(s.name, s.status) for s in log] == [("debit", "completed"), ("credit", "completed")]
    assert service.stop() == 0
    assert_invariants(queue.url)


@pytest.mark.parametrize("task", ["typed_steps", "typed_steps_sync"])
def test_a_typed_task_takes_steps_and_sleeps_through_current_job(
    queue: Queue, tmp_path: Path, start_service: Callable[..., Service], task: str
) -> None:
    job_id = queue.enqueue(task, {"folder": str(tmp_path)}, max_attempts=1)
    service = start_service(queue.url, tmp_path, APP)
    wait_until(lambda: _ended(queue, job_id), what="the task ended")
    done = queue.get(job_id)
    assert done.status is JobStatus.COMPLETED, done.last_error
    assert done.result == ["charge done", "mail done"]
    assert done.attempts == 1  # the sleep parked it without an attempt
    assert (_count(tmp_path, "charge"), _count(tmp_path, "mail")) == (1, 1)
    log = internal.service_ops(queue).step_log(job_id)
    assert [s.name for s in log] == ["charge", "sleep", "mail"]
    assert service.stop() == 0


@pytest.mark.parametrize("job_type", ["sleeper", "sleeper_sync"])
def test_a_sleep_outlives_a_sigterm_rollout_without_an_attempt(
    queue: Queue, tmp_path: Path, start_service: Callable[..., Service], job_type: str
) -> None:
    job_id = queue.enqueue(job_type, {"dir": str(tmp_path), "seconds": 2})
    first = start_service(queue.url, tmp_path, APP, name="first")
    wait_until(lambda: _parked(queue, job_id), what="the job parked in its sleep")
    assert queue.get(job_id).attempts == 0  # the attempt was given back
    assert first.stop() == 0
    second = start_service(queue.url, tmp_path, APP, name="second")
    wait_until(lambda: _ended(queue, job_id), what="the job ended")
    done = queue.get(job_id)
    assert done.status is JobStatus.COMPLETED, done.last_error
    assert done.attempts == 1  # max_attempts=1: the sleep consumed none
    assert (_count(tmp_path, "before"), _count(tmp_path, "after")) == (1, 1)
    assert second.stop() == 0
    assert_invariants(queue.url)


@pytest.mark.parametrize("job_type", ["approval", "approval_sync"])
def test_signals_before_and_during_the_wait_are_delivered_and_after_it_refused(
    queue: Queue, tmp_path: Path, start_service: Callable[..., Service], job_type: str
) -> None:
    early = queue.enqueue(job_type, {"dir": str(tmp_path / "early")})
    later = queue.enqueue(job_type, {"dir": str(tmp_path / "later")})
    (tmp_path / "early").mkdir()
    (tmp_path / "later").mkdir()
    queue.signal(early, "approved", {"by": "ann"})  # before the job even started
    service = start_service(queue.url, tmp_path, APP)
    wait_until(lambda: _ended(queue, early), what="the early job ended")
    assert queue.get(early).result == {"approved": {"by": "ann"}}
    wait_until(lambda: _parked(queue, later), what="the later job parked in its wait")
    assert queue.get_event(later, "stage") == "asked"
    queue.signal(later, "approved", "yes")
    wait_until(lambda: _ended(queue, later), what="the later job ended")
    done = queue.get(later)
    assert done.status is JobStatus.COMPLETED and done.result == {"approved": "yes"}
    assert done.attempts == 1
    assert _count(tmp_path / "later", "ask") == 1
    with pytest.raises(InvalidArgument, match="completed"):
        queue.signal(later, "approved", "again")
    assert service.stop() == 0
    assert_invariants(queue.url)


def test_a_wait_for_a_signal_times_out(
    queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    job_id = queue.enqueue("approval", {"dir": str(tmp_path), "timeout": 1})
    service = start_service(queue.url, tmp_path, APP)
    wait_until(lambda: _ended(queue, job_id), what="the job ended")
    done = queue.get(job_id)
    assert (done.status, done.result) == (JobStatus.COMPLETED, "timed out")
    assert _count(tmp_path, "ask") == 1
    assert service.stop() == 0


def test_steps_asked_in_another_order_than_the_log_fail_the_job_naming_both(
    queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    job_id = queue.enqueue("reordered", {"dir": str(tmp_path)}, max_attempts=2)
    service = start_service(queue.url, tmp_path, APP)
    wait_until(lambda: _count(tmp_path, "after-first") == 1, what="step a ran")
    (tmp_path / "flip").touch()
    (tmp_path / "go-after-first").touch()
    wait_until(lambda: _ended(queue, job_id), what="the job ended")
    dead = queue.get(job_id)
    assert dead.status is JobStatus.DEAD
    assert dead.last_error is not None
    assert "StepMismatch" in dead.last_error
    assert "'b' in the handler but 'a' in the job's step log" in dead.last_error
    assert _count(tmp_path, "b") == 0  # no stored result went to the wrong step
    assert service.stop() == 0


def test_a_worker_that_lost_its_lease_cannot_record_a_step(
    queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    job_id = queue.enqueue("fenced", {"dir": str(tmp_path)}, max_attempts=5)
    service = start_service(queue.url, tmp_path, APP)
    wait_until(lambda: _count(tmp_path, "after-one") == 1, what="step one recorded")
    # Another claim takes the job over, as after the reaper took it back.
    with queue.transaction() as conn:
        conn.execute(
            "UPDATE jobvisor_jobs SET claim_token = ? WHERE id = ?"
            if queue.engine == "sqlite"
            else "UPDATE jobvisor_jobs SET claim_token = %s WHERE id = %s",
            (
                uuid.uuid4().hex if queue.engine == "sqlite" else uuid.uuid4(),
                str(job_id) if queue.engine == "sqlite" else job_id,
            ),
        )
    (tmp_path / "go-after-one").touch()
    service.wait_event("job.lease_lost", job_id=str(job_id), timeout=30)
    assert _count(tmp_path, "two") == 1  # it ran...
    log = internal.service_ops(queue).step_log(job_id)
    assert [s.name for s in log] == ["one"]  # ...but could not be recorded
    assert job(queue.url, job_id)["status"] == "running"  # the other claim's
    assert service.stop() == 0


def test_a_job_claimed_again_while_its_parked_run_unwinds_completes(
    queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    """A parked job is pending again before the thread that parked it has
    unwound; the worker's bookkeeping of that run must not take the next
    claim's hold or its place with it (the job would stay running)."""
    ids = [queue.enqueue("short_sleeps_sync") for _ in range(10)]
    # One worker: every wake is claimed by the worker whose run parked it.
    service = start_service(queue.url, tmp_path, {**APP, "JOBVISOR_WORKERS": "1"})
    for job_id in ids:
        wait_until(lambda: _ended(queue, job_id), what="the job ended")  # noqa: B023
        done = queue.get(job_id)
        assert done.status is JobStatus.COMPLETED, done.last_error
        assert done.result == 5 and done.attempts == 1
    assert service.stop() == 0
    assert_invariants(queue.url)
