"""Schedules: the declared schedules synced to the table, the next ticks, and
the jobs each tick (or a manual run) enqueues."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import uuid
from collections.abc import Sequence
from typing import Any

from .. import validate
from ..errors import InvalidArgument
from ..model import (
    NewJob,
    Schedule,
)
from ..plan import Plan, Steps, Stmt
from .context import Ctx, _with_correlation
from .enqueuing import _insert_one

# --- schedules ----------------------------------------------------------------


def _time_out(value: Any) -> dt.datetime | None:
    """A time read back: PostgreSQL gives datetimes, SQLite epoch seconds."""
    if value is None or isinstance(value, dt.datetime):
        return value
    return dt.datetime.fromtimestamp(value, dt.UTC)


def _schedule(row: Sequence[Any]) -> Schedule:
    next_run_at = _time_out(row[3])
    assert next_run_at is not None
    return Schedule(
        name=row[0],
        spec=row[1],
        timezone=row[2],
        next_run_at=next_run_at,
        last_run_at=_time_out(row[4]),
        enabled=bool(row[5]),
        job_type=row[6],
        queue=row[7],
        priority=row[8],
        payload=json.loads(row[9]),
        catch_up=row[10],
    )


def schedules(ctx: Ctx) -> Plan[list[Schedule]]:
    """Every schedule the database knows, by name, the disabled ones too."""
    sql = ctx.dialect.sql.SCHEDULE_LIST

    def steps() -> Steps[list[Schedule]]:
        rows = yield Stmt(sql, {}, fetch="all")
        return [_schedule(row) for row in rows]

    return Plan(steps(), write=False, transaction=False)


def schedule_sync(ctx: Ctx, declared: Sequence[Schedule]) -> Plan[None]:
    """Write the schedules the code declares (each with its first tick as
    `next_run_at`, kept for a schedule already known with the same spec and
    zone) and disable the rows of those it no longer declares. One transaction."""
    d = ctx.dialect
    now = ctx.now()
    rows = [
        {
            "name": validate.name("schedule name", s.name),
            "spec": s.spec,
            "timezone": s.timezone,
            "job_type": validate.name("job_type", s.job_type),
            "queue": validate.name("queue", s.queue),
            "priority": s.priority,
            "payload": json.dumps(s.payload),
            "catch_up": s.catch_up,
            "next_run_at": d.time(s.next_run_at),
            "now": now,
        }
        for s in declared
    ]
    names = d.names([s.name for s in declared])

    def steps() -> Steps[None]:
        for row in rows:
            yield Stmt(d.sql.SCHEDULE_UPSERT, row)
        yield Stmt(d.sql.SCHEDULE_DISABLE_UNDECLARED, {"names": names, "now": now})

    return Plan(steps())


def schedule_next_ticks(ctx: Ctx) -> Plan[tuple[list[tuple[str, dt.datetime]], dt.datetime]]:
    """(name, next tick) of every enabled schedule, soonest first, and the
    database's time now (the clock that decides which ticks are due)."""
    d = ctx.dialect
    params = {"now": ctx.now()}

    def steps() -> Steps[tuple[list[tuple[str, dt.datetime]], dt.datetime]]:
        rows = yield Stmt(d.sql.SCHEDULE_ENABLED, params, fetch="all")
        clock = rows[0][2] if rows else (yield Stmt(d.sql.CLOCK_NOW, params, fetch="one"))[0]
        ticks = [(row[0], _time_out(row[1])) for row in rows]
        now = _time_out(clock)
        assert now is not None
        due = sorted((tick, name) for name, tick in ticks if tick is not None)
        return [(name, tick) for tick, name in due], now

    return Plan(steps(), write=False, transaction=False)


def _schedule_job(
    ctx: Ctx, schedule: Schedule, tick: dt.datetime | None, *, manual: bool = False
) -> NewJob:
    job = NewJob.build(
        schedule.job_type, schedule.payload, queue=schedule.queue, priority=schedule.priority
    )
    meta: dict[str, Any] = {"schedule": schedule.name}
    if tick is not None:
        meta["tick"] = tick.astimezone(dt.UTC).isoformat()
    if manual:
        meta["manual"] = True
    return _with_correlation(ctx, dataclasses.replace(job, meta=meta))


def schedule_fire(
    ctx: Ctx,
    schedule: Schedule,
    *,
    ticks: Sequence[dt.datetime],
    next_run_at: dt.datetime,
) -> Plan[int]:
    """Enqueue one job per tick of `schedule` and move its `next_run_at` on
    to `next_run_at`, in one transaction, only if the row still holds
    `schedule.next_run_at`: when two callers race, one enqueues, the other
    finds the row moved on and writes nothing. Returns the jobs enqueued (0
    when the row had moved on). Each job's meta holds the schedule's name and
    its tick's time."""
    d = ctx.dialect
    jobs = [_schedule_job(ctx, schedule, tick) for tick in ticks]
    last = ticks[-1] if ticks else None  # none fired: last_run_at stays
    params = {
        "name": schedule.name,
        "expected": d.time(schedule.next_run_at),
        "next_run_at": d.time(next_run_at),
        "last_run_at": d.time(last),
    }

    def steps() -> Steps[int]:
        moved = yield Stmt(d.sql.SCHEDULE_ADVANCE, params)
        if moved != 1:
            return 0
        for job in jobs:
            yield from _insert_one(ctx, job, notify=d.notifies)
        return len(jobs)

    return Plan(steps())


def schedule_run(ctx: Ctx, name: str) -> Plan[uuid.UUID]:
    """Enqueue one job of the schedule `name` now, outside its ticks (its
    `next_run_at` and `last_run_at` stay as they are); the job's id. The job's
    meta holds the schedule's name and `manual: true`. A disabled schedule
    runs too; an unknown name raises `InvalidArgument`."""
    validate.name("schedule name", name)
    d = ctx.dialect

    def steps() -> Steps[uuid.UUID]:
        row = yield Stmt(d.sql.SCHEDULE_GET, {"name": name}, fetch="one")
        if row is None:
            raise InvalidArgument(f"schedule {name!r}: no such schedule")
        job = _schedule_job(ctx, _schedule(row), None, manual=True)
        return (yield from _insert_one(ctx, job, notify=d.notifies))

    return Plan(steps())
