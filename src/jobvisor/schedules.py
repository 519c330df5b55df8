"""Periodic jobs: a schedule's declaration, and which of its ticks are due.

    registry.schedule("nightly_report", cron="30 2 * * *", timezone="Europe/Berlin",
                      job_type="report", payload={"kind": "daily"})
    registry.schedule("heartbeat", every=60, job_type="ping")

A cron schedule's ticks come from its five-field expression, read and iterated
by `cronsim` in the schedule's zone; an `every` schedule ticks on the
multiples of its period counted from the Unix epoch (`every=60`: on the
minute), whatever the zone.

Daylight saving time, for a cron schedule in a zone that has it (the rules of
Vixie/Debian cron, which `cronsim` follows): a time of day that does not exist
on the spring-forward day (02:30 in Europe/Berlin) fires once, at the first
instant after the gap (03:00 local); a time that exists twice on the
fall-back day fires once, at its first occurrence (02:30 summer time). An
expression that ticks every hour or more often (`*/30 * * * *`) keeps its
period through both transitions, in real time.

Everything here is pure (no database, no clock): the maintenance leader
(`supervisor.maintenance.Scheduler`) reads the database's time and applies
`due_ticks`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import math
from collections.abc import Mapping
from typing import Any, Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from .queue import validate
from .queue.errors import InvalidArgument
from .queue.jsonvalue import payload_json
from .queue.model import DEFAULT_QUEUE, Schedule

UTC = dt.UTC
MAX_CATCH_UP: Final = 1000  # catch_up="all" enqueues at most this many missed ticks
MISSED_AFTER: Final = 60.0  # a tick this many seconds late counts as missed (catch_up)
MAX_EVERY: Final = validate.MAX_DELAY
COUNT_CAP: Final = 10 * MAX_CATCH_UP  # missed cron ticks are counted up to this many


class CatchUp(enum.StrEnum):
    """What a schedule does with the ticks it missed while no supervisor ran.

    A tick counts as missed when it is more than `MISSED_AFTER` seconds late;
    a tick less late is simply enqueued late, whatever the mode."""

    SKIP = "skip"  # missed ticks are dropped; the next one on time fires
    LATEST = "latest"  # one job for the missed window, at its latest tick
    ALL = "all"  # one job per missed tick, the latest MAX_CATCH_UP at most


class InvalidSchedule(InvalidArgument):
    """A schedule's declaration is refused: a bad expression, zone or option."""


def _zone(timezone: object) -> ZoneInfo:
    if not isinstance(timezone, str) or not timezone:
        raise InvalidSchedule(f"timezone={timezone!r}: expected an IANA zone name such as 'UTC'")
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidSchedule(
            f"timezone={timezone!r}: not a known IANA zone (expected e.g. 'Europe/Berlin')"
        ) from None


def _cron(expression: object, zone: ZoneInfo) -> str:
    if not isinstance(expression, str) or len(expression.split()) != 5:
        raise InvalidSchedule(
            f"cron={expression!r}: expected five fields (minute hour day month weekday)"
        )
    try:
        CronSim(expression, dt.datetime(2000, 1, 1, tzinfo=zone))
    except CronSimError as exc:
        raise InvalidSchedule(f"cron={expression!r}: {exc}") from None
    return " ".join(expression.split())


@dataclasses.dataclass(frozen=True, slots=True)
class ScheduleSpec:
    """One declared schedule (`Registry.schedule`); build it with `build`."""

    name: str
    job_type: str
    cron: str | None = None
    every: float | None = None
    payload: Any = None
    queue: str = DEFAULT_QUEUE
    priority: int = 0
    timezone: str = "UTC"
    catch_up: CatchUp = CatchUp.LATEST

    @classmethod
    def build(
        cls,
        name: str,
        *,
        cron: str | None = None,
        every: float | dt.timedelta | None = None,
        job_type: str,
        payload: Any = None,
        queue: str = DEFAULT_QUEUE,
        priority: int = 0,
        timezone: str = "UTC",
        catch_up: str = "latest",
    ) -> ScheduleSpec:
        """Check every option; `InvalidSchedule` names the bad one."""
        try:
            validate.name("schedule name", name)
            validate.name("job_type", job_type)
            validate.name("queue", queue)
            validate.count("priority", priority, low=-(2**31), high=validate.MAX_INT32)
            payload_json(payload)
            if (cron is None) == (every is None):
                raise InvalidArgument(
                    f"schedule {name!r}: cron={cron!r}, every={every!r}: expected exactly one"
                )
            period = None
            if every is not None:
                period = validate.seconds("every", every, low=1.0, high=MAX_EVERY)
        except InvalidSchedule:
            raise
        except InvalidArgument as exc:
            raise InvalidSchedule(str(exc)) from None
        zone = _zone(timezone)
        expression = None if cron is None else _cron(cron, zone)
        if catch_up not in CatchUp.__members__.values():
            raise InvalidSchedule(
                f"catch_up={catch_up!r}: expected one of {', '.join(map(repr, CatchUp))}"
            )
        return cls(
            name=name,
            job_type=job_type,
            cron=expression,
            every=period,
            payload=payload,
            queue=queue,
            priority=priority,
            timezone=timezone,
            catch_up=CatchUp(catch_up),
        )

    @property
    def spec(self) -> str:
        """How the schedule is shown: its cron expression, or `every Ns`."""
        return self.cron if self.cron is not None else f"every {self.every:g}s"

    def after(self, when: dt.datetime) -> dt.datetime:
        """The first tick strictly after `when` (an aware time), in UTC."""
        if self.every is not None:
            # Rounded to the microsecond both ways, as the databases keep
            # times: a stored tick never reads back as just before itself.
            ratio = round(when.timestamp() / self.every, 6)
            tick = round((math.floor(ratio) + 1) * self.every, 6)
            return dt.datetime.fromtimestamp(tick, UTC)
        assert self.cron is not None
        local = when.astimezone(ZoneInfo(self.timezone))
        return next(iter(CronSim(self.cron, local))).astimezone(UTC)

    def row(self, now: dt.datetime) -> Schedule:
        """The database row of this declaration, its first tick after `now`."""
        return Schedule(
            name=self.name,
            spec=self.spec,
            timezone=self.timezone,
            next_run_at=self.after(now),
            last_run_at=None,
            enabled=True,
            job_type=self.job_type,
            queue=self.queue,
            priority=self.priority,
            payload=self.payload,
            catch_up=self.catch_up.value,
        )

    def message(self) -> dict[str, Any]:
        """The declaration as JSON-able values (the worker hands it to its
        supervisor); `from_message` reads it back."""
        return {
            "name": self.name,
            "cron": self.cron,
            "every": self.every,
            "job_type": self.job_type,
            "payload": self.payload,
            "queue": self.queue,
            "priority": self.priority,
            "timezone": self.timezone,
            "catch_up": self.catch_up.value,
        }

    @classmethod
    def from_message(cls, message: Mapping[str, Any]) -> ScheduleSpec:
        return cls.build(
            message["name"],
            cron=message.get("cron"),
            every=message.get("every"),
            job_type=message["job_type"],
            payload=message.get("payload"),
            queue=message.get("queue", DEFAULT_QUEUE),
            priority=message.get("priority", 0),
            timezone=message.get("timezone", "UTC"),
            catch_up=message.get("catch_up", CatchUp.LATEST.value),
        )


@dataclasses.dataclass(frozen=True, slots=True)
class Due:
    """What to do with a schedule whose next tick has come: enqueue one job
    per tick of `ticks` (oldest first) and move on to `next_run_at`.
    `dropped` counts the missed ticks left out (by `catch_up`)."""

    ticks: tuple[dt.datetime, ...]
    next_run_at: dt.datetime
    dropped: int = 0


def _ticks_until(
    spec: ScheduleSpec, first: dt.datetime, now: dt.datetime, keep: int
) -> list[dt.datetime]:
    """The last `keep` ticks from `first` to `now`, both included, oldest
    first: `every` jumps to them, cron walks back from `now` (never through
    the whole window: a month of a minutely schedule is 43,200 ticks)."""
    if first > now:
        return []
    if spec.every is not None:
        count = math.floor(round((now - first).total_seconds() / spec.every, 6)) + 1
        start = first + dt.timedelta(seconds=max(0, count - keep) * spec.every)
        ticks: list[dt.datetime] = []
        tick = start
        while tick <= now:
            ticks.append(tick)
            tick = spec.after(tick)
        return ticks[-keep:]
    assert spec.cron is not None
    zone = ZoneInfo(spec.timezone)
    latest_first: list[dt.datetime] = []
    from_ = (now + dt.timedelta(seconds=1)).replace(microsecond=0).astimezone(zone)
    for local in CronSim(spec.cron, from_, reverse=True):
        tick = local.astimezone(UTC)
        if tick > now:
            continue
        if tick < first or len(latest_first) == keep:
            break
        latest_first.append(tick)
    return latest_first[::-1]


def count_ticks(spec: ScheduleSpec, first: dt.datetime, now: dt.datetime) -> int:
    """How many ticks from `first` to `now`, both included; for cron, at most
    `COUNT_CAP` (counting walks the window)."""
    if first > now:
        return 0
    if spec.every is not None:
        return math.floor(round((now - first).total_seconds() / spec.every, 6)) + 1
    assert spec.cron is not None
    count = 0
    start = (first - dt.timedelta(seconds=1)).astimezone(ZoneInfo(spec.timezone))
    for local in CronSim(spec.cron, start):
        if local.astimezone(UTC) > now or count == COUNT_CAP:
            break
        count += 1
    return count


def due_ticks(spec: ScheduleSpec, next_run_at: dt.datetime, now: dt.datetime) -> Due | None:
    """The ticks to enqueue now for a schedule whose next tick is
    `next_run_at`, by its `catch_up`; None when that tick has not come.

    Ticks at most `MISSED_AFTER` seconds late are all enqueued, whatever the
    mode; older ones were missed: "all" enqueues them too (the latest
    `MAX_CATCH_UP`), "latest" one job at the latest due tick, "skip" none."""
    if next_run_at > now:
        return None
    following = spec.after(now)
    on_time_from = now - dt.timedelta(seconds=MISSED_AFTER)
    if next_run_at >= on_time_from or spec.catch_up is CatchUp.ALL:
        total = count_ticks(spec, next_run_at, now)
        ticks = _ticks_until(spec, next_run_at, now, MAX_CATCH_UP)
        return Due(tuple(ticks), following, dropped=max(0, total - len(ticks)))
    if spec.catch_up is CatchUp.LATEST:
        total = count_ticks(spec, next_run_at, now)
        latest = _ticks_until(spec, next_run_at, now, 1)
        return Due(tuple(latest), following, dropped=max(0, total - 1))
    near = _ticks_until(spec, spec.after(on_time_from - dt.timedelta(seconds=1)), now, MAX_CATCH_UP)
    on_time = [tick for tick in near if tick >= on_time_from]
    return Due(
        tuple(on_time), following, dropped=count_ticks(spec, next_run_at, now) - len(on_time)
    )
