"""One worker's event loop: claim, run, settle, renew, drain.

Design note. A worker is a handful of tasks on one asyncio loop that share
a few in-memory tables and never block each other:

- the claim loop claims as many jobs as there are free slots, in one
  statement, and starts a task per job. It sleeps when the queue is empty
  (until a PostgreSQL NOTIFY, or an adaptive poll) or when every slot is busy.
- a job that jumps the queue (a higher priority than the jobs of the last
  full claim) does not wait for the next turn of a busy claim loop: its
  notice starts an express claim of one job of a higher priority at once,
  into the slot the claim loop of a worker with many slots leaves to it
  (`EXPRESS_MIN_CONCURRENCY`).
- a job task runs the handler (on the loop, or in the thread pool for a plain
  function) under the job's correlation id and its timeout, then records the
  outcome in a buffer. It never writes to the database itself.
- the flush loop writes the buffered outcomes: all completions in one
  `complete_many`, all releases in one `release_many`, the rarer fails,
  snoozes and cancels each in its own guarded statement, concurrently. What
  finishes while a flush is in flight waits for the next flush, so batches
  grow with the load and a quiet worker writes at once. A database error
  puts the batch back and retries with backoff: an outcome is never dropped.
- the renew loop extends every held lease (running, or finished but not yet
  written) in one `renew_many` per half lease. A job whose lease was lost is
  cancelled, and whatever its handler returns is dropped: the job belongs to
  someone else now.
- a cancel request (`queue.cancel` of a running job) arrives by a PostgreSQL
  notice in the listen loop, and with every renewal on either engine. An
  async handler's task is cancelled; a thread handler sees
  `job.cancel_requested` and gets `cancel_grace` seconds to return, after
  which the parent is told the job is past its hard limit now, so the worker
  is replaced and that job alone is charged. Whatever outcome follows, the
  database ends the job `cancelled`.
- the heartbeat loop tells the parent the loop is turning and which loops
  are failing, reports metrics, and stops the worker when the parent is gone.

Every loop is supervised. An error is classified (`queue.faults`): an
unreachable database is waited out with backoff for as long as it lasts; an
error that may pass (a read-only server, a full disk) is retried with backoff
for at most `FAULT_LIMIT` seconds; anything else, or an error that escapes a
loop, is logged with its traceback and stops the worker, which then exits
non-zero (`clean` is False) so that its supervisor requeues its jobs and
replaces it. A loop never dies while the worker looks alive.

`stop()` (SIGTERM) ends claiming; running jobs get `shutdown_timeout` to
finish; the rest are cancelled and released (attempt not counted); the
outcomes are flushed; then the tasks end. `stop(fast=True)` (SIGQUIT, or a
second SIGTERM) cuts the wait short.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import enum
import logging
import os
import threading
import time
import traceback
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, Literal

from .. import tracing
from ..backoff import backoff
from ..log import get_logger
from ..metrics import WorkerMetrics
from ..queue.api import AsyncQueue
from ..queue.correlation import correlation_id_var
from ..queue.errors import InvalidArgument, LeaseLost
from ..queue.faults import Fault, classify
from ..queue.internal import service_ops
from ..queue.model import Job, JobStatus
from ..queue.notices import NoticeKind
from ..queue.ops import result_json
from .protocol import HEARTBEAT_INTERVAL, ControlChannel, Outcome
from .registry import Cancel, Handler, JobContext, Registry, Snooze

log = get_logger("worker")

MIN_POLL: Final = 0.005  # the first poll after work was found
SQLITE_MAX_POLL: Final = 0.1  # SQLite has no NOTIFY: stay responsive
TRACEBACK_FRAMES: Final = 8  # frames kept in last_error
# The hard limit, in seconds from now, reported to the parent for a thread
# handler that outlived its cancel grace: the parent's watchdog kills at once.
GRACE_KILL_AFTER: Final = 0.001


# How long a loop may keep failing with an error that may pass (a read-only
# server, a full disk) before the worker gives up and exits for a fresh one.
FAULT_LIMIT: Final = 60.0
RETRY_BASE: Final = 0.05  # a loop's first retry after an error, in seconds
RETRY_CAP: Final = 2.0  # and its longest wait between two retries
LISTEN_RETRY_BASE: Final = 0.1
LISTEN_RETRY_CAP: Final = 5.0

# What `JOBVISOR_CONCURRENCY=auto` (the default) gives a worker. A waiting
# coroutine costs a few kilobytes and no thread, and a worker claims and
# completes as many jobs per statement as it has slots, so many slots make
# short jobs cheap and let I/O-bound ones overlap. A plain function holds one
# of the worker's threads (and, for Django, a database connection) for as
# long as it runs, so an app with any of them keeps the smaller figure.
ASYNC_CONCURRENCY: Final = 200
THREAD_CONCURRENCY: Final = 20

# The claim loop of a worker with at least this many slots leaves one of
# them (at most 1%) to express claims, for a job that jumps the queue while
# the worker is busy. A new job's notice says its priority: this needs LISTEN.
EXPRESS_MIN_CONCURRENCY: Final = 100

# A worker starts the jobs of a claim this many at a time, the event loop
# turning between two groups.
START_GROUP: Final = 10


def auto_concurrency(registry: Registry) -> int:
    """The concurrency `auto` means for the handlers of `registry`."""
    return THREAD_CONCURRENCY if registry.needs_threads else ASYNC_CONCURRENCY


class Loop(enum.StrEnum):
    """The long-running tasks of a worker, by the names the logs and the
    heartbeat use."""

    CLAIM = "claim"
    FLUSH = "flush"
    RENEW = "renew"
    LISTEN = "listen"
    HEARTBEAT = "heartbeat"


class LoopFailed(Exception):
    """A loop cannot go on: its error will not pass, or did not in time.
    The error is the `__cause__`; it has been logged."""


class _Failing:
    """A loop's current run of failures (none when its last try passed)."""

    __slots__ = ("fault", "since", "tries")

    def __init__(self, since: float) -> None:
        self.since = since
        self.tries = 0
        self.fault = Fault.UNREACHABLE


def error_text(exc: BaseException) -> str:
    """One line naming the error, then the innermost frames of its traceback."""
    message = str(exc).strip()
    head = f"{type(exc).__name__}: {message.splitlines()[0]}" if message else type(exc).__name__
    frames = traceback.extract_tb(exc.__traceback__)[-TRACEBACK_FRAMES:]
    return head + ("\n" + "".join(traceback.format_list(frames)).rstrip() if frames else "")


class StopReason(enum.StrEnum):
    """Why the worker cancelled a running job."""

    LEASE_LOST = "lease_lost"  # someone else holds it now: its result is dropped
    DRAIN = "drain"  # the stop's deadline passed: it is released
    CANCEL = "cancel"  # a cancel was requested: it ends cancelled


def _failure_text(job: Job, handler: Handler, exc: Exception, timer: asyncio.Timeout | None) -> str:
    """What a failed attempt records: its timeout, or the exception."""
    if timer is not None and timer.expired():
        return f"TimeoutError: {job.job_type} ran past its {handler.timeout:g}s timeout"
    return error_text(exc)


class _Running:
    """A job whose handler is running."""

    __slots__ = ("context", "handler", "job", "stop_reason", "task")

    def __init__(
        self,
        job: Job,
        handler: Handler,
        worker_id: str,
        report: Callable[[uuid.UUID, str], None] | None = None,
    ) -> None:
        self.job = job
        self.handler = handler
        self.context = JobContext(job, worker_id, report)
        self.task: asyncio.Task[None] | None = None
        self.stop_reason: StopReason | None = None  # set when we cancel it


# What a job task hands to the flush: (kind, job, argument); completions and
# releases go to their own buffers, the rest are written one by one.
_Kind = Literal["complete", "fail", "snooze", "cancel"]
_Write = tuple[_Kind, Job, Any]


class Worker:
    """Runs the jobs of `registry` from `queue` until stopped.

    `queue` should be an `AsyncQueue` opened for this worker only. On
    PostgreSQL the worker also holds one connection of its own that LISTENs
    for new jobs. `channel` is the pipe to the supervisor (a no-op standalone).

    With the `otel` extra installed, each execution runs in a span that joins
    the trace recorded at enqueue (see `jobvisor.tracing`), through
    `tracer_provider` or else the global one; without it, nothing is traced
    and nothing is imported.

    A loop that keeps failing with an error that may pass (a read-only
    server, a full disk) for `fault_limit` seconds stops the worker.
    """

    def __init__(
        self,
        queue: AsyncQueue,
        registry: Registry,
        *,
        worker_id: str,
        concurrency: int = 20,
        queues: Sequence[str] = (),
        lease: float = 30.0,
        poll_interval: float = 1.0,
        shutdown_timeout: float = 30.0,
        cancel_grace: float = 10.0,
        channel: ControlChannel | None = None,
        watch_parent: bool | None = None,
        tracer_provider: Any = None,
        fault_limit: float = FAULT_LIMIT,
    ) -> None:
        self.queue = queue
        self.registry = registry
        self.worker_id = worker_id
        self.concurrency = concurrency
        self.queues = tuple(queues)
        self.lease = lease
        self.poll_interval = poll_interval
        self.shutdown_timeout = shutdown_timeout
        self.cancel_grace = cancel_grace
        self.fault_limit = fault_limit
        self.channel = channel or ControlChannel(None)
        engine = queue.engine
        # SQLite's claim loop polls often enough; PostgreSQL without LISTEN
        # (behind PgBouncer, no listen URL) polls every poll_interval.
        self._listens = queue.listens
        sqlite_poll = min(poll_interval, SQLITE_MAX_POLL)
        self._max_poll = poll_interval if engine == "postgres" else sqlite_poll
        watch = self.channel.fd is not None if watch_parent is None else watch_parent
        self._parent_pid = os.getppid() if watch else None
        self.metrics = WorkerMetrics()
        # Decided once, after the app was imported: no per-job cost without a provider.
        self._tracing = tracing.recording(tracer_provider)
        self._tracer_provider = tracer_provider

        self._running: dict[uuid.UUID, _Running] = {}
        self._held: dict[uuid.UUID, Job] = {}  # claimed and not yet settled in the database
        self._ran: dict[uuid.UUID, float] = {}  # handler run time, until the outcome is settled
        self._completed: list[Job] = []
        self._results: dict[uuid.UUID, str] = {}  # result JSON of completed jobs, until written
        # The latest progress a running handler reported, until a renewal writes it
        # (a thread handler sets an entry: one dict store, safe under the GIL).
        self._progress: dict[uuid.UUID, str] = {}
        self._released: list[Job] = []
        self._writes: list[_Write] = []

        self._stop_requested = asyncio.Event()
        self._fast = False
        self._closing = False  # the final flush: the flush loop ends when the buffers are empty
        self._wake = asyncio.Event()  # NOTIFY arrived, or stop
        # Express claims (see the module's note): on while this is true; the
        # lowest priority of the last claim that filled every slot asked for
        # (None: the last claim came back short, the worker is not busy).
        self._express_on = self._listens and concurrency >= EXPRESS_MIN_CONCURRENCY
        self._busy_with: int | None = None
        self._express: asyncio.Task[None] | None = None
        self._express_again = False  # another notice came while one ran
        self._claiming = 0  # the limit of the claim loop's claim in flight
        self._slot_free = asyncio.Event()
        self._flush_wanted = asyncio.Event()
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._threads_busy = 0
        self._threads_lock = threading.Lock()
        self._debug = False
        self._failing: dict[Loop, _Failing] = {}
        self.failed_loop: Loop | None = None  # the loop that stopped the worker, if one did
        # False when an outcome could not be written before exit, or a loop failed.
        self.clean = True

    # --- control ------------------------------------------------------------

    def stop(self, *, fast: bool = False) -> None:
        """Stop claiming and drain (`fast`: release running jobs at once).
        Safe to call more than once; a later fast call shortens a drain."""
        if fast:
            self._fast = True
        if not self._stop_requested.is_set():
            log.info(
                "worker.stopping", worker_id=self.worker_id, fast=fast, running=len(self._running)
            )
        self._stop_requested.set()
        self._wake.set()
        self._slot_free.set()

    @property
    def stopping(self) -> bool:
        return self._stop_requested.is_set()

    @property
    def unhealthy(self) -> list[str]:
        """The loops failing now for a reason other than an unreachable
        database (that one is readiness's business, not liveness's)."""
        return [loop.value for loop, f in self._failing.items() if f.fault is not Fault.UNREACHABLE]

    @property
    def threads_busy(self) -> int:
        """Handler threads still running (abandoned after a timeout or a drain)."""
        return self._threads_busy

    async def run(self) -> None:
        """Run until `stop()` and the drain are done. Sets `clean` to False if
        outcomes were left unwritten (the database stayed unreachable) or a
        loop failed (`failed_loop` names it)."""
        self._debug = log.enabled_for(logging.DEBUG)
        if self.registry.needs_threads:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=self.concurrency, thread_name_prefix="jobvisor-handler"
            )
        log.info(
            "worker.started",
            worker_id=self.worker_id,
            concurrency=self.concurrency,
            queues=",".join(self.queues) or "*",
            job_types=len(self.registry),
            engine=self.queue.engine,
        )
        helpers = [
            self._supervise(Loop.RENEW, self._renew_loop()),
            self._supervise(Loop.HEARTBEAT, self._heartbeat_loop()),
        ]
        if self._listens:
            helpers.append(self._supervise(Loop.LISTEN, self._listen_loop()))
        flusher = self._supervise(Loop.FLUSH, self._flush_loop())
        claimer = self._supervise(Loop.CLAIM, self._claim_loop())
        try:
            await self._stop_requested.wait()
            # A claim in flight finishes (its jobs are released); one stuck
            # waiting for an unreachable database is abandoned.
            claims = [claimer] + ([self._express] if self._express else [])
            await asyncio.wait(claims, timeout=max(1.0, self.shutdown_timeout))
            claimer.cancel()
            if self._express is not None:
                self._express.cancel()
            await self._drain()
            self._closing = True
            self._flush_wanted.set()
            await asyncio.wait([flusher], timeout=max(5.0, self.lease))
            if not flusher.done():
                flusher.cancel()
            unwritten = len(self._completed) + len(self._released) + len(self._writes)
            if unwritten:
                self.clean = False
                detail = "the reaper takes these jobs back when their leases expire"
                log.error(
                    "worker.unwritten", worker_id=self.worker_id, jobs=unwritten, detail=detail
                )
        finally:
            for task in [claimer, flusher, *helpers]:
                task.cancel()
            await asyncio.gather(claimer, flusher, *helpers, return_exceptions=True)
            for message in self.metrics.drain():
                self.channel.send(message)
            if self._executor is not None:
                self._executor.shutdown(wait=False, cancel_futures=True)
            log.info("worker.stopped", worker_id=self.worker_id, clean=self.clean)

    # --- supervision --------------------------------------------------------

    def _supervise(self, loop: Loop, body: Awaitable[None]) -> asyncio.Task[None]:
        return asyncio.create_task(self._supervised(loop, body), name=loop.value)

    async def _supervised(self, loop: Loop, body: Awaitable[None]) -> None:
        """Run one loop; if anything escapes it, or it ends before a stop,
        log it and stop the worker."""
        try:
            await body
        except Exception as exc:
            self._give_up(loop, exc)
        else:
            if not self.stopping:  # only claim and flush end, and only once stopping
                self._give_up(loop, RuntimeError(f"the {loop} loop ended on its own"))

    def _give_up(self, loop: Loop, exc: Exception) -> None:
        error = exc.__cause__ if isinstance(exc, LoopFailed) and exc.__cause__ else exc
        failing = self._failing.setdefault(loop, _Failing(time.monotonic()))
        failing.fault = Fault.PERMANENT  # reported unhealthy until the process ends
        log.error(
            "worker.loop_failed",
            worker_id=self.worker_id,
            loop=loop.value,
            fault=classify(error).value,
            tries=failing.tries,
            failing_for=round(time.monotonic() - failing.since, 3),
            error=error_text(error),
            detail="the worker stops and exits non-zero: its jobs are requeued "
            "and a new worker replaces it",
        )
        self.clean = False
        if self.failed_loop is None:
            self.failed_loop = loop
        # Without a flush nothing more can be written: release at once.
        self.stop(fast=loop is Loop.FLUSH)

    def _retry_in(
        self,
        loop: Loop,
        exc: Exception,
        *,
        base: float = RETRY_BASE,
        cap: float = RETRY_CAP,
        **fields: Any,
    ) -> float:
        """Log that `loop` failed with `exc` and return the seconds to wait
        before it tries again. Raises `LoopFailed` (from `exc`) when the error
        will not pass, or may pass but has lasted past `fault_limit`."""
        now = time.monotonic()
        failing = self._failing.get(loop)
        first = failing is None
        if failing is None:
            failing = self._failing[loop] = _Failing(now)
        failing.tries += 1
        failing.fault = fault = classify(exc)
        if fault is Fault.PERMANENT or (
            fault is Fault.MAY_PASS and now - failing.since > self.fault_limit
        ):
            raise LoopFailed(f"the {loop} loop gave up after {failing.tries} tries") from exc
        delay = backoff(failing.tries, base=base, cap=cap)
        event = "worker.listen_lost" if loop is Loop.LISTEN else f"worker.{loop}_failed"
        # An outage is expected and waited out; anything else is unexpected:
        # an error, with its traceback the first time.
        unexpected = first and fault is not Fault.UNREACHABLE
        emit = log.error if unexpected else log.warning
        error = error_text(exc) if unexpected else _one_line(exc)
        emit(
            event,
            worker_id=self.worker_id,
            error=error,
            fault=fault.value,
            failing_for=round(now - failing.since, 3),
            retry_in=round(delay, 3),
            **fields,
        )
        return delay

    def _recovered(self, loop: Loop) -> None:
        """`loop`'s last try passed: end its run of failures, if it had one."""
        failing = self._failing.pop(loop, None)
        if failing is not None:
            log.info(
                f"worker.{loop}_restored",
                worker_id=self.worker_id,
                tries=failing.tries,
                failing_for=round(time.monotonic() - failing.since, 3),
            )

    # --- claiming -----------------------------------------------------------

    async def _claim_loop(self) -> None:
        idle_wait = MIN_POLL
        queues = list(self.queues) or None
        while not self.stopping:
            free = self.concurrency - len(self._running) - self._kept_for_express()
            if free <= 0:
                self._slot_free.clear()
                await self._slot_free.wait()
                continue
            self._wake.clear()
            self._claiming = free
            try:
                jobs = await self.queue.claim(
                    self.worker_id, queues=queues, limit=free, lease=self.lease
                )
            except Exception as exc:
                await self._wait_wake(self._retry_in(Loop.CLAIM, exc))
                continue
            finally:
                self._claiming = 0
            if self._failing:
                self._recovered(Loop.CLAIM)
            self.metrics.claimed(len(jobs))
            if self.stopping:  # claimed while the stop arrived: give them back
                self._release_unstarted(jobs)
                return
            self._busy_with = min(j.priority for j in jobs) if len(jobs) == free else None
            await self._start_all(jobs)
            if len(jobs) == free:
                idle_wait = MIN_POLL
                await asyncio.sleep(0)  # let the loop breathe between full batches
                continue
            idle_wait = MIN_POLL if jobs else min(idle_wait * 2, self._max_poll)
            await self._wait_wake(idle_wait)

    def _kept_for_express(self) -> int:
        """The slots the claim loop leaves to express claims."""
        return 1 if self._express_on else 0

    def _jump(self, priority: int) -> None:
        """A job of `priority` is new: claim it at once if it jumps the queue
        of a busy worker."""
        busy_with = self._busy_with
        if not self._express_on or busy_with is None or priority <= busy_with or self.stopping:
            return
        if self._express is not None and not self._express.done():
            self._express_again = True
            return
        self._express = asyncio.create_task(self._express_claim(busy_with), name="express")

    async def _express_claim(self, above: int) -> None:
        """Claim jobs of a priority above `above` one at a time while a slot
        is free and notices keep coming. An error only costs the express:
        the claim loop takes the job in its turn (and handles the error)."""
        while not self.stopping and len(self._running) + self._claiming < self.concurrency:
            self._express_again = False
            try:
                jobs = await self.queue.claim(
                    self.worker_id,
                    queues=list(self.queues) or None,
                    limit=1,
                    lease=self.lease,
                    above_priority=above,
                )
            except Exception as exc:
                if classify(exc) is Fault.PERMANENT:
                    self._express_on = False
                    log.error("worker.express_off", worker_id=self.worker_id, error=error_text(exc))
                return
            self.metrics.claimed(len(jobs))
            if self.stopping:  # claimed while the stop arrived: give them back
                self._release_unstarted(jobs)
                return
            if not jobs:
                if self._express_again:
                    continue
                return
            # This task runs the job it claimed, at once, and a new one goes
            # on claiming (the next may be just as urgent).
            running = self._prepare(jobs[0])
            self._express = asyncio.create_task(self._express_claim(above), name="express")
            if running is not None:
                running.task = asyncio.current_task()
                await self._run_job(running)
            return

    async def _wait_wake(self, seconds: float) -> None:
        if self._wake.is_set():
            return
        try:
            async with asyncio.timeout(seconds):
                await self._wake.wait()
        except TimeoutError:
            pass

    async def _listen_loop(self) -> None:
        """Wake the claim loop on every notice of a new job; a `missed` notice
        (listening began, or began again after the connection broke) is
        followed by a claim too, since notices sent meanwhile are lost. The
        queue reconnects by itself while the database is unreachable; any
        other error reaches this loop's supervision."""
        while True:
            try:
                async for notice in self.queue.notifications(self.queues or None):
                    if notice.kind == NoticeKind.CANCEL:
                        if notice.id is not None:
                            self._request_cancel(notice.id)
                        continue
                    if notice.kind == NoticeKind.MISSED:
                        self._recovered(Loop.LISTEN)
                    elif notice.kind == NoticeKind.DONE:
                        continue  # a job ended: no new work
                    elif notice.priority is not None:
                        self._jump(notice.priority)
                    self._wake.set()
            except Exception as exc:
                delay = self._retry_in(
                    Loop.LISTEN, exc, base=LISTEN_RETRY_BASE, cap=LISTEN_RETRY_CAP
                )
                self._wake.set()  # poll at once: the claim retries on its own
                await asyncio.sleep(delay)

    # --- running ------------------------------------------------------------

    async def _start_all(self, jobs: list[Job]) -> None:
        """Start `jobs` a few at a time, letting the loop turn between two
        groups: a notice that came meanwhile waits for one group, not for
        the whole batch."""
        for first in range(0, len(jobs), START_GROUP):
            if first:
                try:
                    await asyncio.sleep(0)
                except asyncio.CancelledError:
                    self._release_unstarted(jobs[first:])
                    raise
                if self.stopping:  # the stop came between two groups: give the rest back
                    self._release_unstarted(jobs[first:])
                    return
            for job in jobs[first : first + START_GROUP]:
                self._start(job)

    def _release_unstarted(self, jobs: list[Job]) -> None:
        for job in jobs:
            self._held[job.id] = job
            self._released.append(job)
        self._flush_wanted.set()

    def _start(self, job: Job) -> None:
        running = self._prepare(job)
        if running is not None:
            running.task = asyncio.create_task(self._run_job(running))

    def _prepare(self, job: Job) -> _Running | None:
        """Hold `job` and make it running, or buffer its failure when no
        handler knows its type."""
        self._held[job.id] = job
        handler = self.registry.get(job.job_type)
        if handler is None:
            write: _Write = ("fail", job, self.registry.unknown_type_error(job.job_type))
            if self._tracing:  # an execution too, if a short one: the trace shows why
                name, error = _span_outcome(None, write)
                with self._span(job) as span:
                    span.set_outcome(name, error=error)
            self._writes.append(write)
            self._flush_wanted.set()
            return None
        running = _Running(job, handler, self.worker_id, self._report_progress)
        self._running[job.id] = running
        return running

    def _span(self, job: Job) -> contextlib.AbstractContextManager[tracing.JobSpan]:
        return tracing.job_span(job, tracing.carrier_of(job), tracer_provider=self._tracer_provider)

    async def _run_job(self, running: _Running) -> None:
        job = running.job
        if self._tracing:
            # The span is current while the handler runs (a thread handler
            # gets a copy of this context), so its own spans are children.
            with self._span(job) as span:
                outcome, duration = await self._execute(running)
                name, error = _span_outcome(running.stop_reason, outcome)
                span.set_outcome(name, error=error)
        else:
            outcome, duration = await self._execute(running)
        self._ran[job.id] = duration
        if running.stop_reason is StopReason.LEASE_LOST:
            self._settle_lost(job)
            return
        if outcome is None:
            self._released.append(job)
            if self._debug:
                log.debug("job.interrupted", **self._fields(job), duration=round(duration, 6))
        elif outcome[0] == "complete":
            self._completed.append(job)
            if outcome[2] is not None:
                self._results[job.id] = outcome[2]
            if self._debug:
                log.debug("job.completed", **self._fields(job), duration=round(duration, 6))
        else:
            self._writes.append(outcome)
        self._flush_wanted.set()

    async def _execute(self, running: _Running) -> tuple[_Write | None, float]:
        """Run the handler under the job's correlation id and timeout. Returns
        the outcome to write (None when we stopped it) and the run time."""
        job, handler = running.job, running.handler
        correlation_id_var.set(job.correlation_id)  # this task's own context
        hard = handler.hard_timeout
        if hard is not None:
            self.channel.send({"t": "job", "id": str(job.id), "hard": hard})
        if self._debug:
            log.debug("job.started", **self._fields(job))
        started = time.monotonic()
        outcome: _Write | None = None
        timer: asyncio.Timeout | None = None
        try:
            context = running.context
            if handler.timeout is None:
                value = await self._call(handler, context)
            else:
                async with asyncio.timeout(handler.timeout) as timer:
                    value = await self._call(handler, context)
        except Snooze as request:
            outcome = ("snooze", job, request.delay)
        except Cancel as request:
            outcome = ("cancel", job, request.reason)
        except asyncio.CancelledError:
            outcome = None  # stopped by us: a cancel request, lease lost, the drain's deadline
        except Exception as exc:
            outcome = ("fail", job, _failure_text(job, handler, exc, timer))
        else:
            outcome = self._completion(job, value)
        finally:
            duration = time.monotonic() - started
            del self._running[job.id]
            self._slot_free.set()
            if hard is not None:
                self.channel.send({"t": "end", "id": str(job.id)})
        if running.context.cancel_requested and running.stop_reason is not StopReason.LEASE_LOST:
            # Asked to stop before it ended: the database ends it cancelled
            # whatever is written, so the logs and metrics say so too.
            outcome = ("cancel", job, "cancel requested")
        return outcome, duration

    def _report_progress(self, job_id: uuid.UUID, text: str) -> None:
        self._progress[job_id] = text

    def _completion(self, job: Job, value: Any) -> _Write:
        """A returned handler's outcome: complete with its value as JSON, or
        fail when the value cannot be stored (not JSON, or too large)."""
        if value is None:
            return ("complete", job, None)
        try:
            text = result_json(value, self.queue.max_result_bytes)
        except InvalidArgument as exc:
            return ("fail", job, f"InvalidResult: {exc}")
        return ("complete", job, text)

    async def _call(self, handler: Handler, context: JobContext) -> Any:
        if handler.is_async:
            return await handler.func(context)
        assert self._executor is not None
        ctx = contextvars.copy_context()
        with self._threads_lock:
            self._threads_busy += 1
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, self._in_thread, ctx, handler.func, context
        )

    def _in_thread(
        self, ctx: contextvars.Context, func: Callable[[JobContext], Any], context: JobContext
    ) -> Any:
        try:
            return ctx.run(func, context)
        finally:
            with self._threads_lock:
                self._threads_busy -= 1

    def _lose(self, job: Job) -> None:
        """The lease of a job was lost: stop its handler, drop its result."""
        running = self._running.get(job.id)
        if running is None or running.task is None:
            return  # finished already; its buffered outcome reports the loss when written
        running.stop_reason = StopReason.LEASE_LOST
        running.task.cancel()

    def _request_cancel(self, job_id: uuid.UUID) -> None:
        """Someone asked to cancel a job: stop its handler (an async one at
        its next await; a thread gets `cancel_grace` seconds, then its worker
        is replaced). Asked again, nothing more happens."""
        running = self._running.get(job_id)
        if running is None or running.task is None or running.context.cancel_requested:
            return  # not running here (finished: the database settles it), or asked already
        running.context._cancel_requested = True
        log.info("job.cancel_requested", **self._fields(running.job))
        if running.handler.is_async:
            if running.stop_reason is None:
                running.stop_reason = StopReason.CANCEL
                running.task.cancel()
            return
        loop = asyncio.get_running_loop()
        loop.call_later(self.cancel_grace, self._cancel_grace_over, running)

    def _cancel_grace_over(self, running: _Running) -> None:
        """A thread handler ran on `cancel_grace` seconds after its cancel was
        requested: tell the parent the job is past its hard limit now, so that
        it replaces this worker and charges that job alone."""
        if self._running.get(running.job.id) is not running:
            return  # it returned in time
        log.warning(
            "job.cancel_grace_over",
            **self._fields(running.job),
            grace=self.cancel_grace,
            detail="the handler ignored the cancel: its worker is replaced",
        )
        self.channel.send({"t": "job", "id": str(running.job.id), "hard": GRACE_KILL_AFTER})

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (0.0 if self._fast else self.shutdown_timeout)
        if self._running:
            log.info(
                "worker.draining",
                worker_id=self.worker_id,
                running=len(self._running),
                timeout=self.shutdown_timeout,
            )
        while self._running and not self._fast:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            self._slot_free.clear()
            try:
                async with asyncio.timeout(remaining):
                    await self._slot_free.wait()
            except TimeoutError:
                break
        left = list(self._running.values())
        for running in left:
            running.stop_reason = StopReason.DRAIN
            if running.task is not None:
                running.task.cancel()
        if left:
            log.info("worker.releasing", worker_id=self.worker_id, jobs=len(left))
            await asyncio.gather(*(r.task for r in left if r.task), return_exceptions=True)

    # --- settling -----------------------------------------------------------

    async def _flush_loop(self) -> None:
        while True:
            if self._closing and not (self._completed or self._released or self._writes):
                return
            await self._flush_wanted.wait()
            self._flush_wanted.clear()
            await asyncio.sleep(0)  # gather what this turn of the loop finishes
            try:
                await self._flush()
            except Exception as exc:
                self._flush_wanted.set()
                await asyncio.sleep(self._retry_in(Loop.FLUSH, exc))
            else:
                if self._failing:
                    self._recovered(Loop.FLUSH)

    async def _flush(self) -> None:
        """Write every buffered outcome. On a database error the unwritten
        part goes back to the buffers and the error is raised."""
        if self._completed:
            batch, self._completed = self._completed, []
            try:
                lost = await self.queue.complete_many(batch, results=self._results)
            except BaseException:
                self._completed[:0] = batch
                raise
            self._settled(batch, lost, Outcome.COMPLETED)
        if self._released:
            batch, self._released = self._released, []
            try:
                lost = await self.queue.release_many(batch)
            except BaseException:
                self._released[:0] = batch
                raise
            self._settled(batch, lost, Outcome.RELEASED)
        if self._writes:
            await self._flush_writes()

    async def _flush_writes(self) -> None:
        """Write the buffered single outcomes (fail, snooze, cancel...) at once;
        those that met an error that may pass go back to the buffer."""
        writes, self._writes = self._writes, []
        results = await asyncio.gather(*(self._write(*w) for w in writes), return_exceptions=True)
        retry: list[_Write] = []
        first: BaseException | None = None
        for write, result in zip(writes, results, strict=True):
            if isinstance(result, Exception) and classify(result) is not Fault.PERMANENT:
                retry.append(write)
                first = first or result
            elif isinstance(result, BaseException):
                # Not the database's state: a bug. Stop holding the job;
                # the reaper takes it back when its lease expires.
                self._held.pop(write[1].id, None)
                self._ran.pop(write[1].id, None)
                log.error("job.settle_failed", **self._fields(write[1]), error=error_text(result))
        self._writes[:0] = retry
        if first is not None:
            raise first

    async def _write(self, kind: str, job: Job, arg: Any) -> None:
        try:
            if kind == "fail":
                status = await self.queue.fail(job, arg)
                outcome = Outcome.DEAD if status == JobStatus.DEAD else Outcome.FAILED
            elif kind == "snooze":
                await self.queue.snooze(job, arg)
                outcome = Outcome.SNOOZED
            else:
                await self.queue.cancel_held(job, arg)
                outcome = Outcome.CANCELLED
        except LeaseLost:
            self._settle_lost(job)
            return
        self._held.pop(job.id, None)
        self.metrics.job_ended(job.queue, job.job_type, outcome, self._ran.pop(job.id, None))
        fields = self._fields(job)
        if kind == "fail":
            event = f"job.{outcome}"
            log.warning(event, **fields, error=str(arg).split("\n", 1)[0])
        elif kind == "snooze":
            log.info("job.snoozed", **fields, delay=arg)
        else:
            log.info("job.cancelled", **fields, reason=arg)

    def _settled(self, batch: list[Job], lost: list[Job], outcome: Outcome) -> None:
        lost_ids = {j.id for j in lost} if lost else set()
        job_ended = self.metrics.job_ended
        held, ran = self._held, self._ran
        if self._results:
            for job in batch:
                self._results.pop(job.id, None)
        for job in batch:
            if job.id in lost_ids:
                self._settle_lost(job)
            else:
                held.pop(job.id, None)
                job_ended(job.queue, job.job_type, outcome, ran.pop(job.id, None))
        if outcome is Outcome.RELEASED and len(batch) > len(lost):
            log.info("worker.released", worker_id=self.worker_id, jobs=len(batch) - len(lost))

    def _settle_lost(self, job: Job) -> None:
        self._held.pop(job.id, None)
        self._ran.pop(job.id, None)
        self.metrics.lease_lost()
        detail = "result dropped: the job is no longer held by this worker"
        log.warning("job.lease_lost", **self._fields(job), detail=detail)

    # --- leases and the parent ---------------------------------------------

    async def _renew_loop(self) -> None:
        interval = self.lease / 2
        cap = max(RETRY_BASE, interval / 4)
        delay = interval
        while True:
            await asyncio.sleep(delay)
            held = list(self._held.values())
            delay = interval
            if not held:
                if self._failing:  # nothing left to renew: nothing failing either
                    self._recovered(Loop.RENEW)
                continue
            progress = None
            if self._progress:
                progress, self._progress = self._progress, {}
            try:
                renewal = await service_ops(self.queue).renew_held(
                    held, lease=self.lease, progress=progress
                )
            except Exception as exc:
                if progress:  # written next time, unless newer progress came in since
                    self._progress = {**progress, **self._progress}
                delay = self._retry_in(Loop.RENEW, exc, cap=cap, jobs=len(held))
                continue
            if self._failing:
                self._recovered(Loop.RENEW)
            for job in renewal.lost:
                self._lose(job)
            for job_id in renewal.cancel_requested:
                self._request_cancel(job_id)

    async def _heartbeat_loop(self) -> None:
        watching = self.channel.fd is not None
        while True:
            unhealthy = self.unhealthy
            self.channel.send({"t": "hb", "unhealthy": unhealthy} if unhealthy else {"t": "hb"})
            for message in self.metrics.drain():
                self.channel.send(message)
            parent_gone = self._parent_pid is not None and os.getppid() != self._parent_pid
            if (parent_gone or (watching and self.channel.fd is None)) and not self.stopping:
                log.warning(
                    "worker.parent_gone", worker_id=self.worker_id, parent_pid=self._parent_pid
                )
                self.stop()
            await asyncio.sleep(HEARTBEAT_INTERVAL)

    def _fields(self, job: Job) -> dict[str, Any]:
        return {
            "job_id": str(job.id),
            "job_type": job.job_type,
            "queue": job.queue,
            "attempt": job.attempts,
            "correlation_id": job.correlation_id,
            "worker_id": self.worker_id,
        }


def _span_outcome(
    stop_reason: StopReason | None, outcome: _Write | None
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


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__
