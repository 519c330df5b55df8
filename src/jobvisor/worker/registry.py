"""Handlers by job type: the `Registry` an app fills, and `load_app`, which
imports it.

    registry = Registry()

    @registry.handler("send_email", timeout=30, max_attempts=5)
    async def send_email(job: JobContext) -> None:
        await mailer.send(job.payload["to"], ...)

An `async def` handler runs on the worker's event loop; a plain function runs
in the worker's thread pool (one thread per concurrency slot), so blocking
code never stalls the loop. Returning means the job is completed, and what it
returns (JSON) is stored as the job's result; raising means this attempt failed.

`@registry.task` registers a function with typed arguments instead of a raw
handler: see `jobvisor.tasks`.

What a handler is and sees of its job (`Handler`, `JobContext`, `Snooze`,
`Cancel`): see `jobvisor.handler`.
"""

from __future__ import annotations

import datetime as dt
import importlib
import inspect
from collections.abc import Callable, Iterator
from typing import Any, ParamSpec, TypeVar, overload

from ..handler import Handler, HandlerFunc
from ..queue import validate
from ..queue.api import AsyncQueue, Queue
from ..queue.errors import InvalidArgument, JobvisorError
from ..queue.model import (
    DEFAULT_QUEUE,
    Limit,
    LimitScope,
    LimitSource,
    OnConflict,
    RetryPolicy,
    Unique,
)
from ..queue.workflows import WorkflowSpec
from ..schedules import InvalidSchedule, ScheduleSpec
from ..tasks import Task
from .workflow_ticks import WORKFLOW_TICK, WorkflowTicks, check_builder

F = TypeVar("F", bound=Callable[..., Any])
P = ParamSpec("P")
R = TypeVar("R")
Q = TypeVar("Q", "Queue", "AsyncQueue")


class InvalidLimit(InvalidArgument):
    """A handler's declared limit is refused (`jobvisor run` exits 78)."""


def _declared_limit(
    job_type: str,
    concurrency: int | None,
    key_concurrency: int | None,
    rate: str | None,
    key_rate: str | None,
) -> Limit | None:
    """A handler's fleet-wide limits, checked; None when it declares none."""
    if concurrency is None and key_concurrency is None and rate is None and key_rate is None:
        return None
    try:
        validate.fleet_limit("concurrency", concurrency)
        validate.fleet_limit("key_concurrency", key_concurrency)
        validate.rate("rate", rate)
        validate.rate("key_rate", key_rate)
    except InvalidArgument as exc:
        raise InvalidLimit(f"handler for {job_type!r}: {exc}") from None
    return Limit(
        LimitScope.TYPE,
        job_type,
        concurrency,
        key_concurrency,
        rate,
        LimitSource.CODE,
        key_rate=key_rate,
    )


def _optional_seconds(name: str, value: float | None) -> float | None:
    if value is None:
        return None
    return validate.seconds(name, value, positive=True, high=validate.MAX_INTERVAL)


class Registry:
    """The job types a worker can run, each with its handler and options."""

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}
        self._schedules: dict[str, ScheduleSpec] = {}
        self._tasks: dict[str, Task[Any, Any]] = {}
        self._bound: dict[type, Queue | AsyncQueue] = {}
        self._workflow_ticks = WorkflowTicks()

    def handler(
        self,
        job_type: str,
        *,
        timeout: float | None = None,
        hard_timeout: float | None = None,
        max_attempts: int | None = None,
        retry: RetryPolicy | None = None,
        concurrency: int | None = None,
        key_concurrency: int | None = None,
        rate: str | None = None,
        key_rate: str | None = None,
        unique: Unique | None = None,
        on_conflict: OnConflict | str | None = None,
    ) -> Callable[[F], F]:
        """Register the decorated function as the handler of `job_type`.
        See `Handler` for the options; bad ones raise `InvalidArgument`
        (`InvalidLimit` for a bad limit)."""

        def register(func: F) -> F:
            self.add(
                job_type,
                func,
                timeout=timeout,
                hard_timeout=hard_timeout,
                max_attempts=max_attempts,
                retry=retry,
                concurrency=concurrency,
                key_concurrency=key_concurrency,
                rate=rate,
                key_rate=key_rate,
                unique=unique,
                on_conflict=on_conflict,
            )
            return func

        return register

    def add(
        self,
        job_type: str,
        func: HandlerFunc,
        *,
        timeout: float | None = None,
        hard_timeout: float | None = None,
        max_attempts: int | None = None,
        retry: RetryPolicy | None = None,
        concurrency: int | None = None,
        key_concurrency: int | None = None,
        rate: str | None = None,
        key_rate: str | None = None,
        unique: Unique | None = None,
        on_conflict: OnConflict | str | None = None,
    ) -> Handler:
        """Register `func` for `job_type` (the decorator's plain form)."""
        validate.name("job_type", job_type)
        if job_type in self._handlers:
            raise InvalidArgument(f"job_type={job_type!r}: a handler is already registered")
        if not callable(func):
            raise InvalidArgument(f"handler for {job_type!r}: {func!r} is not callable")
        soft = _optional_seconds("timeout", timeout)
        hard = _optional_seconds("hard_timeout", hard_timeout)
        if soft is not None and hard is not None and hard < soft:
            raise InvalidArgument(
                f"hard_timeout={hard_timeout!r}: expected at least timeout={timeout!r}"
            )
        if max_attempts is not None:
            validate.count("max_attempts", max_attempts, high=validate.MAX_INT32)
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise InvalidArgument(f"retry={retry!r}: expected a jobvisor.RetryPolicy")
        limit = _declared_limit(job_type, concurrency, key_concurrency, rate, key_rate)
        handler = Handler(
            job_type=job_type,
            func=func,
            is_async=inspect.iscoroutinefunction(func),
            timeout=soft,
            hard_timeout=hard,
            max_attempts=max_attempts,
            retry=retry,
            limit=limit,
            **_unique_defaults(unique, on_conflict),
        )
        self._handlers[job_type] = handler
        return handler

    @overload
    def task(self, func: Callable[P, R], /) -> Task[P, R]: ...

    @overload
    def task(
        self,
        name: str | None = None,
        *,
        queue: str = DEFAULT_QUEUE,
        priority: int = 0,
        max_attempts: int | None = None,
        timeout: float | None = None,
        hard_timeout: float | None = None,
        retry: RetryPolicy | None = None,
        concurrency: int | None = None,
        key_concurrency: int | None = None,
        rate: str | None = None,
        key_rate: str | None = None,
        unique: Unique | None = None,
        on_conflict: OnConflict | str | None = None,
    ) -> Callable[[Callable[P, R]], Task[P, R]]: ...

    def task(
        self,
        name: str | Callable[P, R] | None = None,
        *,
        queue: str = DEFAULT_QUEUE,
        priority: int = 0,
        max_attempts: int | None = None,
        timeout: float | None = None,
        hard_timeout: float | None = None,
        retry: RetryPolicy | None = None,
        concurrency: int | None = None,
        key_concurrency: int | None = None,
        rate: str | None = None,
        key_rate: str | None = None,
        unique: Unique | None = None,
        on_conflict: OnConflict | str | None = None,
    ) -> Task[P, R] | Callable[[Callable[P, R]], Task[P, R]]:
        """Make the decorated function a task (`jobvisor.tasks`): a job type
        named `name` (default: the function's `__name__`) whose jobs call it
        with the arguments given to `task.enqueue(...)`. Bare `@registry.task`
        takes every default. `queue`, `priority`, `max_attempts`, `unique` and
        `on_conflict` are its jobs' defaults (`with_options` changes them per
        enqueue); `timeout`, `hard_timeout`, `retry` and the fleet-wide limits
        `concurrency`, `key_concurrency`, `rate` and `key_rate` are the handler's (see
        `Handler`). Bad options, or a name already registered, raise
        `InvalidArgument`."""

        def register(func: Callable[P, R]) -> Task[P, R]:
            if not callable(func):
                raise InvalidArgument(f"task {func!r}: expected a function")
            given = {"max_attempts": max_attempts, "unique": unique, "on_conflict": on_conflict}
            options: dict[str, Any] = {"queue": queue, "priority": priority}
            options.update({k: v for k, v in given.items() if v is not None})
            task_name = name if isinstance(name, str) else getattr(func, "__name__", None)
            if not isinstance(task_name, str):
                raise InvalidArgument(f"task {func!r}: has no __name__; give the task a name")
            task = Task(func, name=task_name, registry=self, options=options)
            self.add(
                task_name,
                task.handler(),
                timeout=timeout,
                hard_timeout=hard_timeout,
                max_attempts=max_attempts,
                retry=retry,
                concurrency=concurrency,
                key_concurrency=key_concurrency,
                rate=rate,
                key_rate=key_rate,
                unique=unique,
                on_conflict=on_conflict,
            )
            self._tasks[task_name] = task
            return task

        if callable(name):
            return register(name)
        if name is not None:
            validate.name("task name", name)
        return register

    @property
    def tasks(self) -> list[Task[Any, Any]]:
        """The registered tasks, by name."""
        return [self._tasks[name] for name in sorted(self._tasks)]

    def bind(self, queue: Queue | AsyncQueue) -> _Binding:
        """Make `queue` the one this registry's tasks enqueue on: a `Queue`
        for `task.enqueue`, an `AsyncQueue` for `task.enqueue_async` (one of
        each may be bound). It holds until `unbind`, or, used as a context
        manager (`with registry.bind(q):`), until the block ends, when the
        queue bound before comes back."""
        if not isinstance(queue, Queue | AsyncQueue):
            raise InvalidArgument(f"queue={queue!r}: expected a jobvisor Queue or AsyncQueue")
        kind: type[Queue] | type[AsyncQueue] = Queue if isinstance(queue, Queue) else AsyncQueue
        binding = _Binding(self, kind, self._bound.get(kind))
        self._bound[kind] = queue
        return binding

    def unbind(self, queue: Queue | AsyncQueue) -> None:
        """Forget `queue` if it is bound (tasks then have no queue of its kind)."""
        for kind, bound in list(self._bound.items()):
            if bound is queue:
                del self._bound[kind]

    def bound(self, kind: type[Q]) -> Queue | AsyncQueue | None:
        """The bound queue of `kind` (`Queue` or `AsyncQueue`); if none, the
        other kind's (so that the error can say which one is there), or None."""
        found = self._bound.get(kind)
        if found is not None:
            return found
        return next(iter(self._bound.values()), None)

    def schedule(
        self,
        name: str,
        *,
        cron: str | None = None,
        every: float | dt.timedelta | None = None,
        job_type: str | None = None,
        payload: Any = None,
        workflow: Callable[[dt.datetime], WorkflowSpec] | None = None,
        queue: str = "default",
        priority: int = 0,
        timezone: str = "UTC",
        catch_up: str = "latest",
    ) -> ScheduleSpec:
        """Enqueue a `job_type` job on a schedule: `cron` (five fields, in
        `timezone`) or `every` (seconds, at least 1), exactly one of them.
        The supervisors' maintenance leader enqueues each tick once across all
        hosts; `catch_up` ("skip", "latest", "all") says what happens to the
        ticks missed while no supervisor ran (`jobvisor.schedules.CatchUp`).
        With `workflow=` instead of `job_type` and `payload`, each tick starts
        the workflow `workflow(tick)` returns, once (see
        `jobvisor.worker.workflow_ticks`; `queue` and `priority` are those of
        the tick's job, which builds it). A bad option, expression or zone,
        or a name already taken, raises `InvalidSchedule` (an
        `InvalidArgument`)."""
        if workflow is not None:
            if job_type is not None or payload is not None:
                raise InvalidSchedule(
                    f"schedule {name!r}: job_type={job_type!r} and a workflow: expected one "
                    "of them (a workflow schedule takes no job_type or payload)"
                )
            try:
                builder = check_builder(name, workflow)
            except InvalidArgument as exc:
                raise InvalidSchedule(str(exc)) from None
            job_type = WORKFLOW_TICK
        elif job_type is None:
            raise InvalidSchedule(f"schedule {name!r}: expected a job_type or a workflow")
        spec = ScheduleSpec.build(
            name,
            cron=cron,
            every=every,
            job_type=job_type,
            payload=payload,
            queue=queue,
            priority=priority,
            timezone=timezone,
            catch_up=catch_up,
        )
        if name in self._schedules:
            raise InvalidSchedule(f"schedule {name!r}: a schedule of that name is already declared")
        self._schedules[name] = spec
        if workflow is not None:
            if WORKFLOW_TICK not in self._handlers:
                self.add(WORKFLOW_TICK, self._workflow_ticks.run)
            self._workflow_ticks.builders[name] = builder
        return spec

    @property
    def schedules(self) -> list[ScheduleSpec]:
        """The declared schedules, by name."""
        return [self._schedules[name] for name in sorted(self._schedules)]

    def get(self, job_type: str) -> Handler | None:
        return self._handlers.get(job_type)

    def __contains__(self, job_type: object) -> bool:
        return job_type in self._handlers

    def __iter__(self) -> Iterator[Handler]:
        return iter(self._handlers.values())

    def __len__(self) -> int:
        return len(self._handlers)

    @property
    def job_types(self) -> list[str]:
        return sorted(self._handlers)

    def runnable_types(self) -> frozenset[str] | None:
        """The job types a worker of this registry claims: those it has a
        handler for, so that a job of a type it does not know waits, with
        its attempts untouched, for a worker that does (a rolling deploy
        that adds a type, a fleet of workers of different apps). None means
        any type: a registry that finds a type's handler only once it sees
        the job (`get` resolves it) says so."""
        return frozenset(self._handlers)

    @property
    def needs_threads(self) -> bool:
        return any(not h.is_async for h in self._handlers.values())

    @property
    def limits(self) -> list[Limit]:
        """The fleet-wide limits the handlers declare, by job type."""
        return [h.limit for h in self if h.limit is not None]

    def retry_policies(self) -> dict[str, RetryPolicy]:
        """`{job_type: policy}` for `connect(..., retry=...)`."""
        return {t: h.retry for t, h in self._handlers.items() if h.retry is not None}

    def job(self, job_type: str, payload: Any = None, **options: Any) -> dict[str, Any]:
        """The arguments of `queue.enqueue(**…)` (or one item of `enqueue_many`)
        for a registered type, with the handler's `max_attempts`, `unique` and
        `on_conflict` as defaults:

            queue.enqueue(**registry.job("send_email", {"to": "a@example.org"}))
        """
        handler = self._handlers.get(job_type)
        if handler is None:
            raise InvalidArgument(
                f"job_type={job_type!r}: no handler registered (known: {self._known()})"
            )
        args: dict[str, Any] = {"job_type": job_type, "payload": payload, **options}
        if handler.max_attempts is not None:
            args.setdefault("max_attempts", handler.max_attempts)
        if handler.unique is not None:
            args.setdefault("unique", handler.unique)
        if handler.on_conflict is not None:
            args.setdefault("on_conflict", handler.on_conflict.value)
        return args

    def _known(self, limit: int = 10) -> str:
        names = self.job_types
        shown = ", ".join(names[:limit])
        return (shown + f", … {len(names) - limit} more") if len(names) > limit else shown or "none"

    def unknown_type_error(self, job_type: str) -> str:
        """The last error of a job no handler is registered for."""
        return f"no handler registered for job type {job_type!r} (known: {self._known()})"

    def __repr__(self) -> str:
        return f"Registry({self.job_types!r})"


class _Binding:
    """What `Registry.bind` returns: used as a context manager, it puts back
    the queue bound before when the block ends."""

    __slots__ = ("_kind", "_previous", "_registry")

    def __init__(self, registry: Registry, kind: type, previous: Queue | AsyncQueue | None) -> None:
        self._registry, self._kind, self._previous = registry, kind, previous

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        if self._previous is None:
            self._registry._bound.pop(self._kind, None)
        else:
            self._registry._bound[self._kind] = self._previous


def _unique_defaults(unique: object, on_conflict: object) -> dict[str, Any]:
    """A handler's `unique` and `on_conflict`, checked as an enqueue checks them."""
    if unique is not None and not isinstance(unique, Unique):
        raise InvalidArgument(f"unique={validate.short(unique)}: expected a jobvisor.Unique")
    if on_conflict is None:
        return {"unique": unique}
    return {"unique": unique, "on_conflict": OnConflict.of(on_conflict)}


class AppError(JobvisorError):
    """`JOBVISOR_APP` does not name a loadable `Registry`."""


def load_app(spec: str) -> Registry:
    """Import `module:attribute` (the attribute may be dotted) and return the
    `Registry` it names; `AppError` says what went wrong."""
    try:
        module_name, attr = validate.module_attr(spec)
    except InvalidArgument:
        raise AppError(f"JOBVISOR_APP={spec!r}: expected module:attribute") from None
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:
        raise AppError(
            f"JOBVISOR_APP={spec!r}: cannot import {module_name!r}: {type(exc).__name__}: {exc}"
        ) from exc
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise AppError(f"JOBVISOR_APP={spec!r}: {module_name!r} has no {attr!r}") from None
    if not isinstance(target, Registry):
        raise AppError(
            f"JOBVISOR_APP={spec!r}: expected a jobvisor Registry, got {type(target).__name__}"
        )
    return target
