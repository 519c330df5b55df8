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
import importlib
import threading
import traceback
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Final

from django.apps import apps
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import module_has_submodule

from ...queue import placeholders
from ...queue.model import Job, JobStatus
from ...queue.ops import MAX_ERROR_CHARS
from ...queue.validate import short
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
    JobStatus.WAITING: TaskResultStatus.READY,
    JobStatus.RETRYABLE: TaskResultStatus.READY,
    JobStatus.RUNNING: TaskResultStatus.RUNNING,
    JobStatus.COMPLETED: TaskResultStatus.SUCCESSFUL,
    JobStatus.DEAD: TaskResultStatus.FAILED,
    JobStatus.CANCELLED: TaskResultStatus.FAILED,
}

# An error text that names no importable exception (a timeout, a cancel).
UNKNOWN_EXCEPTION: Final = "builtins.Exception"
# The first line of a printed traceback, and how much of an exception's
# message a record's first line keeps.
TRACEBACK_START: Final = "Traceback (most recent call last):\n"
HEAD_CHARS: Final = 1000


# The Django setting that lists task modules beyond the installed apps'
# `tasks` modules.
TASK_MODULES_SETTING: Final = "JOBVISOR_TASK_MODULES"


class TaskNotFound(Exception):
    """A job type that names no task the project declares."""

    def __init__(self, job_type: str) -> None:
        super().__init__(
            f"job type {short(job_type)} is not a task of this project (a @task in an "
            f"installed app's tasks module or in a module {TASK_MODULES_SETTING} lists)"
        )


_declared: dict[str, Any] | None = None
_declaring = threading.Lock()


def declared_tasks() -> Mapping[str, Any]:
    """Every task the project declares, by job type (its module path): the
    `@task` objects at the top level of each installed app's `tasks` module
    and of each module `JOBVISOR_TASK_MODULES` lists. Those modules are
    imported the first time (an error in one propagates, as Django's own
    autodiscovery has it); nothing else is ever imported to find a task.
    `ImproperlyConfigured` when the setting is not a list of module names."""
    global _declared
    with _declaring:
        if _declared is None:
            _declared = _collect(_task_modules())
        return _declared


def _task_modules() -> list[str]:
    listed = getattr(settings, TASK_MODULES_SETTING, ())
    if isinstance(listed, str) or not isinstance(listed, list | tuple):
        raise ImproperlyConfigured(
            f"{TASK_MODULES_SETTING}={listed!r}: expected a list of module names"
        )
    for name in listed:
        if not isinstance(name, str) or not all(p.isidentifier() for p in name.split(".")):
            raise ImproperlyConfigured(
                f"{TASK_MODULES_SETTING}: {name!r} is not a module name (myapp.jobs)"
            )
    found = [
        f"{app.name}.tasks"
        for app in apps.get_app_configs()
        if module_has_submodule(app.module, "tasks")
    ]
    return found + [name for name in listed if name not in found]


def _collect(modules: Sequence[str]) -> dict[str, Any]:
    tasks: dict[str, Any] = {}
    for name in modules:
        module = importlib.import_module(name)
        for value in vars(module).values():
            if isinstance(value, Task):
                tasks.setdefault(value.module_path, value)
    return tasks


def find_task(job_type: str) -> Any:
    """The declared task (see `declared_tasks`) whose module path is
    `job_type`; `TaskNotFound` otherwise. A job type is data: it is looked
    up, never imported, so a job can only ever run a declared task."""
    found = declared_tasks().get(job_type)
    if found is None:
        raise TaskNotFound(job_type)
    return found


def payload(args: Sequence[Any], kwargs: Mapping[str, Any], backend: str) -> dict[str, Any]:
    """The job payload of a task's call."""
    return {"args": list(args), "kwargs": dict(kwargs), "backend": backend}


def call_of(job: Job) -> tuple[list[Any], dict[str, Any]]:
    """(args, kwargs) of a task's job. In a workflow job no longer waiting,
    each placeholder is its parent's result (None for a parent that failed
    under the "run" policy), as the task is called with it."""
    data: Any = job.payload
    parents = placeholders.parent_results(job.meta)
    if job.status is not JobStatus.WAITING and (parents or placeholders.failed_parents(job.meta)):
        data = placeholders.substitute(data, parents)
    data = data if isinstance(data, dict) else {}
    return list(data.get("args") or []), dict(data.get("kwargs") or {})


def failure_record(exc: BaseException, tb: TracebackType | None) -> str:
    """What a task's failed attempt records: one line naming the exception
    by its class's full path and its message's first line (what every
    jobvisor tool shows), then the traceback from `tb` on as
    `traceback.format_exception` prints it, which `TaskResult.errors` hands
    the framework. A traceback too long for the job's error keeps its end."""
    path = f"{type(exc).__module__}.{type(exc).__qualname__}"
    try:
        message = str(exc).strip()
    except Exception:  # an exception that cannot be printed is named by its class
        message = ""
    head = f"{path}: {message.splitlines()[0]}"[:HEAD_CHARS] if message else path
    printed = "".join(traceback.format_exception(type(exc), exc, tb))
    room = MAX_ERROR_CHARS - len(head) - 1
    if len(printed) > room:
        printed = TRACEBACK_START + "  …\n" + printed[-(room - len(TRACEBACK_START) - 4) :]
    return f"{head}\n{printed}"


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


def traceback_of(error: str) -> str:
    """The traceback in an error text: what follows the first line of a
    task's record (see `failure_record`: it ends with a newline, as a
    printed traceback does, and no other error text the worker writes does),
    or else the whole text (a timeout, a cancel, a result that could not be
    stored)."""
    _, _, printed = error.partition("\n")
    return printed if printed.endswith("\n") else error


def _errors(job: Job) -> list[Any]:
    errors = [
        TaskError(
            exception_class_path=exception_path(e["error"]), traceback=traceback_of(e["error"])
        )
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
