"""The supervisor's background services: the queue's maintenance (run by the
elected leader), the database watch behind `/readyz`, the watch on the
database's oldest xmin, and the systemd watchdog. Each is a task on the
supervisor's loop; none blocks it."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from .. import systemd
from ..backoff import backoff
from ..config import Config
from ..errortext import one_line
from ..log import get_logger
from ..metrics import Metrics
from ..queue.api import AsyncQueue
from ..queue.errors import DatabaseRefused, JobNotFound, SchemaMissing
from ..queue.faults import Fault, classify
from ..queue.model import JobStatus
from ..queue.reports import Summary, XminHolder
from ..redact import redact_text
from . import decisions
from .maintenance import (
    BatchSweeper,
    BatchSweeperConfig,
    Cleaner,
    CleanerConfig,
    Leadership,
    LeaseReaper,
    ReaperConfig,
    Scheduler,
    SummaryConfig,
    SummaryLogger,
    WorkflowGauge,
    run_periodically,
)

PING_INTERVAL: Final = 1.0  # /readyz follows the database within a few seconds
PING_TIMEOUT: Final = 2.0
READY_WINDOW: Final = 5.0  # /readyz: the database answered this recently
NO_JOB: Final = uuid.UUID(int=0)  # a read by primary key that finds nothing
XMIN_INTERVAL: Final = 5.0  # the oldest-xmin gauge: a cheap read of pg_stat_activity
REQUEUE_TIMEOUT: Final = 10.0  # one requeue_crashed call
REQUEUE_PATIENCE: Final = 60.0  # retrying it; then the lease reaper takes over

log = get_logger("supervisor")


def may_pass(exc: BaseException) -> bool:
    """Whether a database error looks like an outage a retry may outlast: the
    server unreachable, a broken connection, a timeout, a read-only or locked
    database (`queue.faults`). A refused connection (a wrong password) and a
    missing schema do not pass with time."""
    if isinstance(exc, DatabaseRefused | SchemaMissing):
        return False
    return isinstance(exc, TimeoutError | OSError) or classify(exc) is not Fault.PERMANENT


def start_maintenance(
    config: Config,
    queue: AsyncQueue,
    leadership: Leadership,
    metrics: Metrics,
    workers: Callable[[], int],
    *,
    declared: Callable[[], Sequence[Mapping[str, Any]] | None] = lambda: None,
) -> list[asyncio.Task[None]]:
    """Start leadership and the services only the leader runs; their tasks.
    Each summary goes to the metrics and to systemd's status line, with the
    number of live `workers()`. `declared()` gives the app's schedules as a
    worker reported them (None until one has)."""

    def on_summary(summary: Summary) -> None:
        metrics.record_summary(summary)
        systemd.status(
            f"{workers()} workers; {summary.count(JobStatus.PENDING)} pending, "
            f"{summary.count(JobStatus.RUNNING)} running"
        )

    retention: dict[JobStatus | str, float | None] = {
        JobStatus.COMPLETED: config.retention_completed,
        JobStatus.CANCELLED: config.retention_cancelled,
        JobStatus.DEAD: config.retention_dead,
    }
    services = (
        LeaseReaper(queue, ReaperConfig(config.reap_interval), on_reaped=metrics.record_reaped),
        Cleaner(queue, CleanerConfig(config.cleanup_interval, retention)),
        BatchSweeper(queue, BatchSweeperConfig(config.cleanup_interval)),
        SummaryLogger(queue, SummaryConfig(config.summary_interval), on_summary=on_summary),
        Scheduler(queue, declared, on_fired=metrics.record_schedule_fired),
    )
    tasks = [asyncio.create_task(run_periodically(leadership, first_delay=0.0))]
    for service in services:
        loop = run_periodically(service, when=lambda: leadership.is_leader)
        tasks.append(asyncio.create_task(loop))
    workflows = WorkflowGauge(
        queue,
        SummaryConfig(config.summary_interval),
        leading=lambda: leadership.is_leader,
        on_states=metrics.record_workflows,
    )
    tasks.append(asyncio.create_task(run_periodically(workflows)))  # every supervisor: see it
    return tasks


class DatabaseWatch:
    """Pings the database about once a second; `up` is what `/readyz` reads.
    An error that is not an outage (`may_pass`) still counts as an answer:
    the server is there. A change either way is logged once."""

    def __init__(self, queue: AsyncQueue, *, interval: float = PING_INTERVAL) -> None:
        self.queue, self.interval = queue, interval
        self.answered_at: float | None = None
        self._down_logged = False

    @property
    def up(self) -> bool:
        answered = self.answered_at
        return answered is not None and time.monotonic() - answered < READY_WINDOW

    async def ping(self) -> bool:
        """One ping; True if the database answered."""
        try:
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow
            # the task's cancellation when the call finishes at the same moment,
            # and this loop would then outlive the supervisor's stop.
            async with asyncio.timeout(PING_TIMEOUT):
                await self.queue.get(NO_JOB)
        except JobNotFound:
            pass  # the answer expected: the database is there
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not may_pass(exc):
                return self._answered()  # with an error, but it answered (a missing schema)
            if not self._down_logged:
                error = f"no answer within {PING_TIMEOUT:g}s"
                if not isinstance(exc, TimeoutError):
                    error = one_line(exc)
                log.warning("database.unavailable", error=error)
                self._down_logged = True
            return False
        return self._answered()

    def _answered(self) -> bool:
        self.answered_at = time.monotonic()
        if self._down_logged:
            log.info("database.available")
            self._down_logged = False
        return True

    async def run(self) -> None:
        while True:
            await self.ping()
            await asyncio.sleep(self.interval)


def xmin_watch(
    queue: AsyncQueue, metrics: Metrics, warn_after: Callable[[], float]
) -> XminWatch | None:
    """The `XminWatch` of a PostgreSQL queue; None on SQLite, which keeps no
    transaction horizon."""
    return XminWatch(queue, metrics, warn_after=warn_after) if queue.engine == "postgres" else None


class XminWatch:
    """Every `XMIN_INTERVAL` seconds, which server process holds back the
    oldest xmin of the queue's database (`AsyncQueue.oldest_xmin`) and for
    how long: the gauge `jobvisor_db_oldest_xmin_age_seconds`, and past
    `warn_after()` seconds a `database.xmin_held` warning naming it (once
    per holder) and a warning in `/readyz`'s body. A forgotten
    `idle in transaction` session stops VACUUM on every table, and the jobs
    table, where every job leaves dead row versions, bloats first.

    A failed read changes nothing: the outage is `DatabaseWatch`'s to report."""

    def __init__(
        self,
        queue: AsyncQueue,
        metrics: Metrics,
        *,
        warn_after: Callable[[], float],
        interval: float = XMIN_INTERVAL,
    ) -> None:
        self.queue, self.metrics, self.warn_after, self.interval = (
            queue,
            metrics,
            warn_after,
            interval,
        )
        self.warning: str | None = None  # what /readyz adds to its body
        self._warned_pid: int | None = None

    async def run_once(self) -> XminHolder | None:
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow
        # the task's cancellation, and this loop would outlive a stop.
        async with asyncio.timeout(PING_TIMEOUT):
            holder = await self.queue.oldest_xmin()
        self.metrics.record_oldest_xmin(holder.age if holder is not None else 0.0)
        warn_after = self.warn_after()
        warning = None
        if holder is not None:
            app = redact_text(holder.application_name)
            warning = decisions.xmin_warning(
                pid=holder.pid,
                application_name=app,
                state=holder.state,
                age=holder.age,
                warn_after=warn_after,
            )
        if warning is not None and holder is not None and holder.pid != self._warned_pid:
            log.warning(
                "database.xmin_held",
                pid=holder.pid,
                application_name=redact_text(holder.application_name),
                state=holder.state,
                backend_type=holder.backend_type,
                age=round(holder.age, 1),
                warn_after=warn_after,
                note="vacuum cannot remove dead rows while this transaction stays open",
            )
            self._warned_pid = holder.pid
        elif warning is None and self._warned_pid is not None:
            log.info("database.xmin_released", pid=self._warned_pid)
            self._warned_pid = None
        self.warning = warning
        return holder

    async def run(self) -> None:
        while True:
            try:
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # an outage: DatabaseWatch says so
                log.debug("database.xmin_unknown", error=one_line(exc))
            await asyncio.sleep(self.interval)


async def watchdog(interval: float, last_tick: Callable[[], float], tick: float) -> None:
    """systemd's watchdog, pinged from the supervisor's loop, so a wedged loop
    stops the pings."""
    while True:
        if time.monotonic() - last_tick() < max(interval, tick * 4):
            systemd.watchdog()
        await asyncio.sleep(interval)


async def requeue_jobs(
    queue: AsyncQueue,
    worker_id: str,
    *,
    error: str,
    culprit: str | None,
    stopped: Callable[[], bool],
) -> int | None:
    """Hand back a dead worker's jobs: `requeue_crashed`, retried while the
    database is away (until `REQUEUE_PATIENCE`, or `stopped()`); the lease
    reaper is the fallback if it stays away. With a `culprit` (the job past
    its hard limit), only that job is charged; the jobs beside it go back
    with their attempt given back. Returns how many jobs the worker held,
    or None when the database could not say."""
    give_up_at = time.monotonic() + REQUEUE_PATIENCE
    attempt = 0
    while True:
        try:
            async with asyncio.timeout(REQUEUE_TIMEOUT):
                count = await queue.requeue_crashed(worker_id, error=error, culprit=culprit)
        except Exception as exc:
            attempt += 1
            delay = backoff(attempt, base=0.2, cap=5.0, jitter=0.0)
            if time.monotonic() + delay > give_up_at or stopped():
                log.error(
                    "worker.requeue_failed",
                    worker_id=worker_id,
                    error=one_line(exc),
                    note="its jobs go back when their lease expires",
                )
                return None
            log.warning("worker.requeue_retry", worker_id=worker_id, error=one_line(exc))
            await asyncio.sleep(delay)
            continue
        if count:
            log.warning("worker.jobs_requeued", worker_id=worker_id, count=count, error=error)
        return count


async def await_requeues(requeues: set[asyncio.Task[int | None]], *, patience: float) -> None:
    """At exit: wait for the requeues still in flight, then give up on them."""
    if not requeues:
        return
    _, pending = await asyncio.wait(requeues, timeout=patience)
    for unfinished in pending:
        unfinished.cancel()
    if pending:
        log.error(
            "supervisor.requeue_unfinished",
            workers=len(pending),
            note="their jobs go back when their lease expires",
        )
