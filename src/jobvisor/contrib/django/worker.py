"""`JOBVISOR_APP=django`: `jobvisor run` runs a Django project's tasks.

Importing this module sets Django up (`django.setup()`, with the settings
module `DJANGO_SETTINGS_MODULE` names), once in each worker process; its
`registry` then runs any job whose type is the module path of a Django task
(`myapp.tasks.send_email`, as `JobvisorBackend` enqueues it): it imports the
task, checks that it is one (`@task`), and calls it with the job's arguments,
and with a `TaskContext` first when the task `takes_context`. What the task
returns is the job's result (`TaskResult.return_value`); what it raises fails
the attempt, the error recorded under the exception class's full path.

A plain function runs in the worker's thread pool, its database connections
handled as in a request (`close_old_connections` before and after); an
`async def` task runs on the worker's event loop. The framework's
`task_started` signal is sent before each attempt, `task_finished` after a
success or a last failed attempt.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Awaitable, Callable
from typing import Any

import django
from django.core.exceptions import ImproperlyConfigured
from django.db import close_old_connections

from ...queue.errors import InvalidArgument
from ...worker.handler import Handler, JobContext
from ...worker.registry import Registry
from .backend import JobvisorBackend
from .compat import TaskContext, TaskResultStatus, set_frozen, task_finished, task_started
from .results import TaskNotFound, call_of, import_task, task_result

if not os.environ.get("DJANGO_SETTINGS_MODULE"):
    raise ImproperlyConfigured(
        "DJANGO_SETTINGS_MODULE is not set: JOBVISOR_APP=django needs the project's settings"
    )
django.setup()


class TaskRaised(Exception):
    """A task's exception, as its job records it: its class is named by the
    full path of the exception's class, so the error's first line reads
    `myapp.errors.Refused: …` and `TaskResult.errors` can name it."""


_RAISED: dict[str, type[TaskRaised]] = {}


def _recorded(exc: Exception) -> TaskRaised:
    path = f"{type(exc).__module__}.{type(exc).__qualname__}"
    kind = _RAISED.get(path)
    if kind is None:
        kind = _RAISED.setdefault(path, type(path, (TaskRaised,), {}))
    return kind(str(exc)).with_traceback(exc.__traceback__)


class _Attempt:
    """One run of a task for a job: its TaskResult, the call's arguments,
    and the signals around it."""

    def __init__(self, task: Any, job: JobContext) -> None:
        self.task, self.job = task, job
        backend = job.payload.get("backend") if isinstance(job.payload, dict) else None
        self.result = task_result(job.job, task, str(backend or task.backend))
        self.args, self.kwargs = call_of(job.job)
        if task.takes_context:
            self.args.insert(0, TaskContext(task_result=self.result))
        task_started.send(JobvisorBackend, task_result=self.result)

    def succeeded(self, value: Any) -> Any:
        self._finish(TaskResultStatus.SUCCESSFUL, value)
        return value

    def failed(self, exc: Exception) -> TaskRaised:
        if self.job.attempt >= self.job.max_attempts:
            self._finish(TaskResultStatus.FAILED, None)
        return _recorded(exc)

    def _finish(self, status: Any, value: Any) -> None:
        set_frozen(self.result, "status", status)
        set_frozen(self.result, "_return_value", value)
        task_finished.send(JobvisorBackend, task_result=self.result)


def _sync_runner(task: Any) -> Callable[[JobContext], Any]:
    def run(job: JobContext) -> Any:
        close_old_connections()
        try:
            attempt = _Attempt(task, job)
            try:
                value = task.func(*attempt.args, **attempt.kwargs)
            except Exception as exc:
                raise attempt.failed(exc) from exc
            return attempt.succeeded(value)
        finally:
            close_old_connections()

    return run


def _async_runner(task: Any) -> Callable[[JobContext], Awaitable[Any]]:
    async def run(job: JobContext) -> Any:
        attempt = _Attempt(task, job)
        try:
            value = await task.func(*attempt.args, **attempt.kwargs)
        except Exception as exc:
            raise attempt.failed(exc) from exc
        return attempt.succeeded(value)

    return run


def _missing(error: TaskNotFound) -> Callable[[JobContext], Any]:
    def run(job: JobContext) -> Any:
        raise error

    return run


class DjangoTasks(Registry):
    """A `Registry` that knows every Django task by its module path, the
    first time a job of it is claimed; the handlers registered on it by name
    (`@registry.handler`) run as in any registry."""

    def get(self, job_type: str) -> Handler | None:
        handler = super().get(job_type)
        if handler is not None or "." not in job_type:
            return handler
        try:
            task = import_task(job_type)
        except TaskNotFound as exc:
            # Not kept: the next job of this type tries the import again.
            return Handler(job_type=job_type, func=_missing(exc), is_async=False)
        runner = (
            _async_runner(task) if inspect.iscoroutinefunction(task.func) else _sync_runner(task)
        )
        try:
            return self.add(job_type, runner)
        except InvalidArgument:
            return None

    def runnable_types(self) -> frozenset[str] | None:
        return None  # any module path may name a task: resolved once claimed

    @property
    def needs_threads(self) -> bool:
        return True  # tasks that are plain functions are known only once claimed


registry = DjangoTasks()
