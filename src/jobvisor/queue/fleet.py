"""The fleet's rows (`jobvisor_supervisors`): each supervisor's heartbeat with
its workers, the live supervisors, the jobs running per worker, and the
leader's pruning of the silent ones; operations bound for the service and
the dashboard (`queue.internal`), written once for both engines."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from . import validate
from .browse import _time
from .ops import Ctx
from .plan import Plan, Steps, Stmt

SUPERVISOR_FRESH: Final = 30.0  # a supervisor silent for longer is not shown


@dataclasses.dataclass(frozen=True, slots=True)
class SupervisorBeat:
    """What a supervisor writes about itself every few seconds. `workers`
    holds one mapping per worker (id, pid, restarts, jobs running)."""

    id: str
    host: str
    pid: int
    version: str
    leader: bool
    workers: Sequence[Mapping[str, Any]]


@dataclasses.dataclass(frozen=True, slots=True)
class SupervisorRow:
    """A supervisor as the fleet view shows it; `now` is the database's time."""

    id: str
    host: str
    pid: int
    version: str
    started_at: dt.datetime
    heartbeat_at: dt.datetime
    leader: bool
    workers: tuple[dict[str, Any], ...]
    now: dt.datetime

    @property
    def uptime(self) -> float:
        return max(0.0, (self.now - self.started_at).total_seconds())


# --- the fleet ----------------------------------------------------------------------


def supervisor_heartbeat(ctx: Ctx, beat: SupervisorBeat) -> Plan[None]:
    """Write (or refresh) a supervisor's row."""
    params = {
        "id": beat.id,
        "host": beat.host,
        "pid": beat.pid,
        "version": beat.version,
        "leader": beat.leader,
        "workers": json.dumps([dict(w) for w in beat.workers]),
        "now": ctx.now(),
    }
    sql = ctx.dialect.sql.SUPERVISOR_HEARTBEAT

    def steps() -> Steps[None]:
        yield Stmt(sql, params)

    return Plan(steps(), transaction=False)


def supervisors(ctx: Ctx, *, fresh: float = SUPERVISOR_FRESH) -> Plan[list[SupervisorRow]]:
    """The supervisors heard from within `fresh` seconds, by host."""
    fresh = validate.seconds("fresh", fresh, positive=True, high=validate.MAX_INTERVAL)
    sql = ctx.dialect.sql.SUPERVISOR_LIST
    params = {"fresh": fresh, "now": ctx.now()}

    def steps() -> Steps[list[SupervisorRow]]:
        rows = yield Stmt(sql, params, fetch="all")
        return [
            SupervisorRow(
                id=r[0],
                host=r[1],
                pid=int(r[2]),
                version=r[3],
                started_at=_time(r[4]),
                heartbeat_at=_time(r[5]),
                leader=bool(r[6]),
                workers=tuple(json.loads(r[7])),
                now=_time(r[8]),
            )
            for r in sorted(rows, key=lambda r: (r[1], _time(r[4]), r[0]))
        ]

    return Plan(steps(), write=False, transaction=False)


def running_by_worker(ctx: Ctx) -> Plan[dict[str, int]]:
    """How many jobs each worker is running, by worker id."""
    sql = ctx.dialect.sql.JOB_RUNNING_BY_WORKER

    def steps() -> Steps[dict[str, int]]:
        return {r[0]: int(r[1]) for r in (yield Stmt(sql, {}, fetch="all"))}

    return Plan(steps(), write=False, transaction=False)


def supervisor_forget(ctx: Ctx, supervisor_id: str) -> Plan[None]:
    """Delete a supervisor's row (at its clean stop)."""
    sql = ctx.dialect.sql.SUPERVISOR_DELETE

    def steps() -> Steps[None]:
        yield Stmt(sql, {"id": supervisor_id})

    return Plan(steps(), transaction=False)


def supervisor_prune(ctx: Ctx, older_than: float) -> Plan[int]:
    """Delete the rows of supervisors silent for more than `older_than`
    seconds; how many."""
    age = validate.seconds("older_than", older_than, positive=True, high=validate.MAX_INTERVAL)
    sql = ctx.dialect.sql.SUPERVISOR_PRUNE

    def steps() -> Steps[int]:
        return int((yield Stmt(sql, {"age": age, "now": ctx.now()})))

    return Plan(steps(), transaction=False)
