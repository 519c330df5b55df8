"""`JOBVISOR_APP=django`: `jobvisor run` runs a Django project's tasks.

Importing this module sets Django up (`django.setup()`, with the settings
module `DJANGO_SETTINGS_MODULE` names) and imports the project's task
modules (each installed app's `tasks` module and those the setting
`JOBVISOR_TASK_MODULES` lists), once in each worker process. Its `registry`
then holds one handler per `@task` found there, under the task's module path
(`myapp.tasks.send_email`, as `JobvisorBackend` enqueues it), and runs
nothing else: a job whose type names no declared task fails with
`TaskNotFound`, and nothing is imported on its account.

A handler calls its task with the job's arguments, with a `TaskContext`
first when the task `takes_context`. What the task returns, made JSON as
the framework makes it, is the job's result (`TaskResult.return_value`);
a value that is not JSON fails the attempt with `TypeError` (a type JSON
lacks) or `ValueError` (a value jobvisor cannot store: NaN, a NUL, too
large). Whatever the task raises, `SystemExit` and `KeyboardInterrupt`
included, fails that attempt and nothing else; the job's error names the
exception's class by its full path and holds its traceback as Python prints
it (`results.failure_record`).

A plain function runs in the worker's thread pool, its database connections
handled as in a request (`close_old_connections` before and after); an
`async def` task runs on the worker's event loop. The framework's
`task_started` signal is sent before each attempt, `task_finished` once the
attempt's outcome is known: after a success whose value will be stored, or
after a last failed attempt (with its error in `errors`).
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any

import django
from django.core.exceptions import ImproperlyConfigured
from django.db import close_old_connections
from django.utils import timezone

from ...handler import AttemptFailed, Handler, JobContext
from ...queue import validate
from ...queue.errors import InvalidArgument
from ...queue.ops import result_json
from ...worker.registry import Registry
from .backend import JobvisorBackend
from .compat import (
    TaskContext,
    TaskError,
    TaskResultStatus,
    normalize_json,
    set_frozen,
    task_finished,
    task_started,
)
from .results import (
    TaskNotFound,
    call_of,
    declared_tasks,
    exception_path,
    failure_record,
    task_result,
    traceback_of,
)

if not os.environ.get("DJANGO_SETTINGS_MODULE"):
    raise ImproperlyConfigured(
        "DJANGO_SETTINGS_MODULE is not set: JOBVISOR_APP=django needs the project's settings"
    )
django.setup()


def storable(value: Any, max_bytes: int) -> Any:
    """A task's return value as its job stores it: JSON as the framework
    normalises it (a tuple becomes a list), checked as the worker will store
    it. `TypeError` for a type JSON lacks, `ValueError` for a value jobvisor
    cannot store (NaN or infinity, a NUL, a lone surrogate, past `max_bytes`)."""
    value = normalize_json(value)
    try:
        result_json(value, max_bytes)
    except InvalidArgument as exc:
        raise ValueError(str(exc)) from None
    return value


def _task_frames(exc: BaseException) -> TracebackType | None:
    """The traceback of an exception caught by a runner, from the task's
    frame on (the runner's own frame is the first)."""
    tb = exc.__traceback__
    return tb.tb_next if tb is not None else None


class _Attempt:
    """One run of a task for a job: its TaskResult, the call's arguments,
    and the signals around it."""

    def __init__(self, task: Any, job: JobContext, max_result_bytes: int) -> None:
        self.task, self.job, self.max_result_bytes = task, job, max_result_bytes
        backend = job.payload.get("backend") if isinstance(job.payload, dict) else None
        self.result = task_result(job.job, task, str(backend or task.backend))
        self.args, self.kwargs = call_of(job.job)
        if task.takes_context:
            self.args.insert(0, TaskContext(task_result=self.result))
        task_started.send(JobvisorBackend, task_result=self.result)

    def returned(self, value: Any) -> Any:
        """The value to store; `AttemptFailed` when it cannot be stored."""
        try:
            stored = storable(value, self.max_result_bytes)
        except (TypeError, ValueError) as exc:
            raise self.failed(exc, None) from exc
        self._finish(TaskResultStatus.SUCCESSFUL, stored)
        return stored

    def failed(self, exc: BaseException, tb: TracebackType | None) -> AttemptFailed:
        """The failure to raise for `exc`; the signal when it was the last attempt."""
        record = failure_record(exc, tb)
        if self.job.attempt >= self.job.max_attempts:
            error = TaskError(
                exception_class_path=exception_path(record), traceback=traceback_of(record)
            )
            self.result.errors.append(error)
            self._finish(TaskResultStatus.FAILED, None)
        return AttemptFailed(record)

    def _finish(self, status: Any, value: Any) -> None:
        set_frozen(self.result, "status", status)
        set_frozen(self.result, "finished_at", timezone.now())
        set_frozen(self.result, "_return_value", value)
        task_finished.send(JobvisorBackend, task_result=self.result)


def _sync_runner(task: Any, max_result_bytes: int) -> Callable[[JobContext], Any]:
    def run(job: JobContext) -> Any:
        close_old_connections()
        try:
            attempt = _Attempt(task, job, max_result_bytes)
            try:
                value = task.func(*attempt.args, **attempt.kwargs)
            except BaseException as exc:  # the task's, whatever it is: this attempt fails
                raise attempt.failed(exc, _task_frames(exc)) from exc
            return attempt.returned(value)
        finally:
            close_old_connections()

    return run


def _async_runner(task: Any, max_result_bytes: int) -> Callable[[JobContext], Awaitable[Any]]:
    async def run(job: JobContext) -> Any:
        attempt = _Attempt(task, job, max_result_bytes)
        try:
            value = await task.func(*attempt.args, **attempt.kwargs)
        except asyncio.CancelledError:
            raise  # the worker stopped it: a cancel, a lost lease, the drain
        except BaseException as exc:  # the task's, whatever it is: this attempt fails
            raise attempt.failed(exc, _task_frames(exc)) from exc
        return attempt.returned(value)

    return run


async def _not_found(job: JobContext) -> Any:
    raise TaskNotFound(job.job_type)


class DjangoTasks(Registry):
    """A `Registry` with a handler for each task the project declares, by
    its module path (`add_tasks`), beside the handlers registered on it by
    name (`@registry.handler`), which run as in any registry. A job of any
    other type fails with `TaskNotFound`."""

    def __init__(self) -> None:
        super().__init__()
        self.max_result_bytes = validate.max_result_bytes()

    def add_tasks(self, tasks: Mapping[str, Any]) -> None:
        """Register a handler for each task of `{job_type: task}`."""
        for job_type, task in tasks.items():
            make = _async_runner if inspect.iscoroutinefunction(task.func) else _sync_runner
            self.add(job_type, make(task, self.max_result_bytes))

    def get(self, job_type: str) -> Handler | None:
        handler = super().get(job_type)
        if handler is None:
            return Handler(job_type=job_type, func=_not_found, is_async=True)
        return handler

    def runnable_types(self) -> frozenset[str] | None:
        # Any type is claimed: one naming no declared task fails with
        # `TaskNotFound`, as Django's framework expects of a backend, rather
        # than waiting unclaimed for a worker that will never know it.
        return None

    @property
    def needs_threads(self) -> bool:
        return True  # a worker's slots as for plain functions, whatever the tasks are


registry = DjangoTasks()
registry.add_tasks(declared_tasks())
