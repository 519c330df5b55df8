"""How a job reads as a Django `TaskResult`, on jobs as the queue returns
them in each status: the status mapping, errors by class path, one worker id
per attempt, the result only once completed."""

from __future__ import annotations

import datetime as dt
import traceback
import uuid
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from jobvisor import JobStatus
from jobvisor.contrib.django.compat import TaskResultStatus
from jobvisor.contrib.django.results import (
    _task_modules,
    declared_tasks,
    exception_path,
    failure_record,
    task_result,
    traceback_of,
    worker_ids,
)
from jobvisor.queue.model import Job
from jobvisor.queue.ops import MAX_ERROR_CHARS
from tests.django_project.shop import tasks

T0 = dt.datetime(2026, 12, 2, 12, 0, tzinfo=dt.UTC)


def _job(status: JobStatus, attempts: int, **fields: Any) -> Job:
    values: dict[str, Any] = {
        "id": uuid.uuid4(),
        "queue": "default",
        "job_type": "tests.django_project.shop.tasks.reserve",
        "payload": {"args": ["tea"], "kwargs": {}, "backend": "default"},
        "priority": 0,
        "run_at": T0,
        "status": status,
        "attempts": attempts,
        "max_attempts": 3,
        "last_error": None,
        "correlation_id": None,
        "dedupe_key": None,
        "lease_expires_at": None,
        "claim_token": None,
        "worker_id": None,
        "created_at": T0,
        "started_at": None,
        "finished_at": None,
    }
    values.update(fields)
    return Job(**values)


def _error(attempt: int, text: str, worker: str) -> dict[str, Any]:
    return {"attempt": attempt, "at": T0, "error": text, "worker_id": worker}


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (JobStatus.PENDING, TaskResultStatus.READY),
        (JobStatus.RETRYABLE, TaskResultStatus.READY),
        (JobStatus.RUNNING, TaskResultStatus.RUNNING),
        (JobStatus.COMPLETED, TaskResultStatus.SUCCESSFUL),
        (JobStatus.DEAD, TaskResultStatus.FAILED),
        (JobStatus.CANCELLED, TaskResultStatus.FAILED),
    ],
)
def test_each_status_maps(status: JobStatus, expected: Any) -> None:
    result = task_result(_job(status, 0), tasks.reserve, "default")
    assert result.status == expected


def test_a_retried_job_is_ready_with_its_errors_and_workers() -> None:
    job = _job(
        JobStatus.RETRYABLE,
        2,
        worker_id="w-b",
        errors=(
            _error(1, "tests.django_project.shop.tasks.OutOfStock: no tea\n  File …", "w-a"),
            _error(2, "TimeoutError: ran past its 5s timeout", "w-b"),
        ),
    )
    result = task_result(job, tasks.reserve, "default")
    assert result.status == TaskResultStatus.READY
    assert [e.exception_class for e in result.errors] == [tasks.OutOfStock, TimeoutError]
    assert result.worker_ids == ["w-a", "w-b"] and result.attempts == 2
    with pytest.raises(ValueError, match="not finished"):
        result.return_value  # noqa: B018 - the framework raises before the end


def test_a_running_attempt_is_counted_with_its_worker() -> None:
    job = _job(JobStatus.RUNNING, 3, worker_id="w-c", errors=(_error(1, "x", "w-a"),))
    assert worker_ids(job) == ["w-a", "", "w-c"]  # attempt 2's worker is no longer known


def test_a_completed_job_has_its_result() -> None:
    job = _job(JobStatus.COMPLETED, 1, worker_id="w-a", result={"ok": True}, finished_at=T0)
    result = task_result(job, tasks.reserve, "pg")
    assert result.return_value == {"ok": True}
    assert (result.backend, result.task.backend, result.args) == ("pg", "pg", ["tea"])


def test_a_cancel_is_the_last_error_of_a_failed_result() -> None:
    job = _job(JobStatus.CANCELLED, 0, last_error="cancelled by ops@host")
    [error] = task_result(job, tasks.reserve, "default").errors
    assert (error.exception_class_path, error.traceback) == (
        "builtins.Exception",
        "cancelled by ops@host",
    )


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("myapp.errors.Refused: no", "myapp.errors.Refused"),
        ("ValueError: bad\n  File x", "builtins.ValueError"),
        ("KeyError", "builtins.KeyError"),
        ("InvalidResult: not JSON", "builtins.Exception"),
        ("no handler registered for job type 'x'", "builtins.Exception"),
        ("", "builtins.Exception"),
        ("print: not an exception", "builtins.Exception"),
    ],
)
def test_the_exception_class_an_error_names(text: str, path: str) -> None:
    assert exception_path(text) == path


def _raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:
        return caught


def test_a_record_names_the_class_then_holds_pythons_traceback() -> None:
    exc = _raised(tasks.OutOfStock("no tea\nat all"))
    record = failure_record(exc, exc.__traceback__)
    head, _, rest = record.partition("\n")
    assert head == "tests.django_project.shop.tasks.OutOfStock: no tea"
    assert rest == "".join(traceback.format_exception(exc))
    assert exception_path(record) == "tests.django_project.shop.tasks.OutOfStock"
    assert traceback_of(record) == rest


def test_a_record_too_long_keeps_the_end_of_its_traceback() -> None:
    exc = _raised(ValueError("x" * 20_000))
    record = failure_record(exc, exc.__traceback__)
    assert len(record) <= MAX_ERROR_CHARS
    printed = traceback_of(record)
    assert printed.startswith("Traceback (most recent call last):\n  …\n")
    assert printed.endswith("x" * 100 + "\n")


@pytest.mark.parametrize(
    "text", ["TimeoutError: add ran past its 5s timeout", "x: y\n  File a.py, line 1"]
)
def test_an_error_the_worker_wrote_itself_is_its_own_traceback(text: str) -> None:
    assert traceback_of(text) == text


def test_the_declared_tasks_are_the_apps_and_the_settings() -> None:
    declared = declared_tasks()
    assert declared["tests.django_project.shop.tasks.add"] is tasks.add
    assert "tests.django_project.shop.extra.shout" in declared
    assert not any(name.startswith("tests.django_project.shop.undeclared") for name in declared)


@pytest.mark.parametrize("value", ["myapp.tasks", ["my app"], [3], None])
def test_task_modules_that_are_not_module_names_are_a_configuration_error(value: object) -> None:
    with (
        override_settings(JOBVISOR_TASK_MODULES=value),
        pytest.raises(ImproperlyConfigured, match="JOBVISOR_TASK_MODULES"),
    ):
        _task_modules()
