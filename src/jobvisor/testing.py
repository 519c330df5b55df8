"""Helpers for testing code that enqueues tasks, and the tasks themselves.

    from jobvisor import testing

    def test_signup_sends_a_welcome_email() -> None:
        with testing.recording():
            signup("ada@example.org")                   # calls send_email.enqueue(...)
        testing.assert_enqueued(send_email, to="ada@example.org")

    def test_signup_welcome_email_renders() -> None:
        with testing.inline() as jobs:
            signup("ada@example.org")                   # send_email runs right here
        assert jobs.assert_enqueued(send_email).result == "sent"

    def test_the_whole_way(queue) -> None:             # a real Queue
        signup("ada@example.org")
        drained = testing.drain(queue, registry=registry)
        assert len(drained.completed) == 1

- `recording()` records every task enqueue (`Task.enqueue`, `enqueue_async`,
  `enqueue_many`...) without writing or running anything.
- `inline()` records them too and runs each task at once, in-process, as a
  worker would: the arguments go through their JSON form and back (so an
  argument that would not survive the queue fails here too), the return
  value is kept as `Enqueued.result`, in its JSON form. A task that raises
  makes the enqueue raise (`inline(raise_errors=False)` records the error
  instead); one that snoozes or cancels its job has the `Snooze` or `Cancel`
  recorded as its `error`, never raised. A `delay` or `run_at` is ignored,
  and so is `conn=`: the task runs now, even if the caller's transaction
  later rolls back.
- `drain(queue, registry=...)` works on a real queue: it claims every due job,
  runs its handler in-process and completes, fails, snoozes or cancels it
  through the queue's own API, until no job is due.

Both modes replace the enqueue of every task in the process while they last
(not a context variable: the code under test may enqueue from another thread,
as a web framework's test client does); they do not nest. Raw
`queue.enqueue("job_type", ...)` calls are not intercepted: test those with
`drain` on a real queue. `jobvisor.pytest_plugin` gives the modes as fixtures.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import dataclasses
import datetime as dt
import inspect
import json
import os
import threading
import uuid
from collections.abc import Coroutine, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from . import codec
from . import tasks as _tasks
from .correlation import correlation_scope, current_correlation_id
from .errortext import error_text
from .handler import Cancel, Handler, JobContext, Snooze
from .queue.api import AsyncQueue, Queue
from .queue.errors import InvalidArgument, JobvisorError
from .queue.model import DEFAULT_MAX_ATTEMPTS, DEFAULT_QUEUE, Job, JobStatus, new_job_id
from .queue.ops import result_json
from .tasks import Task, TaskCall, intercept
from .worker.registry import Registry

T = TypeVar("T")

DRAIN_LIMIT = 10_000  # jobs one drain runs before it decides they never end
INLINE_WORKER_ID = "inline"


class TestingError(JobvisorError):
    """A testing mode used the wrong way: nested, or asserted on outside one."""

    __test__ = False  # not a test class, whatever pytest thinks of its name


@dataclasses.dataclass(frozen=True, slots=True)
class Enqueued:
    """One task enqueue seen by `recording()` or `inline()`: the job's id,
    type, payload (JSON form) and options (`queue`, `priority`, `delay`...);
    under `inline()`, the task's `result` (JSON form) or the `error` it raised."""

    id: uuid.UUID
    job_type: str
    payload: dict[str, Any]
    options: Mapping[str, Any]
    result: Any = None
    error: BaseException | None = None


def _target_name(target: str | Task[Any, Any]) -> str:
    if isinstance(target, Task):
        return target.name
    if isinstance(target, str) and target:
        return target
    raise InvalidArgument(f"job_type_or_task={target!r}: expected a job type or a task")


def _expected(target: str | Task[Any, Any], subset: Mapping[str, Any]) -> dict[str, Any]:
    """`subset` in the JSON form payloads have (a task's arguments as it stores them)."""
    where = f"{_target_name(target)}: expected argument"
    return {name: codec.dump(value, f"{where} {name!r}") for name, value in subset.items()}


def _defaults(target: str | Task[Any, Any]) -> dict[str, Any]:
    """A task's parameter defaults in JSON form (a payload leaves them out)."""
    return dict(target.defaults) if isinstance(target, Task) else {}


class Recorder:
    """The task enqueues seen while a testing mode is on, in order (`jobs`)."""

    __test__ = False

    def __init__(self) -> None:
        self.jobs: list[Enqueued] = []
        self._lock = threading.Lock()

    def _record(self, entry: Enqueued) -> uuid.UUID:
        with self._lock:
            self.jobs.append(entry)
        return entry.id

    def enqueued(
        self, job_type_or_task: str | Task[Any, Any] | None = None, /, **payload_subset: Any
    ) -> list[Enqueued]:
        """The recorded jobs of that type (every job when None) whose payload
        holds `payload_subset`; a task's arguments are compared in the form it
        stores them, its defaults standing in for the arguments not given."""
        if job_type_or_task is None:
            with self._lock:
                return list(self.jobs)
        name = _target_name(job_type_or_task)
        wanted = _expected(job_type_or_task, payload_subset)
        defaults = _defaults(job_type_or_task)
        with self._lock:
            jobs = [job for job in self.jobs if job.job_type == name]
        return [
            job
            for job in jobs
            if all({**defaults, **job.payload}.get(k, _MISSING) == v for k, v in wanted.items())
        ]

    def assert_enqueued(
        self, job_type_or_task: str | Task[Any, Any], /, **payload_subset: Any
    ) -> Enqueued:
        """The first recorded job of that type whose payload holds
        `payload_subset`; `AssertionError` listing what was enqueued if none."""
        found = self.enqueued(job_type_or_task, **payload_subset)
        if not found:
            raise AssertionError(
                f"no {_target_name(job_type_or_task)} job enqueued with {payload_subset}; "
                f"enqueued: {self._listing()}"
            )
        return found[0]

    def assert_not_enqueued(
        self, job_type_or_task: str | Task[Any, Any], /, **payload_subset: Any
    ) -> None:
        """`AssertionError` if a job of that type whose payload holds
        `payload_subset` was recorded."""
        found = self.enqueued(job_type_or_task, **payload_subset)
        if found:
            raise AssertionError(
                f"{len(found)} {_target_name(job_type_or_task)} job(s) enqueued with "
                f"{payload_subset}: {[job.payload for job in found]}"
            )

    def clear(self) -> None:
        with self._lock:
            self.jobs.clear()

    def _listing(self) -> str:
        with self._lock:
            return ", ".join(f"{j.job_type}({j.payload})" for j in self.jobs) or "nothing"


_MISSING = object()


class _Recording(Recorder):
    """`recording()`: record, run nothing."""

    def enqueue(self, call: TaskCall[Any]) -> uuid.UUID:
        return self._record(Enqueued(new_job_id(), call.job_type, call.payload, call.options))

    async def enqueue_async(self, call: TaskCall[Any]) -> uuid.UUID:
        return self.enqueue(call)


class _Inline(Recorder):
    """`inline()`: record, and run the task now."""

    def __init__(self, raise_errors: bool) -> None:
        super().__init__()
        self.raise_errors = raise_errors

    def enqueue(self, call: TaskCall[Any]) -> uuid.UUID:
        context = _inline_context(call)
        try:
            value = call.task.handler()(context)
            if inspect.iscoroutine(value):
                value = _run_coroutine(value)
        except Exception as exc:
            return self._failed(call, context, exc)
        return self._done(call, context, value)

    async def enqueue_async(self, call: TaskCall[Any]) -> uuid.UUID:
        context = _inline_context(call)
        try:
            value = call.task.handler()(context)
            if inspect.iscoroutine(value):
                value = await value
        except Exception as exc:
            return self._failed(call, context, exc)
        return self._done(call, context, value)

    def _done(self, call: TaskCall[Any], context: JobContext, value: Any) -> uuid.UUID:
        text = result_json(value)
        result = None if text is None else json.loads(text)
        return self._record(
            Enqueued(context.id, call.job_type, call.payload, call.options, result=result)
        )

    def _failed(self, call: TaskCall[Any], context: JobContext, exc: Exception) -> uuid.UUID:
        """Record the error; raise it unless told not to, or unless it is a
        snooze or a cancel (what the task asked for, not a failure)."""
        self._record(Enqueued(context.id, call.job_type, call.payload, call.options, error=exc))
        if self.raise_errors and not isinstance(exc, Snooze | Cancel):
            raise exc
        return context.id


def _inline_context(call: TaskCall[Any]) -> JobContext:
    """The job an inline run sees: its payload after the trip through JSON
    text a queued job makes, attempt 1, running now."""
    now = dt.datetime.now(dt.UTC)
    options = call.options
    payload = json.loads(json.dumps(call.payload))
    job_id = new_job_id()
    job = Job(
        id=job_id,
        queue=options.get("queue", DEFAULT_QUEUE),
        job_type=call.job_type,
        payload=payload,
        priority=options.get("priority", 0),
        run_at=now,
        status=JobStatus.RUNNING,
        attempts=1,
        max_attempts=options.get("max_attempts", DEFAULT_MAX_ATTEMPTS),
        last_error=None,
        correlation_id=options.get("correlation_id") or current_correlation_id() or job_id.hex,
        dedupe_key=options.get("dedupe_key"),
        lease_expires_at=None,
        claim_token=uuid.uuid4(),
        worker_id=INLINE_WORKER_ID,
        created_at=now,
        started_at=now,
        finished_at=None,
    )
    return JobContext(job, INLINE_WORKER_ID)


def _run_coroutine(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to its end from blocking code: in a new event loop, or, when
    this thread already runs one, in a new loop on a thread of its own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    context = contextvars.copy_context()
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="jobvisor-inline") as pool:
        return pool.submit(context.run, asyncio.run, coro).result()


@contextlib.contextmanager
def _mode(interceptor: _Recording | _Inline) -> Iterator[Recorder]:
    active = intercept(interceptor)
    if active is not None:
        intercept(active)
        raise TestingError("a testing mode is already on: recording() and inline() do not nest")
    try:
        yield interceptor
    finally:
        intercept(None)


def recording() -> contextlib.AbstractContextManager[Recorder]:
    """Record every task enqueue in this process, writing and running
    nothing, until the block ends; yields the `Recorder`."""
    return _mode(_Recording())


def inline(*, raise_errors: bool = True) -> contextlib.AbstractContextManager[Recorder]:
    """Run every task enqueued in this process at once, in-process, until
    the block ends, recording each; yields the `Recorder`. A task that raises
    makes its enqueue raise, unless `raise_errors` is False (the error is
    then kept in `Enqueued.error`)."""
    return _mode(_Inline(raise_errors))


def _active() -> Recorder:
    active = _tasks._interceptor
    if not isinstance(active, Recorder):
        raise TestingError("no testing mode is on: use `with jobvisor.testing.recording():`")
    return active


def assert_enqueued(job_type_or_task: str | Task[Any, Any], /, **payload_subset: Any) -> Enqueued:
    """`Recorder.assert_enqueued` on the mode that is on."""
    return _active().assert_enqueued(job_type_or_task, **payload_subset)


def assert_not_enqueued(job_type_or_task: str | Task[Any, Any], /, **payload_subset: Any) -> None:
    """`Recorder.assert_not_enqueued` on the mode that is on."""
    _active().assert_not_enqueued(job_type_or_task, **payload_subset)


# --- drain: a real queue, in-process ------------------------------------------


@dataclasses.dataclass(slots=True)
class Drained:
    """What a `drain` ran: job ids by outcome, in the order they ran, and
    the error of each failed job."""

    completed: list[uuid.UUID] = dataclasses.field(default_factory=list)
    failed: list[uuid.UUID] = dataclasses.field(default_factory=list)
    snoozed: list[uuid.UUID] = dataclasses.field(default_factory=list)
    cancelled: list[uuid.UUID] = dataclasses.field(default_factory=list)
    errors: dict[uuid.UUID, str] = dataclasses.field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.completed) + len(self.failed) + len(self.snoozed) + len(self.cancelled)


def _drain_worker_id() -> str:
    return f"drain-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def _outcome(handler: Handler | None, registry: Registry, job: Job, run: Any) -> tuple[str, Any]:
    """What to write for a job whose handler ran: (queue method, argument).
    `run` is the handler's return value, or the exception it raised."""
    if handler is None:
        return "fail", registry.unknown_type_error(job.job_type)
    if isinstance(run, Snooze):
        return "snooze", run.delay
    if isinstance(run, Cancel):
        return "cancel_held", run.reason
    if isinstance(run, BaseException):
        return "fail", error_text(run)
    try:
        result_json(run)
    except InvalidArgument as exc:
        return "fail", f"InvalidResult: {exc}"
    return "complete", run


def _record(drained: Drained, job: Job, kind: str, arg: Any) -> None:
    outcomes = {"complete": drained.completed, "fail": drained.failed}
    outcomes.update(snooze=drained.snoozed, cancel_held=drained.cancelled)
    outcomes[kind].append(job.id)
    if kind == "fail":
        drained.errors[job.id] = arg


def _fail_options(handler: Handler | None, job: Job) -> dict[str, Any]:
    if handler is not None and handler.retry is not None:
        return {"retry_in": handler.retry.delay(job.attempts)}
    return {}


async def _call_async(handler: Handler, context: JobContext) -> Any:
    if not handler.is_async:
        return await asyncio.to_thread(handler.func, context)
    if handler.timeout is None:
        return await handler.func(context)
    async with asyncio.timeout(handler.timeout):
        return await handler.func(context)


def _run_one(handler: Handler | None, context: JobContext) -> Any:
    """The handler's return value, or the exception it raised."""
    if handler is None:
        return None
    with correlation_scope(context.correlation_id):
        try:
            if handler.is_async:
                return _run_coroutine(_call_async(handler, context))
            return handler.func(context)
        except Exception as exc:
            return exc


async def _run_one_async(handler: Handler | None, context: JobContext) -> Any:
    if handler is None:
        return None
    with correlation_scope(context.correlation_id):
        try:
            return await _call_async(handler, context)
        except Exception as exc:
            return exc


def _check_limit(drained: Drained, max_jobs: int) -> None:
    if len(drained) >= max_jobs:
        raise TestingError(
            f"drain ran {max_jobs} jobs and more are due: does a job enqueue itself? "
            "(raise max_jobs to allow more)"
        )


def _sync_queue(queue: Queue | None, registry: Registry) -> Queue:
    target = queue if queue is not None else registry.bound(Queue)
    if not isinstance(target, Queue):
        raise InvalidArgument(
            f"queue={target!r}: expected a jobvisor Queue (or one bound with registry.bind)"
        )
    return target


def drain(
    queue: Queue | None = None,
    *,
    registry: Registry,
    queues: Sequence[str] | None = None,
    max_jobs: int = DRAIN_LIMIT,
) -> Drained:
    """Run every due job of `queue` (default: the `Queue` bound on
    `registry`), one at a time in this process, with `registry`'s handlers,
    until no job is due; jobs the handlers enqueue run too. Each job is
    claimed, run and then completed, failed, snoozed or cancelled through the
    queue's API, as a worker would (a failed job with attempts left is
    retryable after its backoff, so it is not due again in this drain).
    `queues` limits it to those queues. `TestingError` after `max_jobs` jobs."""
    q = _sync_queue(queue, registry)
    worker_id = _drain_worker_id()
    drained = Drained()
    while jobs := q.claim(worker_id, queues=queues, limit=1):
        _check_limit(drained, max_jobs)
        job = jobs[0]
        handler = registry.get(job.job_type)
        run = _run_one(handler, JobContext(job, worker_id))
        kind, arg = _outcome(handler, registry, job, run)
        options = _fail_options(handler, job) if kind == "fail" else {}
        getattr(q, kind)(job, arg, **options)
        _record(drained, job, kind, arg)
    return drained


async def drain_async(
    queue: AsyncQueue | None = None,
    *,
    registry: Registry,
    queues: Sequence[str] | None = None,
    max_jobs: int = DRAIN_LIMIT,
) -> Drained:
    """`drain` for asyncio code, on an `AsyncQueue`: async handlers run on
    this loop, plain ones in a thread."""
    q = queue if queue is not None else registry.bound(AsyncQueue)
    if not isinstance(q, AsyncQueue):
        raise InvalidArgument(
            f"queue={q!r}: expected a jobvisor AsyncQueue (or one bound with registry.bind)"
        )
    worker_id = _drain_worker_id()
    drained = Drained()
    while jobs := await q.claim(worker_id, queues=queues, limit=1):
        _check_limit(drained, max_jobs)
        job = jobs[0]
        handler = registry.get(job.job_type)
        run = await _run_one_async(handler, JobContext(job, worker_id))
        kind, arg = _outcome(handler, registry, job, run)
        options = _fail_options(handler, job) if kind == "fail" else {}
        await getattr(q, kind)(job, arg, **options)
        _record(drained, job, kind, arg)
    return drained


__all__ = [
    "Drained",
    "Enqueued",
    "Recorder",
    "TestingError",
    "assert_enqueued",
    "assert_not_enqueued",
    "drain",
    "drain_async",
    "inline",
    "recording",
]
