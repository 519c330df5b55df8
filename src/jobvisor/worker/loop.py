"""One worker's event loop: it starts its loops, supervises them, and stops
them in order.

Design note. A worker is a handful of tasks on one asyncio loop that share
a few in-memory tables (held, running and finished jobs, their buffered
outcomes) on the `Worker`, and never block each other. Each part lives in
a module of its own, as functions of the worker, so that the hot path costs
no more than a method call:

- `claiming`: the claim loop claims as many jobs as there are free slots,
  and a job that jumps the queue gets an express claim;
- `running`: a task per job runs its handler and buffers its outcome; a
  cancel request or a lost lease stops the handler;
- `settling`: the flush loop writes the buffered outcomes in batches;
- `leases`: the renew loop extends every held lease, and the heartbeat loop
  reports to the parent and notices when it is gone;
- `listening`: on PostgreSQL, notices wake the claim loop and carry cancel
  requests;
- `errors`: the text a failed attempt records.

Every loop is supervised (`supervision`). An error is classified
(`queue.faults`): an unreachable database is waited out with backoff for as
long as it lasts; an error that may pass (a read-only server, a full disk)
is retried with backoff for at most `FAULT_LIMIT` seconds; anything else,
or an error that escapes a loop, is logged with its traceback and stops the
worker, which then exits non-zero (`clean` is False) so that its supervisor
requeues its jobs and replaces it. A loop never dies while the worker looks
alive.

`stop()` (SIGTERM) ends claiming; running jobs get `shutdown_timeout` to
finish; the rest are cancelled and released (attempt not counted); the
outcomes are flushed; then the tasks end. `stop(fast=True)` (SIGQUIT, or a
second SIGTERM) cuts the wait short.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
import time
import uuid
from collections.abc import Awaitable, Sequence
from typing import Any, Final

from .. import tracing
from ..backoff import backoff
from ..errortext import error_text, one_line
from ..log import get_logger
from ..metrics import WorkerMetrics
from ..queue import validate
from ..queue.api import AsyncQueue
from ..queue.faults import Fault, classify
from ..queue.model import Job
from .claiming import EXPRESS_MIN_CONCURRENCY, claim_loop
from .leases import heartbeat_loop, renew_loop
from .listening import listen_loop
from .protocol import ControlChannel
from .registry import Registry
from .running import Running, StopReason
from .settling import Write, flush_loop
from .supervision import FAULT_LIMIT, RETRY_BASE, RETRY_CAP, Failing, Loop, LoopFailed

log = get_logger("worker")

SQLITE_MAX_POLL: Final = 0.1  # SQLite has no NOTIFY: stay responsive

# What `JOBVISOR_CONCURRENCY=auto` (the default) gives a worker. A waiting
# coroutine costs a few kilobytes and no thread, and a worker claims and
# completes as many jobs per statement as it has slots, so many slots make
# short jobs cheap and let I/O-bound ones overlap. A plain function holds one
# of the worker's threads (and, for Django, a database connection) for as
# long as it runs, so an app with any of them keeps the smaller figure.
ASYNC_CONCURRENCY: Final = 200
THREAD_CONCURRENCY: Final = 20


def auto_concurrency(registry: Registry) -> int:
    """The concurrency `auto` means for the handlers of `registry`."""
    return THREAD_CONCURRENCY if registry.needs_threads else ASYNC_CONCURRENCY


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
        lease: float = validate.DEFAULT_LEASE,
        poll_interval: float = validate.DEFAULT_POLL_INTERVAL,
        shutdown_timeout: float = validate.DEFAULT_SHUTDOWN_TIMEOUT,
        cancel_grace: float = validate.DEFAULT_CANCEL_GRACE,
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
        # The types this worker claims (None: any); see `Registry.runnable_types`.
        runnable = registry.runnable_types()
        self.job_types = None if runnable is None else sorted(runnable)
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

        self._running: dict[uuid.UUID, Running] = {}
        self._held: dict[uuid.UUID, Job] = {}  # claimed and not yet settled in the database
        self._ran: dict[uuid.UUID, float] = {}  # handler run time, until the outcome is settled
        self._completed: list[Job] = []
        self._results: dict[uuid.UUID, str] = {}  # result JSON of completed jobs, until written
        # The latest progress a running handler reported, until a renewal writes it
        # (a thread handler sets an entry: one dict store, safe under the GIL).
        self._progress: dict[uuid.UUID, str] = {}
        self._released: list[Job] = []
        self._writes: list[Write] = []

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
        self._failing: dict[Loop, Failing] = {}
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
            self._supervise(Loop.RENEW, renew_loop(self)),
            self._supervise(Loop.HEARTBEAT, heartbeat_loop(self)),
        ]
        if self._listens:
            helpers.append(self._supervise(Loop.LISTEN, listen_loop(self)))
        flusher = self._supervise(Loop.FLUSH, flush_loop(self))
        claimer = self._supervise(Loop.CLAIM, claim_loop(self))
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
        failing = self._failing.setdefault(loop, Failing(time.monotonic()))
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
            failing = self._failing[loop] = Failing(now)
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
        error = error_text(exc) if unexpected else one_line(exc)
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

    # --- the jobs' side ------------------------------------------------------

    def _report_progress(self, job_id: uuid.UUID, text: str) -> None:
        """Where a handler's `job.progress` goes: the next renewal writes it."""
        self._progress[job_id] = text

    async def _drain(self) -> None:
        """Give running jobs `shutdown_timeout` (none when fast) to end, then
        stop the rest: they are released."""
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

    def _fields(self, job: Job) -> dict[str, Any]:
        return {
            "job_id": str(job.id),
            "job_type": job.job_type,
            "queue": job.queue,
            "attempt": job.attempts,
            "correlation_id": job.correlation_id,
            "worker_id": self.worker_id,
        }
