"""How a jobvisor job reads as a Django `TaskResult`, and what a task's
enqueue writes into a job.

A Django task is a job whose `job_type` is the task function's module path
(`myapp.tasks.send_email`) and whose payload holds the call:
`{"args": [...], "kwargs": {...}, "backend": "default"}`. Its priority is
Django's own (-100..100, higher first, as jobvisor orders them), its queue
the task's `queue_name`, its `run_at` the task's `run_after`, and its id the
result id. Statuses map as follows (Django has no "cancelled"):

    pending, retryable -> READY       running -> RUNNING
    completed -> SUCCESSFUL           dead, cancelled -> FAILED
"""

from __future__ import annotations

import builtins
import contextlib
from collections.abc import Mapping, Sequence
from typing import Any, Final

from django.utils.module_loading import import_string

from ...queue.model import Job, JobStatus
from .compat import (
    InvalidTask,
    Task,
    TaskError,
    TaskResult,
    TaskResultStatus,
    set_frozen,
)

STATUS: Final[Mapping[JobStatus, Any]] = {
    JobStatus.PENDING: TaskResultStatus.READY,
    JobStatus.RETRYABLE: TaskResultStatus.READY,
    JobStatus.RUNNING: TaskResultStatus.RUNNING,
    JobStatus.COMPLETED: TaskResultStatus.SUCCESSFUL,
    JobStatus.DEAD: TaskResultStatus.FAILED,
    JobStatus.CANCELLED: TaskResultStatus.FAILED,
}

# An error text that names no importable exception (a timeout, a cancel).
UNKNOWN_EXCEPTION: Final = "builtins.Exception"


class TaskNotFound(Exception):
    """A job type that names no Django task this process can import."""


def import_task(path: str) -> Any:
    """The `Task` at `path`: a module-level function decorated with `@task`.
    `TaskNotFound` when it cannot be imported or is something else: a job
    type is data, so nothing but a declared task is ever called by it."""
    try:
        found = import_string(path)
    except ImportError as exc:
        raise TaskNotFound(f"cannot import the task {path!r}: {exc}") from exc
    if not isinstance(found, Task):
        raise TaskNotFound(f"{path!r} is {type(found).__name__}, not a task (@task)")
    return found


def payload(args: Sequence[Any], kwargs: Mapping[str, Any], backend: str) -> dict[str, Any]:
    """The job payload of a task's call."""
    return {"args": list(args), "kwargs": dict(kwargs), "backend": backend}


def call_of(job: Job) -> tuple[list[Any], dict[str, Any]]:
    """(args, kwargs) of a task's job."""
    data = job.payload if isinstance(job.payload, dict) else {}
    return list(data.get("args") or []), dict(data.get("kwargs") or {})


def exception_path(error: str) -> str:
    """The exception class an error text names on its first line: a full
    path as the worker writes it for a task (`myapp.errors.Refused: …`), a
    built-in exception's name, or else `builtins.Exception`."""
    name = error.split("\n", 1)[0].split(":", 1)[0].strip()
    if "." in name and all(part.isidentifier() for part in name.split(".")):
        return name
    found = getattr(builtins, name, None) if name.isidentifier() else None
    if isinstance(found, type) and issubclass(found, BaseException):
        return f"builtins.{name}"
    return UNKNOWN_EXCEPTION


def _errors(job: Job) -> list[Any]:
    errors = [
        TaskError(exception_class_path=exception_path(e["error"]), traceback=e["error"])
        for e in job.errors
    ]
    recorded = {e["attempt"] for e in job.errors}
    ended = job.status in (JobStatus.DEAD, JobStatus.CANCELLED)
    if ended and job.last_error and job.attempts not in recorded:
        # A cancel, or an end no attempt recorded: still the task's last error.
        errors.append(TaskError(exception_class_path=UNKNOWN_EXCEPTION, traceback=job.last_error))
    return errors


def worker_ids(job: Job) -> list[str]:
    """One worker id per attempt, oldest first (so `TaskResult.attempts` is
    the job's attempts): those the error history names, then the current
    worker; an attempt whose worker is no longer known shows as ""."""
    by_attempt = {e["attempt"]: e["worker_id"] for e in job.errors}
    if job.worker_id and job.attempts and job.attempts not in by_attempt:
        by_attempt[job.attempts] = job.worker_id
    return [str(by_attempt.get(n) or "") for n in range(1, job.attempts + 1)]


def _task_as_enqueued(task: Any, job: Job, backend: str) -> Any:
    """The task with the options its job was enqueued with, on `backend` (so
    `refresh()` asks the backend that read it); the task as declared when
    the backend refuses them now (its QUEUES changed since)."""
    with contextlib.suppress(InvalidTask):
        return task.using(priority=job.priority, queue_name=job.queue, backend=backend)
    return task


def task_result(job: Job, task: Any, backend: str) -> Any:
    """The `TaskResult` of `job`, a job of `task`."""
    args, kwargs = call_of(job)
    result = TaskResult(
        task=_task_as_enqueued(task, job, backend),
        id=str(job.id),
        status=STATUS[job.status],
        enqueued_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        last_attempted_at=job.started_at,
        args=args,
        kwargs=kwargs,
        backend=backend,
        errors=_errors(job),
        worker_ids=worker_ids(job),
    )
    if job.status is JobStatus.COMPLETED:
        set_frozen(result, "_return_value", job.result)
    return result
