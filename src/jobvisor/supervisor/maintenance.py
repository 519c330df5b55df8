"""The queue's maintenance, run by the supervisor on timers.

Each service is small: a frozen config, `run_once()` (what tests call), and
`run_periodically()` is the thin loop around it, with jitter so that many
hosts do not hit the database in step, which logs a failure and carries on.

With several supervisors on one database only the elected leader runs them:
`Leadership` holds a lease row (`leader_attempt_elect`) for `ttl` seconds and
renews it every `ttl / 3`; a supervisor that cannot renew stops acting as the
leader before its lease runs out, and a clean stop resigns at once so another
host takes over without waiting. The services themselves are safe to run
twice at once (every statement is guarded), so leadership saves work; it is
not what keeps the data right.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol

from ..errortext import one_line
from ..log import get_logger
from ..queue.api import AsyncQueue
from ..queue.internal import service_ops
from ..queue.model import JobStatus
from ..queue.reports import Summary
from ..schedules import ScheduleSpec, due_ticks

LEADER_NAME: Final = "maintenance"
LEADER_TTL: Final = 15.0
JITTER: Final = 0.1

log = get_logger("maintenance")


class Service(Protocol):
    name: str

    @property
    def interval(self) -> float: ...

    async def run_once(self) -> object: ...


@dataclasses.dataclass(frozen=True, slots=True)
class ReaperConfig:
    interval: float


class LeaseReaper:
    """Takes back running jobs whose lease expired (their worker vanished
    without the supervisor seeing it: another host, a lost connection)."""

    name = "reaper"

    def __init__(
        self,
        queue: AsyncQueue,
        config: ReaperConfig,
        *,
        on_reaped: Callable[[Mapping[tuple[str, str], int]], None] | None = None,
    ) -> None:
        self.queue, self.config, self.on_reaped = queue, config, on_reaped

    @property
    def interval(self) -> float:
        return self.config.interval

    async def run_once(self) -> int:
        by_type = await self.queue.reap_expired_by_type()
        count = sum(by_type.values())
        if count:
            types = ",".join(sorted({job_type for _, job_type in by_type}))
            log.warning("maintenance.leases_reaped", count=count, job_types=types)
            if self.on_reaped is not None:
                self.on_reaped(by_type)
        return count


@dataclasses.dataclass(frozen=True, slots=True)
class CleanerConfig:
    interval: float
    retention: Mapping[JobStatus | str, float | None]  # a status left out is kept


class Cleaner:
    """Deletes terminal jobs past their status's retention, in batches, the
    batches (`Queue.batch`) whose every job is past it, whole, and the key
    rate buckets that have refilled (`prune_key_buckets`)."""

    name = "cleaner"

    def __init__(self, queue: AsyncQueue, config: CleanerConfig) -> None:
        self.queue, self.config = queue, config

    @property
    def interval(self) -> float:
        return self.config.interval

    async def run_once(self) -> int:
        count = await self.queue.cleanup(self.config.retention)
        if count:
            log.info("maintenance.jobs_deleted", count=count)
        batches = await service_ops(self.queue).batch_cleanup(self.config.retention)
        if batches:
            log.info("maintenance.batches_deleted", count=batches)
        buckets = await service_ops(self.queue).prune_key_buckets()
        if buckets:
            log.debug("maintenance.key_buckets_pruned", count=buckets)
        return count


@dataclasses.dataclass(frozen=True, slots=True)
class BatchSweeperConfig:
    interval: float


class BatchSweeper:
    """The safety net of batches: a closed batch with no unfinished member
    whose callbacks were never enqueued gets them (`service_ops(queue).batch_sweep`). The
    statement that finishes a batch's last member enqueues them itself, so a
    batch found here means something went wrong: it is logged as a warning."""

    name = "batch_sweeper"

    def __init__(self, queue: AsyncQueue, config: BatchSweeperConfig) -> None:
        self.queue, self.config = queue, config

    @property
    def interval(self) -> float:
        return self.config.interval

    async def run_once(self) -> int:
        count = await service_ops(self.queue).batch_sweep()
        if count:
            log.warning("maintenance.batches_swept", count=count)
        return count


@dataclasses.dataclass(frozen=True, slots=True)
class SummaryConfig:
    interval: float


class SummaryLogger:
    """Logs one `queue.summary` line: jobs by status, the oldest due job's age."""

    name = "summary"

    def __init__(
        self,
        queue: AsyncQueue,
        config: SummaryConfig,
        *,
        on_summary: Callable[[Summary], None] | None = None,
    ) -> None:
        self.queue, self.config, self.on_summary = queue, config, on_summary

    @property
    def interval(self) -> float:
        return self.config.interval

    async def run_once(self) -> Summary:
        summary = await self.queue.summary()
        counts = {status.value: summary.count(status) for status in JobStatus}
        oldest = max(summary.oldest_pending_age.values(), default=0.0)
        log.info(
            "queue.summary",
            total=summary.total,
            queues=len({r.queue for r in summary.rows}),
            oldest_pending_age=round(oldest, 3),
            **counts,
        )
        if self.on_summary is not None:
            self.on_summary(summary)
        return summary


class WorkflowGauge:
    """Counts the workflows by state for `jobvisor_workflows`, on every
    supervisor: the leader reads the count (one pass over the workflow
    index) and publishes it, any other publishes None, so that a former
    leader's figures do not linger beside the new one's. A gauge read from
    the database, not a counter of what this process saw, is the same
    whichever supervisor reads it, and survives a change of leader or a
    restart without counting a workflow twice or missing one."""

    name = "workflows"

    def __init__(
        self,
        queue: AsyncQueue,
        config: SummaryConfig,
        *,
        leading: Callable[[], bool],
        on_states: Callable[[Mapping[str, int] | None], None],
    ) -> None:
        self.queue, self.config, self.leading, self.on_states = queue, config, leading, on_states

    @property
    def interval(self) -> float:
        return self.config.interval

    async def run_once(self) -> Mapping[str, int] | None:
        if not self.leading():
            self.on_states(None)
            return None
        states = {s.value: n for s, n in (await service_ops(self.queue).workflow_states()).items()}
        self.on_states(states)
        return states


SCHEDULER_TICK_MAX: Final = 0.5  # the longest wait between looks; a tick's lag stays below 1 s
SCHEDULER_TICK_MIN: Final = 0.02
SCHEDULER_IDLE: Final = 5.0  # no schedule declared: look for a declaration this often


class Scheduler:
    """Enqueues the due ticks of the app's schedules.

    `declared()` gives the declarations a worker reported (None until one
    has); the first run after they change writes them to the database
    (`schedule_sync`: undeclared rows are kept, disabled). Then each run
    reads the enabled schedules' next ticks with the database's time and
    fires the due ones (`schedule_fire`): the row moves on and the jobs are
    inserted in one transaction, guarded by the tick read, so a tick is
    enqueued once even when two leaders overlap or one dies half-way. It
    waits until the soonest next tick, at most `SCHEDULER_TICK_MAX`."""

    name = "scheduler"

    def __init__(
        self,
        queue: AsyncQueue,
        declared: Callable[[], Sequence[Mapping[str, Any]] | None],
        *,
        on_fired: Callable[[str, Sequence[float]], None] | None = None,
    ) -> None:
        self.queue, self.declared, self.on_fired = queue, declared, on_fired
        self._synced: Sequence[Mapping[str, Any]] | None = None
        self._specs: dict[str, ScheduleSpec] = {}
        self._wait = SCHEDULER_IDLE

    @property
    def interval(self) -> float:
        return self._wait

    async def _sync(self, declared: Sequence[Mapping[str, Any]]) -> None:
        specs = [ScheduleSpec.from_message(message) for message in declared]
        _, now = await service_ops(self.queue).schedule_next_ticks()
        await service_ops(self.queue).schedule_sync([spec.row(now) for spec in specs])
        self._specs = {spec.name: spec for spec in specs}
        self._synced = declared
        log.info("schedules.synced", count=len(specs), names=",".join(sorted(self._specs)))

    async def run_once(self) -> int:
        """Sync if the declarations changed, fire the due ticks; the jobs enqueued."""
        declared = self.declared()
        if declared is not None and declared is not self._synced:
            await self._sync(declared)
        if not self._specs:
            self._wait = SCHEDULER_IDLE
            return 0
        asked_at = time.monotonic()  # before the read: a lag errs on the long side
        ticks, now = await service_ops(self.queue).schedule_next_ticks()
        enqueued = 0
        soonest: float | None = None
        for name, next_run_at in ticks:
            spec = self._specs.get(name)
            if spec is None:
                continue  # declared by another version of the app; its leader fires it
            due = due_ticks(spec, next_run_at, now)
            if due is None:
                following = next_run_at
            else:
                enqueued += await self._fire(
                    spec, next_run_at, due.ticks, due.next_run_at, (now, asked_at)
                )
                following = due.next_run_at
                if due.dropped:
                    log.warning(
                        "schedule.ticks_dropped",
                        schedule=name,
                        count=due.dropped,
                        catch_up=spec.catch_up.value,
                    )
            wait = (following - now).total_seconds() - (time.monotonic() - asked_at)
            soonest = wait if soonest is None else min(soonest, wait)
        self._wait = min(SCHEDULER_TICK_MAX, max(SCHEDULER_TICK_MIN, soonest or 0.0))
        return enqueued

    async def _fire(
        self,
        spec: ScheduleSpec,
        expected: dt.datetime,
        ticks: Sequence[dt.datetime],
        following: dt.datetime,
        clock: tuple[dt.datetime, float],
    ) -> int:
        """Fire `ticks` if the row still holds `expected`; `clock` is the
        database's time and the monotonic time it was read at (for the lag)."""
        row = dataclasses.replace(spec.row(expected), next_run_at=expected)
        count = await service_ops(self.queue).schedule_fire(row, ticks=ticks, next_run_at=following)
        if count:
            now = clock[0] + dt.timedelta(seconds=time.monotonic() - clock[1])
            log.info("schedule.fired", schedule=spec.name, jobs=count, tick=ticks[-1].isoformat())
            if self.on_fired is not None:
                self.on_fired(spec.name, [(now - tick).total_seconds() for tick in ticks])
        return count


class Leadership:
    """Whether this supervisor is the one that runs maintenance."""

    name = "leadership"

    def __init__(
        self,
        queue: AsyncQueue,
        *,
        holder: str,
        lease_name: str = LEADER_NAME,
        ttl: float = LEADER_TTL,
    ) -> None:
        self.queue, self.holder, self.lease_name, self.ttl = queue, holder, lease_name, ttl
        self._valid_until = 0.0
        self.answered_at: float | None = None  # when the database last answered

    @property
    def is_leader(self) -> bool:
        # The lease is counted from before the call that took it, so this side
        # gives it up no later than the database does.
        return time.monotonic() < self._valid_until

    async def run_once(self) -> bool:
        """Take or keep the lease; True while this supervisor leads."""
        was_leader = self.is_leader
        asked_at = time.monotonic()
        try:
            elected = await service_ops(self.queue).leader_attempt_elect(
                self.lease_name, self.holder, ttl=self.ttl
            )
        except Exception:
            self._valid_until = 0.0
            if was_leader:
                log.warning("leader.lost", holder=self.holder, reason="renewal failed")
            raise
        self.answered_at = time.monotonic()
        self._valid_until = asked_at + self.ttl if elected else 0.0
        if elected and not was_leader:
            log.info("leader.elected", holder=self.holder, lease=self.lease_name, ttl=self.ttl)
        elif was_leader and not elected:
            log.warning("leader.lost", holder=self.holder, reason="taken by another holder")
        return elected

    async def resign(self) -> None:
        if self._valid_until:
            self._valid_until = 0.0
            await service_ops(self.queue).leader_resign(self.lease_name, self.holder)
            log.info("leader.resigned", holder=self.holder, lease=self.lease_name)

    @property
    def interval(self) -> float:
        return self.ttl / 3


def _jittered(seconds: float) -> float:
    return seconds * random.uniform(1 - JITTER, 1 + JITTER)


async def run_periodically(
    service: Service,
    *,
    when: Callable[[], bool] = lambda: True,
    first_delay: float | None = None,
) -> None:
    """Call `service.run_once()` every `service.interval` seconds (jittered)
    while `when()` is true; log a failure and carry on. The interval is read
    after each run, so a service may change it (the scheduler waits for its
    next tick). Runs until cancelled."""
    delay = _jittered(service.interval) if first_delay is None else first_delay
    while True:
        await asyncio.sleep(delay)
        if when():
            try:
                await service.run_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.error("maintenance.failed", service=service.name, error=one_line(exc))
        delay = _jittered(service.interval)  # read after the run: it may have changed it
