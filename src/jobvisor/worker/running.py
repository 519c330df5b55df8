"""Running: a job from the moment it is claimed until its outcome is buffered.

A claimed job is started in a task of its own, a group of `START_GROUP` at a
time. The task runs the handler (on the loop, or in the thread pool for a
plain function) under the job's correlation id and its timeout, and turns
however the handler ended into the outcome to write (`settling`): complete,
fail, snooze, cancel, or release when the worker stopped it. A handler's
own `CancelledError`, a `BaseException` or an exception that cannot be
printed fails its job, logged as an error; the worker carries on.

A cancel request (`queue.cancel` of a running job) stops the handler: an
async handler's task is cancelled; a thread handler sees
`job.cancel_requested` and gets `cancel_grace` seconds to return, after
which the parent is told the job is past its hard limit now, so the worker
is replaced and that job alone is charged. Whatever outcome follows, the
database ends the job `cancelled`. A job whose lease was lost is stopped
the same way, and its result is dropped.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import enum
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from .. import tracing
from ..correlation import correlation_id_var
from ..durable import Durable, Parked
from ..errortext import error_text, message, one_line
from ..handler import Cancel, Handler, JobContext, Snooze
from ..log import get_logger
from ..outcomes import Outcome
from ..queue.errors import InvalidArgument, LeaseLost
from ..queue.internal import service_ops
from ..queue.model import Job
from ..queue.ops import result_json
from .errors import failure_text
from .settling import Write, release_unstarted, settle_lost

if TYPE_CHECKING:
    from .loop import Worker

log = get_logger("worker")

# A worker starts the jobs of a claim this many at a time, the event loop
# turning between two groups.
START_GROUP: Final = 10

# The hard limit, in seconds from now, reported to the parent for a thread
# handler that outlived its cancel grace: the parent's watchdog kills at once.
GRACE_KILL_AFTER: Final = 0.001


class StopReason(enum.StrEnum):
    """Why the worker cancelled a running job."""

    LEASE_LOST = "lease_lost"  # someone else holds it now: its result is dropped
    DRAIN = "drain"  # the stop's deadline passed: it is released
    CANCEL = "cancel"  # a cancel was requested: it ends cancelled


class Running:
    """A job whose handler is running."""

    __slots__ = ("context", "handler", "job", "stop_reason", "task")

    def __init__(
        self,
        job: Job,
        handler: Handler,
        worker_id: str,
        report: Callable[[uuid.UUID, str], None] | None = None,
        durable: Durable | None = None,
    ) -> None:
        self.job = job
        self.handler = handler
        self.context = JobContext(job, worker_id, report, durable)
        self.task: asyncio.Task[None] | None = None
        self.stop_reason: StopReason | None = None  # set when we cancel it


class _Carried(Exception):
    """What a thread handler raised that is not an `Exception` (or is a
    `CancelledError`), carried to the event loop as one."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(type(exc).__name__)
        self.exc = exc
        self.kind = (
            "CancelledError"
            if isinstance(exc, concurrent.futures.CancelledError)
            else ("a BaseException")
        )


async def start_all(worker: Worker, jobs: list[Job]) -> None:
    """Start `jobs` a few at a time, letting the loop turn between two
    groups: a notice that came meanwhile waits for one group, not for
    the whole batch."""
    for first in range(0, len(jobs), START_GROUP):
        if first:
            try:
                await asyncio.sleep(0)
            except asyncio.CancelledError:
                release_unstarted(worker, jobs[first:])
                raise
            if worker.stopping:  # the stop came between two groups: give the rest back
                release_unstarted(worker, jobs[first:])
                return
        for job in jobs[first : first + START_GROUP]:
            start(worker, job)


def start(worker: Worker, job: Job) -> None:
    running = prepare(worker, job)
    if running is not None:
        running.task = asyncio.create_task(run_job(worker, running))


def prepare(worker: Worker, job: Job) -> Running | None:
    """Hold `job` and make it running, or buffer its failure when no
    handler knows its type."""
    worker._held[job.id] = job
    handler = worker.registry.get(job.job_type)
    if handler is None:
        write: Write = ("fail", job, worker.registry.unknown_type_error(job.job_type))
        if worker._tracing:  # an execution too, if a short one: the trace shows why
            name, error = _span_outcome(None, write)
            with execution_span(worker, job) as span:
                span.set_outcome(name, error=error)
        worker._writes.append(write)
        worker._flush_wanted.set()
        return None
    durable = Durable(
        job, service_ops(worker.queue), asyncio.get_running_loop(), worker.queue.max_result_bytes
    )
    running = Running(job, handler, worker.worker_id, worker._report_progress, durable)
    worker._running[job.id] = running
    return running


def execution_span(worker: Worker, job: Job) -> contextlib.AbstractContextManager[tracing.JobSpan]:
    return tracing.job_span(job, tracing.carrier_of(job), tracer_provider=worker._tracer_provider)


async def run_job(worker: Worker, running: Running) -> None:
    job = running.job
    if worker._tracing:
        # The span is current while the handler runs (a thread handler
        # gets a copy of this context), so its own spans are children.
        with execution_span(worker, job) as span:
            outcome, duration = await execute(worker, running)
            name, error = _span_outcome(running.stop_reason, outcome)
            span.set_outcome(name, error=error)
    else:
        outcome, duration = await execute(worker, running)
    worker._ran[job.id] = duration
    if running.stop_reason is StopReason.LEASE_LOST:
        settle_lost(worker, job)
        return
    if outcome is not None and outcome[0] == "park":
        settle_parked(worker, job, outcome[2])
        return
    if outcome is None:
        worker._released.append(job)
        if worker._debug:
            log.debug("job.interrupted", **worker._fields(job), duration=round(duration, 6))
    elif outcome[0] == "complete":
        worker._completed.append(job)
        if outcome[2] is not None:
            worker._results[job.id] = outcome[2]
        if worker._debug:
            log.debug("job.completed", **worker._fields(job), duration=round(duration, 6))
    else:
        worker._writes.append(outcome)
    worker._flush_wanted.set()


async def execute(worker: Worker, running: Running) -> tuple[Write | None, float]:
    """Run the handler under the job's correlation id and timeout. Returns
    the outcome to write (None when we stopped it) and the run time."""
    job, handler = running.job, running.handler
    correlation_id_var.set(job.correlation_id)  # this task's own context
    hard = handler.hard_timeout
    if hard is not None:
        worker.channel.send({"t": "job", "id": str(job.id), "hard": hard})
    if worker._debug:
        log.debug("job.started", **worker._fields(job))
    started = time.monotonic()
    outcome: Write | None = None
    timer: asyncio.Timeout | None = None
    try:
        context = running.context
        if handler.timeout is None:
            value = await call(worker, handler, context)
        else:
            async with asyncio.timeout(handler.timeout) as timer:
                value = await call(worker, handler, context)
    except BaseException as exc:  # every ending is this job's, never the worker's
        outcome = raised(worker, running, exc, timer)
    else:
        outcome = completion(worker, job, value)
    finally:
        duration = time.monotonic() - started
        # A job that parked itself is pending again before its handler has
        # unwound, and may be claimed again meanwhile: forget only this run.
        if worker._running.get(job.id) is running:
            del worker._running[job.id]
        worker._slot_free.set()
        if hard is not None:
            worker.channel.send({"t": "end", "id": str(job.id)})
    if _stopped_by_cancel(running, outcome):
        # Asked to stop before it ended: the database ends it cancelled
        # whatever is written, so the logs and metrics say so too.
        outcome = ("cancel", job, "cancel requested")
    return outcome, duration


def raised(
    worker: Worker, running: Running, exc: BaseException, timer: asyncio.Timeout | None
) -> Write | None:
    """What the handler's raising `exc` writes: a snooze, a cancel, a park,
    or a failed attempt; None when the exception is our own stop (a cancel
    request, a lost lease, the drain's deadline)."""
    job, handler = running.job, running.handler
    if isinstance(exc, Snooze | Cancel | Parked | LeaseLost):
        return requested(running, exc, timer)
    if isinstance(exc, _Carried):
        return abnormal(worker, job, exc.exc, f"the handler raised {exc.kind}")
    if isinstance(exc, asyncio.CancelledError):
        if running.stop_reason is None and not _cancelling():
            # Raised by the handler itself, not by our cancel: its failure.
            return abnormal(worker, job, exc, "the handler raised CancelledError")
        return None
    if isinstance(exc, Exception):
        outcome: Write = ("fail", job, failure_text(job, handler, exc, timer))
        if message(exc) is None:
            abnormal(worker, job, exc, "the handler's exception cannot be printed")
        return outcome
    # SystemExit, KeyboardInterrupt, GeneratorExit or one of the handler's
    # own BaseExceptions: this job's failure.
    return abnormal(worker, job, exc, "the handler raised a BaseException")


def abnormal(worker: Worker, job: Job, exc: BaseException, why: str) -> Write:
    """The failed attempt of a handler that ended in a way a handler
    should not (an exception that is not an `Exception`, or cannot be
    printed): logged as an error, recorded like any failure."""
    text = error_text(exc)
    log.error(
        "job.abnormal_error",
        **worker._fields(job),
        error=text.split("\n", 1)[0],
        detail=f"{why}: the attempt is counted as failed",
    )
    return ("fail", job, text)


def completion(worker: Worker, job: Job, value: Any) -> Write:
    """A returned handler's outcome: complete with its value as JSON, or
    fail when the value cannot be stored (not JSON, or too large)."""
    if value is None:
        return ("complete", job, None)
    try:
        text = result_json(value, worker.queue.max_result_bytes)
    except InvalidArgument as exc:
        return ("fail", job, f"InvalidResult: {exc}")
    except Exception as exc:  # a value whose encoding raises: its failure too
        return ("fail", job, f"InvalidResult: {one_line(exc)}")
    return ("complete", job, text)


async def call(worker: Worker, handler: Handler, context: JobContext) -> Any:
    if handler.is_async:
        return await handler.func(context)
    assert worker._executor is not None
    ctx = contextvars.copy_context()
    with worker._threads_lock:
        worker._threads_busy += 1
    return await asyncio.get_running_loop().run_in_executor(
        worker._executor, in_thread, worker, ctx, handler.func, context
    )


def in_thread(
    worker: Worker, ctx: contextvars.Context, func: Callable[[JobContext], Any], context: JobContext
) -> Any:
    try:
        return ctx.run(func, context)
    except concurrent.futures.CancelledError as exc:
        raise _Carried(exc) from None  # the loop would take it for its own cancel
    except Exception:
        raise
    except BaseException as exc:
        # Carried to the loop as an Exception: a GeneratorExit that
        # crossed an `await` would end the job's task with it.
        raise _Carried(exc) from None
    finally:
        with worker._threads_lock:
            worker._threads_busy -= 1


def lose(worker: Worker, job: Job) -> None:
    """The lease of a job was lost: stop its handler, drop its result."""
    running = worker._running.get(job.id)
    if running is None or running.task is None:
        return  # finished already; its buffered outcome reports the loss when written
    durable = running.context._durable
    if durable is not None and durable.parked:
        return  # it parked itself: its claim ended on purpose
    running.stop_reason = StopReason.LEASE_LOST
    running.task.cancel()


def request_cancel(worker: Worker, job_id: uuid.UUID) -> None:
    """Someone asked to cancel a job: stop its handler (an async one at
    its next await; a thread gets `cancel_grace` seconds, then its worker
    is replaced). Asked again, nothing more happens."""
    running = worker._running.get(job_id)
    if running is None or running.task is None or running.context.cancel_requested:
        return  # not running here (finished: the database settles it), or asked already
    running.context._cancel_requested = True
    log.info("job.cancel_requested", **worker._fields(running.job))
    if running.handler.is_async:
        if running.stop_reason is None:
            running.stop_reason = StopReason.CANCEL
            running.task.cancel()
        return
    loop = asyncio.get_running_loop()
    loop.call_later(worker.cancel_grace, cancel_grace_over, worker, running)


def cancel_grace_over(worker: Worker, running: Running) -> None:
    """A thread handler ran on `cancel_grace` seconds after its cancel was
    requested: tell the parent the job is past its hard limit now, so that
    it replaces this worker and charges that job alone."""
    if worker._running.get(running.job.id) is not running:
        return  # it returned in time
    log.warning(
        "job.cancel_grace_over",
        **worker._fields(running.job),
        grace=worker.cancel_grace,
        detail="the handler ignored the cancel: its worker is replaced",
    )
    worker.channel.send({"t": "job", "id": str(running.job.id), "hard": GRACE_KILL_AFTER})


def _cancelling() -> bool:
    """Whether the current task was asked to cancel (by `Task.cancel`), as
    opposed to code it awaited raising `CancelledError` of its own accord."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _span_outcome(
    stop_reason: StopReason | None, outcome: Write | None
) -> tuple[Outcome, str | None]:
    """(outcome, error) for an execution's span, as the execution decided it:
    the metrics' names, with "dead" for a failure that spent the last attempt
    (the same test the database's fail applies)."""
    if stop_reason is StopReason.LEASE_LOST:
        return Outcome.LEASE_LOST, None
    if outcome is None:
        return Outcome.RELEASED, None
    kind, job, arg = outcome
    if kind == "complete":
        return Outcome.COMPLETED, None
    if kind == "fail":
        spent = job.attempts >= job.max_attempts
        return (Outcome.DEAD if spent else Outcome.FAILED), str(arg).split("\n", 1)[0]
    return (Outcome.SNOOZED if kind == "snooze" else Outcome.CANCELLED), None


def _stopped_by_cancel(running: Running, outcome: Write | None) -> bool:
    """Whether a job asked to stop ran to another end than its park (which
    the queue turns into the cancel by itself) while it still held the job."""
    if outcome is not None and outcome[0] == "park":
        return False
    return running.context.cancel_requested and running.stop_reason is not StopReason.LEASE_LOST


def requested(
    running: Running,
    request: Snooze | Cancel | Parked | LeaseLost,
    timer: asyncio.Timeout | None,
) -> Write | None:
    """The outcome a handler asked for by raising: snooze, cancel, or park
    (its sleep or wait parked the job). A `LeaseLost` of its own job (a step
    or an event it could not record, fenced by the claim) ends the attempt
    as lost, as when the renewal finds it; another job's is its failure."""
    job = running.job
    if isinstance(request, Snooze):
        return ("snooze", job, request.delay)
    if isinstance(request, Cancel):
        return ("cancel", job, request.reason)
    if isinstance(request, Parked):
        return ("park", job, request.step)
    if request.job_id != job.id:
        return ("fail", job, failure_text(job, running.handler, request, timer))
    running.stop_reason = StopReason.LEASE_LOST
    return None


def settle_parked(worker: Worker, job: Job, step: str) -> None:
    """The job parked itself at a sleep or a wait (the queue gave its attempt
    back in the same statement): nothing left to write. It may have been
    claimed again already (a signal or its wake came first): that claim's
    hold is kept."""
    held = worker._held.get(job.id)
    if held is not None and held.claim_token == job.claim_token:
        del worker._held[job.id]
    worker.metrics.job_ended(
        job.queue, job.job_type, Outcome.SNOOZED, worker._ran.pop(job.id, None)
    )
    log.info("job.parked", **worker._fields(job), step=step)
