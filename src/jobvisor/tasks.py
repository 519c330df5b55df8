"""Typed tasks: a function that is its own job type.

    registry = Registry()

    @registry.task(queue="mail", max_attempts=5)
    async def send_email(to: str, subject: str) -> None: ...

    registry.bind(queue)                        # the queue tasks enqueue on
    send_email.enqueue(to="ada@example.org", subject="hi")
    await send_email.enqueue_async(to="ada@example.org", subject="hi")
    send_email.with_options(delay=60, priority=5).enqueue(to=..., subject=...)
    send_email.enqueue_many([send_email.args(to=a, subject="hi") for a in people])
    send_email("ada@example.org", "hi")        # a plain call: runs the function here
    with queue.batch(on_finish=report) as b:   # members of a batch: task calls
        b.enqueue(send_email.args(to="ada@example.org", subject="hi"))

A task's `enqueue` has its function's own signature (through `ParamSpec`), so
a type checker rejects a wrong argument name or type. The arguments are
bound to the signature and stored in the job's payload as a JSON object, one
member per argument given, by parameter name (`{"to": "ada@example.org",
"subject": "hi"}`); `jobvisor.codec` says which values round-trip. A value
that cannot be stored is refused at enqueue, naming the argument, and nothing
is written. The worker rebuilds the arguments from the function's type hints
(defaults fill in what was not given), calls the function, and stores what it
returns as the job's result.

Which queue: the one given by `with_options(using=queue)`, else the one bound
on the task's registry with `registry.bind(queue)` (a `Queue` for `enqueue`,
an `AsyncQueue` for `enqueue_async`). `with_options(conn=...)` enqueues in the
caller's transaction, as `conn=` does on the queue.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import dataclasses
import datetime as dt
import inspect
import uuid
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any, Generic, NoReturn, ParamSpec, Protocol, TypeVar, overload

from . import codec
from .handler import JobContext
from .queue.api import AsyncQueue, Queue
from .queue.errors import InvalidArgument, JobvisorError
from .queue.jsonvalue import payload_json
from .queue.model import Job, JobStatus, NewJob, OnConflict, Unique

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
Q = TypeVar("Q", "Queue", "AsyncQueue")

# The job options a task or `with_options` may set; each is an argument of
# `Queue.enqueue` of the same name. A new enqueue option is one entry here
# (and a keyword of `Registry.task` or `Task.with_options` to set it).
JOB_OPTIONS = (
    "queue",
    "priority",
    "max_attempts",
    "delay",
    "run_at",
    "dedupe_key",
    "correlation_id",
    "unique",
    "on_conflict",
    "concurrency_key",
)

_current_job: contextvars.ContextVar[JobContext | None] = contextvars.ContextVar(
    "jobvisor_current_job", default=None
)


def current_job() -> JobContext | None:
    """The job whose task is running in this context (its id, attempt,
    `progress`, `cancel_requested`...), or None outside a task."""
    return _current_job.get()


class QueueBinding(Protocol):
    """Where a task finds its queue: its registry (`Registry.bind`)."""

    def bound(self, kind: type[Q]) -> Queue | AsyncQueue | None: ...


class NoQueueBound(JobvisorError):
    """A task was enqueued with no queue to go to: bind one on its registry
    (`registry.bind(queue)`) or give one (`task.with_options(using=queue)`)."""


@dataclasses.dataclass(frozen=True, slots=True)
class TaskCall(Generic[P]):
    """One enqueue of a task, made by `task.args(...)`: its arguments as the
    payload, checked and serialised, and the job options of the task it was
    made from (so `task.with_options(priority=9).args(...)` carries its
    priority into `enqueue_many`)."""

    task: Task[P, Any]
    payload: dict[str, Any]
    options: Mapping[str, Any]

    @property
    def job_type(self) -> str:
        return self.task.name

    def enqueue_arguments(self) -> dict[str, Any]:
        """The keyword arguments of `Queue.enqueue` for this call."""
        return {"job_type": self.task.name, "payload": self.payload, **self.options}


class Interceptor(Protocol):
    """What `jobvisor.testing` puts in front of every task's enqueue."""

    def enqueue(self, call: TaskCall[Any]) -> uuid.UUID: ...

    async def enqueue_async(self, call: TaskCall[Any]) -> uuid.UUID: ...


_interceptor: Interceptor | None = None


def intercept(interceptor: Interceptor | None) -> Interceptor | None:
    """Route every task's enqueue, in this process, to `interceptor` (None:
    back to the queue); returns the one it replaces. `jobvisor.testing` uses it."""
    global _interceptor
    previous, _interceptor = _interceptor, interceptor
    return previous


def _json_defaults(signature: inspect.Signature) -> dict[str, Any]:
    """The parameters' defaults in their JSON form (those that have one)."""
    out: dict[str, Any] = {}
    for name, parameter in signature.parameters.items():
        if parameter.default is not inspect.Parameter.empty:
            with contextlib.suppress(InvalidArgument):
                out[name] = codec.dump(parameter.default, name)
    return out


def _same_json(a: Any, b: Any) -> bool:
    """Whether two JSON values are the same JSON (`1 == True` in Python, not in JSON)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_same_json, a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    return bool(a == b)


class Task(Generic[P, R]):
    """A function registered as a job type (`Registry.task`). Calling it calls
    the function; `enqueue` and its siblings make jobs of it."""

    def __init__(
        self,
        func: Callable[P, R],
        *,
        name: str,
        registry: QueueBinding,
        options: Mapping[str, Any],
        using: Queue | AsyncQueue | None = None,
        conn: Any = None,
    ) -> None:
        unknown = sorted(set(options) - set(JOB_OPTIONS))
        if unknown:
            raise InvalidArgument(f"task option {unknown[0]!r}: expected one of {JOB_OPTIONS}")
        NewJob.build(name, None, **options)  # every option checked before use
        self.func = func
        self.name = name
        self.registry = registry
        self.options: Mapping[str, Any] = dict(options)
        self.using = using
        self.conn = conn
        self.signature = inspect.signature(func)
        self.is_async = inspect.iscoroutinefunction(func)
        self.defaults = _json_defaults(self.signature)
        self._hints: dict[str, Any] | None = None

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.func(*args, **kwargs)

    # --- making jobs -------------------------------------------------------

    def args(self, *args: P.args, **kwargs: P.kwargs) -> TaskCall[P]:
        """These arguments as one item of `enqueue_many`, checked and
        serialised now (`InvalidArgument` naming a bad one)."""
        return TaskCall(self, self.payload(*args, **kwargs), self.options)

    def payload(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The job payload these arguments make: `{parameter: JSON value}` for
        each argument given, except one equal to its default (so that one call
        has one payload, however it is spelled: `unique=Unique(by_args=True)`
        and `dedupe_key` rely on it). `InvalidArgument` when they do not fit
        the function's signature or a value cannot be stored as JSON."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise InvalidArgument(f"{self.name}: {exc}") from None
        payload = {}
        for name, value in bound.arguments.items():
            plain = codec.dump(value, f"{self.name}: argument {name!r}")
            if name not in self.defaults or not _same_json(plain, self.defaults[name]):
                payload[name] = plain
        try:
            payload_json(payload)
        except InvalidArgument:
            self._refuse(payload)
        return payload

    def _refuse(self, payload: dict[str, Any]) -> NoReturn:
        """Raise the payload check's error, naming the first argument it refuses."""
        for name, value in payload.items():
            try:
                payload_json(value)
            except InvalidArgument as exc:
                raise InvalidArgument(f"{self.name}: argument {name!r}: {exc}") from None
        payload_json(payload)  # refused as a whole only (nested too deep): its own error
        raise AssertionError("unreachable: the payload was refused")

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> uuid.UUID:
        """Enqueue a job that calls the function with these arguments; returns
        its id. Refused with `InvalidArgument` (nothing written) when an
        argument does not fit or cannot be stored."""
        call = self.args(*args, **kwargs)
        if _interceptor is not None:
            return _interceptor.enqueue(call)
        return self._queue(Queue).enqueue(conn=self.conn, **call.enqueue_arguments())

    async def enqueue_async(self, *args: P.args, **kwargs: P.kwargs) -> uuid.UUID:
        """`enqueue` on the bound `AsyncQueue`."""
        call = self.args(*args, **kwargs)
        if _interceptor is not None:
            return await _interceptor.enqueue_async(call)
        aq = self._queue(AsyncQueue)
        return await aq.enqueue(conn=self.conn, **call.enqueue_arguments())

    def enqueue_many(self, calls: Iterable[TaskCall[P]]) -> list[uuid.UUID]:
        """Enqueue one job per `task.args(...)` item, in one transaction (one
        round trip); returns their ids in order."""
        items = self._calls(calls)
        if _interceptor is not None:
            return [_interceptor.enqueue(call) for call in items]
        jobs = [call.enqueue_arguments() for call in items]
        return self._queue(Queue).enqueue_many(jobs, conn=self.conn)

    async def enqueue_many_async(self, calls: Iterable[TaskCall[P]]) -> list[uuid.UUID]:
        """`enqueue_many` on the bound `AsyncQueue`."""
        items = self._calls(calls)
        if _interceptor is not None:
            return [await _interceptor.enqueue_async(call) for call in items]
        jobs = [call.enqueue_arguments() for call in items]
        return await self._queue(AsyncQueue).enqueue_many(jobs, conn=self.conn)

    def with_options(
        self,
        *,
        queue: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        delay: float | dt.timedelta | None = None,
        run_at: dt.datetime | None = None,
        dedupe_key: str | None = None,
        correlation_id: str | None = None,
        unique: Unique | None = None,
        on_conflict: OnConflict | str | None = None,
        concurrency_key: str | None = None,
        using: Queue | AsyncQueue | None = None,
        conn: Any = None,
    ) -> Task[P, R]:
        """A copy of this task that enqueues with these options (those left
        None keep the task's): the job options of `Queue.enqueue`, `using`
        the queue to enqueue on, and `conn` the caller's own transaction's
        connection. The copy is not registered again; calling it calls the
        function. A bad option raises `InvalidArgument` here."""
        given = {
            "queue": queue,
            "priority": priority,
            "max_attempts": max_attempts,
            "delay": delay,
            "run_at": run_at,
            "dedupe_key": dedupe_key,
            "correlation_id": correlation_id,
            "unique": unique,
            "on_conflict": on_conflict,
            "concurrency_key": concurrency_key,
        }
        options = {**self.options, **{k: v for k, v in given.items() if v is not None}}
        if delay is not None:
            options.pop("run_at", None)
        elif run_at is not None:
            options.pop("delay", None)
        if using is not None and not isinstance(using, Queue | AsyncQueue):
            raise InvalidArgument(f"using={using!r}: expected a jobvisor Queue or AsyncQueue")
        NewJob.build(self.name, None, **options)  # every option checked before use
        bound = copy.copy(self)  # the signature, defaults and hints are shared
        bound.options = options
        bound.using = self.using if using is None else using
        bound.conn = self.conn if conn is None else conn
        return bound

    def _calls(self, calls: Iterable[TaskCall[P]]) -> list[TaskCall[P]]:
        items = list(calls)
        for index, call in enumerate(items):
            if not isinstance(call, TaskCall) or call.task.name != self.name:
                raise InvalidArgument(
                    f"{self.name}.enqueue_many: item {index}={call!r}: "
                    f"expected {self.name}.args(...)"
                )
        return items

    def _queue(self, kind: type[Q]) -> Q:
        target = self.using if self.using is not None else self.registry.bound(kind)
        if isinstance(target, kind):
            return target
        method = "enqueue" if kind is Queue else "enqueue_async"
        if target is None:
            raise NoQueueBound(
                f"{self.name}.{method}: no {kind.__name__} to enqueue on; bind one with "
                f"registry.bind(queue) or give one with .with_options(using=queue)"
            )
        other = "enqueue" if method == "enqueue_async" else "enqueue_async"
        raise NoQueueBound(
            f"{self.name}.{method}: using={target!r}: expected a {kind.__name__} "
            f"(use .{other} with a {type(target).__name__})"
        )

    # --- running jobs ------------------------------------------------------

    def arguments(self, payload: Any) -> inspect.BoundArguments:
        """The call a job's payload stands for: its arguments rebuilt from
        the function's type hints, defaults filled in. `TypeError` when the
        payload does not fit the signature (a job enqueued by hand, or before
        the signature changed)."""
        if not isinstance(payload, Mapping):
            raise TypeError(
                f"{self.name}: payload {payload!r} is not a JSON object of arguments by name"
            )
        hints = self._type_hints()
        values = {name: codec.load(self._hint(hints, name), v) for name, v in payload.items()}
        bound = self.signature.bind_partial()
        for name, value in values.items():
            if name not in self.signature.parameters:
                raise TypeError(f"{self.name}: got an unexpected argument {name!r}")
            bound.arguments[name] = value
        # Binding again checks that every required argument is there.
        bound = self.signature.bind(*bound.args, **bound.kwargs)
        bound.apply_defaults()
        return bound

    def _hint(self, hints: Mapping[str, Any], name: str) -> Any:
        parameter = self.signature.parameters.get(name)
        hint = hints.get(name, Any)
        if parameter is not None and parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            return tuple[hint, ...]  # type: ignore[valid-type]
        if parameter is not None and parameter.kind is inspect.Parameter.VAR_KEYWORD:
            return dict[str, hint]  # type: ignore[valid-type]
        return hint

    @overload
    def result(self: Task[Any, Coroutine[Any, Any, T]], job: Job) -> T: ...

    @overload
    def result(self: Task[Any, T], job: Job) -> T: ...

    def result(self, job: Job) -> Any:
        """What the task returned for `job` (as `queue.get` or `wait` read
        it), rebuilt from the function's return annotation: a dataclass or a
        pydantic model comes back as one. `InvalidArgument` when `job` is not a
        completed job of this task."""
        if not isinstance(job, Job) or job.job_type != self.name:
            raise InvalidArgument(f"job={job!r}: expected a job of the task {self.name!r}")
        if job.status is not JobStatus.COMPLETED:
            raise InvalidArgument(f"job {job.id} is {job.status}: expected a completed job")
        return codec.load(self._type_hints().get("return", Any), job.result)

    def _type_hints(self) -> dict[str, Any]:
        if self._hints is None:
            self._hints = codec.type_hints(self.func)
        return self._hints

    def handler(self) -> Callable[[JobContext], Any]:
        """The job handler the worker runs: an `async def` for a coroutine
        function, a plain function (run in the worker's threads) otherwise."""
        if self.is_async:
            return self._run_async
        return self._run

    def _run(self, job: JobContext) -> Any:
        bound = self.arguments(job.payload)
        token = _current_job.set(job)
        try:
            value = self.func(*bound.args, **bound.kwargs)
        finally:
            _current_job.reset(token)
        return codec.dump(value, f"{self.name}: result")

    async def _run_async(self, job: JobContext) -> Any:
        bound = self.arguments(job.payload)
        token = _current_job.set(job)
        try:
            value = await self.func(*bound.args, **bound.kwargs)  # type: ignore[misc]
        finally:
            _current_job.reset(token)
        return codec.dump(value, f"{self.name}: result")

    def __repr__(self) -> str:
        return f"Task({self.name!r}, {self.func.__module__}.{self.func.__qualname__})"
