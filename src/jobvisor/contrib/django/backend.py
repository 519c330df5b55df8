"""`JobvisorBackend`: Django's Tasks framework on jobvisor's queue.

    TASKS = {
        "default": {
            "BACKEND": "jobvisor.contrib.django.JobvisorBackend",
            "QUEUES": ["default", "mail"],         # the framework's own; [] allows any
            "OPTIONS": {"DATABASE": "default", "MAX_ATTEMPTS": 1},
        }
    }

An enqueue is one INSERT on Django's own connection to `DATABASE` (an alias
of `DATABASES`, PostgreSQL through psycopg 3 or SQLite), inside whatever
transaction that connection has open: a task enqueued in `transaction.atomic()`
exists if and only if the block commits, with no `on_commit` hook to lose
it in between. Results are read back on the same connection. The jobs run in
`jobvisor run` with `JOBVISOR_APP=django` (see `jobvisor.contrib.django.worker`)
against the same database, migrated by `jobvisor migrate`.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connections
from django.utils import timezone

from ...queue import validate
from ...queue.api import Queue, borrow
from ...queue.errors import InvalidArgument, JobNotFound
from .compat import (
    BaseTaskBackend,
    InvalidTask,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    normalize_json,
    set_frozen,
    task_enqueued,
)
from .results import TaskNotFound, find_task, payload, task_result

# Django's database vendors jobvisor has an engine for.
ENGINES: Final = {"postgresql": "postgres", "sqlite": "sqlite"}
# A task that raises is FAILED at once, as the framework's own backends have
# it; MAX_ATTEMPTS above 1 retries it (READY in between) with backoff.
DEFAULT_MAX_ATTEMPTS: Final = 1


class JobvisorBackend(BaseTaskBackend):  # type: ignore[misc]
    """A task backend that stores tasks as jobvisor jobs. It supports
    `run_after`, priorities, async tasks and results from any process."""

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: Mapping[str, Any]) -> None:
        super().__init__(alias, params)
        options = self.options
        self.database: str = options.get("DATABASE", DEFAULT_DB_ALIAS)
        try:
            self.max_attempts = validate.count(
                "MAX_ATTEMPTS", options.get("MAX_ATTEMPTS", DEFAULT_MAX_ATTEMPTS), high=1000
            )
        except InvalidArgument as exc:
            raise ImproperlyConfigured(f"TASKS[{alias!r}]['OPTIONS']: {exc}") from None
        self._queue: Queue | None = None

    # --- the connection -----------------------------------------------------------

    def _engine(self) -> str:
        vendor = connections[self.database].vendor
        if vendor not in ENGINES:
            raise ImproperlyConfigured(
                f"TASKS[{self.alias!r}]: database {self.database!r} is {vendor}; "
                "expected PostgreSQL or SQLite"
            )
        return ENGINES[vendor]

    def _connection(self) -> Any:
        """Django's driver connection to `DATABASE` for this thread, opened if need be."""
        wrapper = connections[self.database]
        wrapper.ensure_connection()
        return wrapper.connection

    @property
    def queue(self) -> Queue:
        """The jobvisor queue on Django's connection (see `jobvisor.queue.api.borrow`)."""
        if self._queue is None:
            self._queue = borrow(self._connection, engine=self._engine())
        return self._queue

    # --- the framework's contract ---------------------------------------------------

    def validate_task(self, task: Any) -> None:
        """The framework's checks (module-level function, priority -100..100,
        a queue among QUEUES, an aware `run_after`), and a queue name jobvisor
        takes. `InvalidTask` (the backport's `InvalidTaskError`) otherwise."""
        super().validate_task(task)
        try:
            validate.name("queue_name", task.queue_name)
        except InvalidArgument as exc:
            raise InvalidTask(str(exc)) from None

    def enqueue(self, task: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        """Write the task's job in Django's current transaction; its result,
        READY, enqueued at the job's `created_at`. Arguments of a type JSON
        lacks raise `TypeError`, as the framework does; values jobvisor
        cannot store (NaN or infinity, a NUL, a lone surrogate, past the
        payload's size) `ValueError`; both before anything is written."""
        self.validate_task(task)
        result = TaskResult(
            task=task,
            id="",
            status=TaskResultStatus.READY,
            enqueued_at=None,
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=args,
            kwargs=kwargs,
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )  # normalises the arguments to JSON, or raises
        job = self._job(task, result.args, result.kwargs)
        try:
            job_id = self.queue.enqueue(job.pop("job_type"), job.pop("payload"), **job)
        except InvalidArgument as exc:  # the task and its options passed: the arguments
            raise ValueError(f"{task.module_path}: {exc}") from None
        set_frozen(result, "id", str(job_id))
        # The job's own time, as `get_result` reads it back (the same row,
        # on the same connection: it sees the row before the commit too).
        set_frozen(result, "enqueued_at", self.queue.get(job_id).created_at)
        task_enqueued.send(type(self), task_result=result)
        return result

    def workflow_job(
        self, task: Any, args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> dict[str, Any]:
        """A workflow node of `task` called with `args` and `kwargs`
        (`jobvisor.Workflow.add(task, ...)` asks the task's backend): the
        job `enqueue` would write, as `enqueue`'s arguments, written with the
        workflow. A placeholder among the arguments (a node's `result`) is a
        JSON object and passes as it is; the worker puts the parent's result
        in its place before the task is called. The task's checks and the
        arguments' `TypeError` as in `enqueue`."""
        self.validate_task(task)
        return self._job(task, normalize_json(list(args)), normalize_json(dict(kwargs)))

    def _job(self, task: Any, args: Any, kwargs: Any) -> dict[str, Any]:
        """`enqueue`'s arguments for a call of `task` (arguments made JSON)."""
        return {
            "job_type": task.module_path,
            "payload": payload(args, kwargs, self.alias),
            "queue": task.queue_name,
            "priority": task.priority,
            "run_at": _aware(task.run_after),
            "max_attempts": self.max_attempts,
        }

    def get_result(self, result_id: str) -> Any:
        """The task's result as the queue has it now; `TaskResultDoesNotExist`
        for an id no job has, or a job whose type is not a task the project
        declares (`results.declared_tasks`: a job type is looked up, never
        imported)."""
        try:
            job = self.queue.get(uuid.UUID(str(result_id)))
        except (ValueError, JobNotFound):
            raise TaskResultDoesNotExist(result_id) from None
        try:
            task = find_task(job.job_type)
        except TaskNotFound as exc:
            raise TaskResultDoesNotExist(f"{result_id}: {exc}") from None
        return task_result(job, task, self.alias)

    def check(self, **kwargs: Any) -> Iterable[checks.CheckMessage]:
        yield from super().check(**kwargs)
        if self.database not in connections:
            yield checks.Error(
                f"TASKS[{self.alias!r}]['OPTIONS']['DATABASE']={self.database!r} "
                "is not in DATABASES",
                id="jobvisor.E001",
            )
            return
        vendor = connections[self.database].vendor
        if vendor not in ENGINES:
            yield checks.Error(
                f"TASKS[{self.alias!r}]: database {self.database!r} is {vendor}; "
                "jobvisor runs on PostgreSQL or SQLite",
                id="jobvisor.E002",
            )


def _aware(when: dt.datetime | None) -> dt.datetime | None:
    """`run_after` as jobvisor takes it: aware (a naive one, allowed when
    USE_TZ is off, is in Django's current time zone)."""
    if when is None or timezone.is_aware(when):
        return when
    aware: dt.datetime = timezone.make_aware(when)
    return aware
