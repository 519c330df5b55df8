"""Durable steps, sleeps, signals and events: what a long job keeps between
its attempts.

A handler's steps are recorded in its job's step log, in the order it asked
for them (`seq`), each under its name (`#n` added for the n-th repeat of a
name). The worker reads the log once, at the job's first step, and from
then on returns a completed step's stored result instead of running it; the
first step not completed runs, and its end is written by `step_save`,
fenced by the claim token (a worker that lost its lease writes nothing and
hears `LeaseLost`).

A sleep or a wait for a signal is a step too (`step_wait`): its deadline is
fixed when an attempt first reaches it, and the attempt ends there, the job
parked: pending again, its attempt given back, due at the deadline, holding
no worker and no concurrency slot. A signal (`signal`) is kept until a wait
of its name takes it, and makes a job parked in such a wait due at once; the
signal's statements and the wait's lock the job's row first, so neither can
miss the other. Events (`event_set`, `get_event`) are values a running job
publishes for others to read.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
import uuid
from typing import Any, Final

from .. import validate
from ..drivers.postgres.sql.steps import StepSql as PostgresStepSql
from ..drivers.sqlite.sql.steps import StepSql as SqliteStepSql
from ..errors import EventNotSet, InvalidArgument, JobNotFound, LeaseLost
from ..jsonvalue import payload_json
from ..model import TERMINAL, UTC, Job, JobStatus
from ..plan import Plan, Steps, Stmt
from .context import Ctx, _held, _job_id, one_database
from .control import Waiting

# A wait without a timeout is due this far ahead: in practice never, until
# a signal (or a cancel) ends it.
PARK_FOREVER: Final = 100 * 365 * 86400.0


class StepStatus(enum.StrEnum):
    """Where a step of the log stands."""

    COMPLETED = "completed"  # its result is returned from then on, it never runs again
    FAILED = "failed"  # it raised: the next attempt runs it again
    WAITING = "waiting"  # a sleep or a wait for a signal, parked until its deadline


@dataclasses.dataclass(frozen=True, slots=True)
class StepRecord:
    """One entry of a job's step log."""

    seq: int
    name: str
    status: StepStatus
    result: Any
    error: str | None
    signal: str | None
    wake_at: dt.datetime | None
    started_at: dt.datetime
    finished_at: dt.datetime | None


@dataclasses.dataclass(frozen=True, slots=True)
class SignalRecord:
    """A signal sent to a job: its name, when it came, when a wait took it."""

    name: str
    sent_at: dt.datetime
    taken_at: dt.datetime | None


@dataclasses.dataclass(frozen=True, slots=True)
class EventRecord:
    """An event a job published: its key, latest value and when it was set."""

    key: str
    value: Any
    set_at: dt.datetime


@dataclasses.dataclass(frozen=True, slots=True)
class StepHistory:
    """What `jobvisor show` and the dashboard's job page show of a durable
    job: its step log, its signals and its events."""

    steps: tuple[StepRecord, ...]
    signals: tuple[SignalRecord, ...]
    events: tuple[EventRecord, ...]


class Waited(enum.StrEnum):
    """How a sleep or a wait for a signal went this attempt."""

    DONE = "done"  # the deadline passed (a sleep) or a signal was taken
    TIMED_OUT = "timed_out"  # a wait for a signal reached its timeout
    PARKED = "parked"  # the job is parked: the attempt ends here


@dataclasses.dataclass(frozen=True, slots=True)
class Wait:
    """What `step_wait` did: its outcome, and the signal's payload when one came."""

    outcome: Waited
    payload: Any = None


def _step_sql(name: str) -> type[PostgresStepSql] | type[SqliteStepSql]:
    """The step statements of the engine called `name`."""
    return PostgresStepSql if name == "postgres" else SqliteStepSql


def _time_out(value: Any) -> dt.datetime | None:
    if value is None or isinstance(value, dt.datetime):
        return value
    return dt.datetime.fromtimestamp(value, UTC)


def _json_out(ctx: Ctx, value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) and ctx.dialect.name == "sqlite" else value


def _host_now(ctx: Ctx) -> Any:
    """The time a step started or ended, as the worker saw it (the log's
    times are for people; leases and deadlines use the database's clock)."""
    return ctx.dialect.time(ctx.clock() if ctx.clock is not None else dt.datetime.now(UTC))


def _record(ctx: Ctx, row: Any) -> StepRecord:
    seq, name, status, result, error, signal, wake_at, started, finished = row
    started_at = _time_out(started)
    assert started_at is not None
    return StepRecord(
        seq,
        name,
        StepStatus(status),
        _json_out(ctx, result),
        error,
        signal,
        _time_out(wake_at),
        started_at,
        _time_out(finished),
    )


def _seq(seq: object) -> int:
    if not isinstance(seq, int) or isinstance(seq, bool) or not 0 <= seq < 2**31:
        raise InvalidArgument(f"seq={validate.short(seq)}: expected an integer 0..2**31-1")
    return seq


def _json_text(label: str, ctx: Ctx, value: Any) -> str | None:
    """`value` as JSON text within the queue's payload size, None for None."""
    if value is None:
        return None
    try:
        text = payload_json(value)
    except InvalidArgument as exc:
        raise InvalidArgument(str(exc).replace("payload=", f"{label}=", 1)) from None
    validate.payload_size(label, text, len(text.encode("utf-8")), ctx.max_payload_bytes)
    return text


def step_log(ctx: Ctx, job_id: uuid.UUID | str) -> Plan[list[StepRecord]]:
    """A job's step log, in order (one statement: the worker reads it once
    per attempt, at the first step)."""
    jid = _job_id(job_id)
    sql = _step_sql(ctx.dialect.name)

    def steps() -> Steps[list[StepRecord]]:
        rows = yield Stmt(sql.STEP_LIST, {"id": ctx.dialect.id(jid)}, fetch="all")
        return [_record(ctx, row) for row in rows]

    return Plan(steps(), write=False, transaction=False)


def step_history(ctx: Ctx, job_id: uuid.UUID | str) -> Plan[StepHistory]:
    """A job's step log, its signals and its events (empty for a job that
    never used them, or none such)."""
    jid = _job_id(job_id)
    d = ctx.dialect
    sql = _step_sql(d.name)

    def steps() -> Steps[StepHistory]:
        params = {"id": d.id(jid)}
        rows = yield Stmt(sql.STEP_LIST, params, fetch="all")
        signals = yield Stmt(sql.SIGNAL_LIST, params, fetch="all")
        events = yield Stmt(sql.EVENT_LIST, params, fetch="all")
        return StepHistory(
            tuple(_record(ctx, row) for row in rows),
            tuple(SignalRecord(n, _time_out(s) or _never(), _time_out(t)) for n, s, t in signals),
            tuple(
                EventRecord(key, _json_out(ctx, value), _time_out(at) or _never())
                for key, value, at in events
            ),
        )

    return Plan(steps(), write=False, transaction=False)


def _never() -> dt.datetime:
    raise AssertionError("a NOT NULL time column read NULL")


def step_save(
    ctx: Ctx,
    job: Job,
    seq: int,
    name: str,
    *,
    started: dt.datetime,
    result: str | None = None,
    error: str | None = None,
    conn: Any = None,
) -> Plan[None]:
    """Record the end of step `seq` (`name`) of a held job: completed with
    `result` (JSON text, None for none), or failed with `error` when given.
    `LeaseLost` when the claim is no longer held: nothing is written.

    With `conn` (a connection in a transaction the caller opened, see
    `JobContext.transaction`) the row is written in that transaction and
    commits with it; on PostgreSQL the transaction's commit then waits for
    its WAL flush whatever the session says (the application's writes ride
    in it), and `LeaseLost` leaves the caller to roll back."""
    one_database(ctx, "job.step")
    _held("job", [job])
    d = ctx.dialect
    sql = _step_sql(d.name)
    if result is not None and not isinstance(result, str):
        raise InvalidArgument(f"result={validate.short(result)}: expected JSON text")
    params = {
        "id": d.id(job.id),
        "token": d.token(job),
        "seq": _seq(seq),
        "name": validate.name("step name", name),
        "status": StepStatus.COMPLETED if error is None else StepStatus.FAILED,
        "result": result,
        "error": error,
        "started": d.time(started),
        "now": _host_now(ctx),
    }

    def steps() -> Steps[None]:
        if conn is not None and d.name == "postgres":
            yield Stmt(PostgresStepSql.STEP_TX_DURABLE)
        saved = yield Stmt(sql.STEP_SAVE, params)
        if not saved:
            raise LeaseLost(job.id)

    return Plan(steps(), transaction=False, conn=conn)


def step_wait(
    ctx: Ctx,
    job: Job,
    seq: int,
    name: str,
    *,
    signal: str | None = None,
    timeout: float | dt.timedelta | None = None,
    until: dt.datetime | None = None,
) -> Plan[Wait]:
    """Step `seq` of a held job waits: until `until`, or `timeout` seconds
    after the attempt that first reached it, and for a signal named
    `signal` when given (no deadline: for the signal alone).

    In one transaction, under the job's row lock: a signal of that name sent
    before is taken (`DONE`, its payload); else a deadline that passed ends
    the wait (`DONE` for a sleep, `TIMED_OUT` for a signal); else the job is
    parked (`PARKED`): pending, due at the deadline, its attempt given back
    (cancelled instead when a cancel was requested). `LeaseLost` when the
    claim is no longer held: nothing is written."""
    one_database(ctx, "job.wait_signal / job.sleep")
    _held("job", [job])
    d = ctx.dialect
    sql = _step_sql(d.name)
    seconds = (
        None if timeout is None else validate.seconds("timeout", timeout, high=validate.MAX_DELAY)
    )
    when = None if until is None else validate.run_at("until", until)
    params = {
        "id": d.id(job.id),
        "token": d.token(job),
        "seq": _seq(seq),
        "name": validate.name("step name", name),
        "signal": None if signal is None else validate.name("signal", signal),
        "timeout": seconds,
        "until": d.time(when),
        "forever": PARK_FOREVER,
        "now": ctx.now(),
    }

    def steps() -> Steps[Wait]:
        held = yield Stmt(sql.STEP_JOB_LOCK, params, fetch="one")
        if held is None:
            raise LeaseLost(job.id)
        started = {**params, "started": _host_now(ctx), "error": None, "status": "completed"}
        if signal is not None:
            taken = yield Stmt(sql.SIGNAL_TAKE, params, fetch="one")
            if taken is not None:
                payload = _json_out(ctx, taken[0])
                result = json.dumps({"signal": signal, "payload": payload})
                yield Stmt(sql.STEP_SAVE, {**started, "result": result})
                return Wait(Waited.DONE, payload)
        row = yield Stmt(sql.STEP_WAIT, params, fetch="one")
        if row[1]:
            outcome = Waited.DONE if signal is None else Waited.TIMED_OUT
            result = json.dumps({"timed_out": True} if signal is not None else None)
            yield Stmt(sql.STEP_SAVE, {**started, "result": result})
            return Wait(outcome)
        parked = yield Stmt(sql.JOB_PARK, params, fetch="one")
        if parked is None:
            raise LeaseLost(job.id)
        return Wait(Waited.PARKED)

    return Plan(steps())


def signal(ctx: Ctx, job_id: uuid.UUID | str, name: str, payload: Any = None) -> Plan[None]:
    """Send the signal `name` to a job, with a JSON `payload` (None: none).
    It is kept until the job waits for it (`job.wait_signal(name)`); a job
    parked in such a wait is made due now (and, on PostgreSQL, its queue's
    workers are woken by a notification in the same transaction).
    `JobNotFound` if there is no such job; `InvalidArgument` if it has
    finished (nothing would ever take the signal) or for a bad name or payload."""
    one_database(ctx, "signal")
    jid = _job_id(job_id)
    d = ctx.dialect
    sql = _step_sql(d.name)
    params = {
        "id": d.id(jid),
        "signal": validate.name("signal", name),
        "payload": _json_text("payload", ctx, payload),
        "now": ctx.now(),
    }

    def steps() -> Steps[None]:
        row = yield Stmt(sql.SIGNAL_JOB_LOCK, params, fetch="one")
        if row is None:
            raise JobNotFound(jid)
        if JobStatus(row[0]) in TERMINAL:
            raise InvalidArgument(
                f"job {jid} is {row[0]}: a signal goes to a job that has not finished"
            )
        yield Stmt(sql.SIGNAL_INSERT, params)
        yield Stmt(sql.SIGNAL_WAKE, params, fetch="all")

    return Plan(steps())


def event_set(ctx: Ctx, job: Job, key: str, value: Any) -> Plan[None]:
    """A held job publishes `value` (JSON; None stores null) under `key`,
    replacing what it published there before. `LeaseLost` when the claim is
    no longer held: nothing is written."""
    one_database(ctx, "job.set_event")
    _held("job", [job])
    d = ctx.dialect
    sql = _step_sql(d.name)
    params = {
        "id": d.id(job.id),
        "token": d.token(job),
        "key": validate.name("event key", key),
        "value": "null" if value is None else _json_text("value", ctx, value),
        "now": ctx.now(),
    }

    def steps() -> Steps[None]:
        saved = yield Stmt(sql.EVENT_SET, params)
        if not saved:
            raise LeaseLost(job.id)

    return Plan(steps(), transaction=False)


@dataclasses.dataclass(frozen=True, slots=True)
class EventRead:
    """One read of a job's event: the job's status, whether the key is set, its value."""

    status: JobStatus
    found: bool
    value: Any


def event_read(ctx: Ctx, job_id: uuid.UUID | str, key: str) -> Plan[EventRead]:
    """The job's status and its value of `key`; `JobNotFound` if there is no such job."""
    jid = _job_id(job_id)
    d = ctx.dialect
    sql = _step_sql(d.name)
    params = {"id": d.id(jid), "key": validate.name("event key", key)}

    def steps() -> Steps[EventRead]:
        row = yield Stmt(sql.EVENT_GET, params, fetch="one")
        if row is None:
            raise JobNotFound(jid)
        return EventRead(
            JobStatus(row[0]), bool(row[2]), _json_out(ctx, row[1]) if row[2] else None
        )

    return Plan(steps(), write=False, transaction=False)


def get_event(ctx: Ctx, job_id: uuid.UUID | str, key: str, default: Any = None) -> Plan[Any]:
    """The latest value the job published under `key`, or `default` when it
    has published none; `JobNotFound` if there is no such job."""
    plan = event_read(ctx, job_id, key)

    def steps() -> Steps[Any]:
        read = yield from plan.steps
        return read.value if read.found else default

    return Plan(steps(), write=False, transaction=False)


class EventWaiting:
    """The clock of one `wait_event(job_id, key, timeout)`: the queue reads
    the event, and `after(read)` says what next: None when it is set (return
    its value), else how long to sleep before reading again (the same
    backoff as `wait`); `TimeoutError` when `timeout` seconds have passed,
    `EventNotSet` when the job ended without setting it."""

    def __init__(self, job_id: uuid.UUID | str, key: str, timeout: float | dt.timedelta | None):
        self.job_id = _job_id(job_id)
        self.key = validate.name("event key", key)
        self._waiting = Waiting(self.job_id, timeout)

    def after(self, read: EventRead) -> float | None:
        if read.found:
            return None
        if read.status in TERMINAL:
            raise EventNotSet(self.job_id, self.key, read.status.value)
        return self._waiting.after_poll(f"event {self.key!r} of job {self.job_id} is not set")
