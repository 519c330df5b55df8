"""Handlers by job type, and what a handler sees of its job.

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

A job cancelled while it runs (`queue.cancel(id)`): an `async def` handler
gets `asyncio.CancelledError` at its next await; a plain function sees
`job.cancel_requested` turn true and should return soon (or call
`job.raise_if_cancelled()`), else its worker is replaced after
`JOBVISOR_CANCEL_GRACE` seconds.

A handler that wants its job to run again later, without counting this
attempt, calls `job.snooze(seconds)`; one that gives the job up for good calls
`job.cancel(reason)`. Both raise (`Snooze`, `Cancel`), so nothing after the
call runs; a handler may also raise those exceptions itself.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib
import inspect
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, NoReturn, ParamSpec, TypeVar, overload

from ..queue import placeholders, validate
from ..queue.errors import InvalidArgument, JobvisorError
from ..queue.model import (
    DEFAULT_QUEUE,
    Job,
    Limit,
    LimitScope,
    LimitSource,
    OnConflict,
    RetryPolicy,
    Unique,
    progress_json,
)
from ..schedules import InvalidSchedule, ScheduleSpec
from ..tasks import Task, queue_types

if TYPE_CHECKING:
    from ..queue.api import AsyncQueue, Queue

F = TypeVar("F", bound=Callable[..., Any])
P = ParamSpec("P")
R = TypeVar("R")
Q = TypeVar("Q", "Queue", "AsyncQueue")

HandlerFunc = Callable[["JobContext"], Awaitable[Any]] | Callable[["JobContext"], Any]


class Snooze(Exception):
    """Raised by a handler: run this job again after `delay` seconds; the
    attempt is given back (the job did not fail, it asked to wait)."""

    def __init__(self, delay: float | dt.timedelta) -> None:
        self.delay = validate.seconds("snooze delay", delay, high=validate.MAX_DELAY)
        super().__init__(f"snoozed for {self.delay:g}s")


class Cancel(Exception):
    """Raised by a handler: give this job up for good (status `cancelled`,
    never retried); `reason` is kept as the job's last error."""

    def __init__(self, reason: str = "cancelled by its handler") -> None:
        if not isinstance(reason, str) or not reason:
            raise InvalidArgument(f"cancel reason={reason!r}: expected a non-empty string")
        self.reason = reason
        super().__init__(reason)


class AttemptFailed(Exception):
    """Raised by a handler that writes its own account of a failed attempt:
    the attempt failed, and `record` is kept as the job's error as it is,
    instead of the exception's name and innermost frames (a framework's
    runner keeps the traceback its framework hands on). Its first line
    should name the error: every jobvisor tool shows that line."""

    def __init__(self, record: str) -> None:
        self.record = record
        super().__init__(record.split("\n", 1)[0])


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


class JobContext:
    """The job as its handler sees it: read-only fields, and `snooze`/`cancel`/`progress`."""

    __slots__ = ("_cancel_requested", "_report", "job", "worker_id")

    def __init__(
        self,
        job: Job,
        worker_id: str,
        report: Callable[[uuid.UUID, str], None] | None = None,
    ) -> None:
        self.job = job
        self.worker_id = worker_id
        self._report = report  # where progress goes: the worker's next lease renewal
        self._cancel_requested = False  # set by the worker's loop, read by the handler

    @property
    def cancel_requested(self) -> bool:
        """True once someone asked to cancel this job (`queue.cancel`): stop soon."""
        return self._cancel_requested

    def raise_if_cancelled(self) -> None:
        """Raise `Cancel` if this job's cancel was requested: the job ends
        `cancelled`, keeping the request's text as its last error."""
        if self._cancel_requested:
            raise Cancel("cancel requested")

    @property
    def id(self) -> uuid.UUID:
        return self.job.id

    @property
    def job_type(self) -> str:
        return self.job.job_type

    @property
    def queue(self) -> str:
        return self.job.queue

    @property
    def payload(self) -> Any:
        """The job's payload; in a workflow job, each placeholder replaced by
        its parent's result (which the claim brought in the job's meta)."""
        parents = placeholders.parent_results(self.job.meta)
        if not parents and not placeholders.failed_parents(self.job.meta):
            return self.job.payload
        return placeholders.substitute(self.job.payload, parents)

    @property
    def parent_results(self) -> dict[str, Any]:
        """A workflow job's completed parents' results, by node key (empty
        for any other job)."""
        return placeholders.parent_results(self.job.meta)

    @property
    def failed_parents(self) -> dict[str, str]:
        """A workflow job's parents that failed when it runs anyway
        (`on_parent_failure="run"`), each with its status, by node key."""
        return placeholders.failed_parents(self.job.meta)

    @property
    def attempt(self) -> int:
        """This attempt's number, from 1."""
        return self.job.attempts

    @property
    def max_attempts(self) -> int:
        return self.job.max_attempts

    @property
    def correlation_id(self) -> str | None:
        return self.job.correlation_id

    def snooze(self, delay: float | dt.timedelta) -> NoReturn:
        """Run again after `delay`, this attempt not counted. Does not return."""
        raise Snooze(delay)

    def progress(self, fraction: float, note: str | None = None) -> None:
        """Report how far the job has come: `fraction` 0.0..1.0 and an
        optional short `note`. Kept in memory and written with the worker's
        next lease renewal (no statement of its own, so call it as often as
        you like); `queue.get(id).progress` shows the latest written.
        `InvalidArgument` for a fraction or note out of bounds."""
        text = progress_json(fraction, note)
        if self._report is not None:
            self._report(self.job.id, text)

    def cancel(self, reason: str = "cancelled by its handler") -> NoReturn:
        """Give the job up for good. Does not return."""
        raise Cancel(reason)

    def __repr__(self) -> str:
        return f"JobContext(id={self.id}, job_type={self.job_type!r}, attempt={self.attempt})"


def _optional_seconds(name: str, value: float | None) -> float | None:
    if value is None:
        return None
    return validate.seconds(name, value, positive=True, high=validate.MAX_INTERVAL)


@dataclasses.dataclass(frozen=True, slots=True)
class Handler:
    """One registered handler and its options.

    `timeout`: the worker fails an attempt that runs longer (an async handler
    is cancelled; a thread is abandoned, its result ignored).
    `hard_timeout`: the supervisor kills the whole worker if the attempt runs
    longer, the only way to stop blocking code; the job is then requeued or
    dead as its attempts allow.
    `max_attempts`: the default `max_attempts` of jobs built with
    `Registry.job` (the queue stores a job's attempts when it is enqueued).
    `retry`: the backoff between this type's attempts (`Registry.retry_policies`).
    `limit`: the type's fleet-wide limits (`concurrency`: running jobs across
    every host; `key_concurrency`: per `concurrency_key`; `rate`: starts per
    second, minute or hour, "100/s"; `key_rate`: such a rate per
    `concurrency_key`, each key with a bucket of its own; a job without a
    key counts toward neither key limit), written to the database at each
    worker's boot; None when it declares none.
    `unique`, `on_conflict`: the defaults of jobs built with `Registry.job`
    (see `jobvisor.Unique`): at most one job of the type per key.
    """

    job_type: str
    func: HandlerFunc
    is_async: bool
    timeout: float | None = None
    hard_timeout: float | None = None
    max_attempts: int | None = None
    retry: RetryPolicy | None = None
    limit: Limit | None = None
    unique: Unique | None = None
    on_conflict: OnConflict | None = None


class Registry:
    """The job types a worker can run, each with its handler and options."""

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}
        self._schedules: dict[str, ScheduleSpec] = {}
        self._tasks: dict[str, Task[Any, Any]] = {}
        self._bound: dict[type, Queue | AsyncQueue] = {}

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
        sync, asynchronous = queue_types()
        if not isinstance(queue, sync | asynchronous):
            raise InvalidArgument(f"queue={queue!r}: expected a jobvisor Queue or AsyncQueue")
        kind = sync if isinstance(queue, sync) else asynchronous
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
        job_type: str,
        payload: Any = None,
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
        A bad option, expression or zone, or a name already taken, raises
        `InvalidSchedule` (an `InvalidArgument`)."""
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
