"""Every queue operation, written once for both engines and both faces.

Each function checks its arguments (raising `InvalidArgument` before anything
is written) and returns a `Plan`: a generator of statements that a runner
drives inside one transaction. Every change of a job's status is a single
guarded statement; nothing here reads a row and then writes it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import getpass
import hashlib
import json
import math
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import resources
from typing import Any, Final, LiteralString

from .. import tracing
from ..backoff import backoff
from . import bulk, validate
from .correlation import current_correlation_id
from .engine import BEGIN, COMMIT, Batch, Dialect, Plan, Script, Steps, Stmt
from .errors import InvalidArgument, JobNotFound, LeaseLost, MissingCorrelationId
from .model import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_QUEUE,
    DEFAULT_RETRY,
    TERMINAL,
    Cancelled,
    Job,
    JobStatus,
    Limit,
    LimitScope,
    LimitSource,
    NewJob,
    OnConflict,
    Readiness,
    Renewal,
    RetryPolicy,
    Schedule,
    Summary,
    SummaryRow,
    TypeRequeue,
    Unique,
    XminHolder,
    payload_json,
)
from .notices import Notice, NoticeKind

DEFAULT_LEASE = validate.DEFAULT_LEASE
DEFAULT_CLEANUP_BATCH = 1000
DEAD_LIST_DEFAULT = 100
# How long a pause waits for the claims in flight (PostgreSQL). They take
# milliseconds; what holds the lock longer is a long transaction that read the
# pause table (pg_dump), and every claim waits behind the pause meanwhile.
PAUSE_LOCK_TIMEOUT_MS = 5000
# How long a claim trusts what it last saw of the limits: a claim that found
# no limited group relevant to it skips the limited claim (a transaction and
# a statement more) for this long. A limit set meanwhile is obeyed at once (the
# plain claim skips limited groups by itself); its jobs wait this long at most.
LIMITS_RECHECK = 1.0
# While limited groups are in play, a plain claim that came back short (no
# more unlimited jobs were due) is not tried again for this long: with a
# backlog of limited jobs it reads past all of them each time. An unlimited
# job enqueued meanwhile waits this long at most.
PLAIN_RECHECK = 0.05
# A limited claim looks at this many candidates per job it may claim (at
# least CLAIM_WINDOW_MIN), so a few jobs over their group's room at the head
# do not hide the others.
CLAIM_WINDOW_FACTOR = 4
CLAIM_WINDOW_MIN = 64
# Claims are bounded (`ClaimBounds`) only while the full claim is slow: it took
# at least FULL_CLAIM_SLOW (below). Then a bounded claim is followed by a full
# one at least this often, and whenever it comes back short: a job behind the
# bound (released, reaped, of a resumed queue, enqueued with an older run_at
# or committed late, a retry come due) waits this long at most while the
# bounded claims find work.
FULL_CLAIM_EVERY = 1.0
# ... unless the full claim is slow: then it waits this many times its own
# last duration, so it takes at most a twentieth of the claim loop's time.
FULL_CLAIM_SPACING = 20.0
# A full claim that took at least FULL_CLAIM_SLOW seconds reads a dead head
# (the entries of claimed jobs an open transaction keeps from vacuum, which
# the bounded claim skips): the claims that follow are bounded until a full
# claim is fast again. Once bounded, a full claim counts as slow while it
# takes this many times the bounded claim that found nothing, too: a machine
# that is slow slows both alike.
FULL_CLAIM_SLOW_RATIO = 10.0
FULL_CLAIM_SLOW = 0.05
# A full claim that filled a batch of at least SATURATED_BATCH jobs (the
# claimers cannot keep up: a backlog drains) is slow from this share of
# FULL_CLAIM_SLOW on: there the dead head the claims leave behind them between
# two vacuums costs throughput long before it costs 50 ms a claim (on a
# draining backlog of 10 million, the rate fell from 39,000 to 16,000 jobs/s
# a minute after each vacuum). A full claim of a few jobs keeps strict claim
# order until it is really slow: a machine that is merely busy slows it too.
SATURATED_BATCH = 10
SATURATED_SLOW_SHARE = 0.1
# An error message is kept to this many characters: enough for a traceback's
# last frames, small enough that a failing handler cannot bloat the table.
MAX_ERROR_CHARS = 8000


class LimitsSeen:
    """What this queue's claims last saw of the limits, per claim filter:
    whether a limited group was relevant, and when that was looked at; and
    when the plain claim last came back short. Only hints for which claims
    to try; never what decides a limit."""

    __slots__ = ("_dry", "_seen", "_turn")

    def __init__(self) -> None:
        self._seen: dict[Any, tuple[bool, float]] = {}
        self._dry: dict[Any, float] = {}
        self._turn = False

    def worth_trying(self, key: Any) -> bool:
        present, at = self._seen.get(key, (True, 0.0))
        return present or time.monotonic() - at >= LIMITS_RECHECK

    def saw(self, key: Any, present: bool) -> None:
        self._seen[key] = (present, time.monotonic())

    def limited_first(self, key: Any) -> bool:
        """Every other claim takes limited jobs first, so a backlog of others
        filling each batch does not starve them."""
        self._turn = not self._turn
        return self._turn and self._seen.get(key, (True, 0.0))[0]

    def plain_worth_trying(self, key: Any) -> bool:
        """Whether to run the plain claim beside a limited one: not for
        `PLAIN_RECHECK` after it found fewer jobs than it asked for (it read
        past every limited job to learn that)."""
        return time.monotonic() - self._dry.get(key, -PLAIN_RECHECK) >= PLAIN_RECHECK

    def plain_came_back(self, key: Any, *, short: bool) -> None:
        if short:
            self._dry[key] = time.monotonic()
        else:
            self._dry.pop(key, None)

    def forget(self) -> None:
        """A limit changed through this queue: look again at the next claim
        (and start the turns again)."""
        self._seen.clear()
        self._dry.clear()
        self._turn = False


Position = tuple[int, Any, Any]
"""A job's place in claim order: (-priority, run_at, id), as a `Job` has them."""


class ClaimBounds:
    """Where this queue's claims left off in claim order, per claim filter.

    Each claimed job leaves an entry in the claim index that is dead once its
    claim commits, all of them before the first claimable job in index
    order. Vacuum removes them, but only once no snapshot may still see the
    rows: while some transaction of the server stays open, they pile up and a
    claim that starts at the head of the index reads them all (and each one's
    row in the table). A bounded claim (JOB_CLAIM_AFTER) starts its scan past
    the last job this queue claimed instead, so it reads only what other
    claimers took since. Bounded claims run only while the full claim is
    slow (FULL_CLAIM_SLOW, or a tenth of it for a full claim that filled a
    batch: SATURATED_BATCH): on a table vacuum keeps clean every claim is a
    full one, in strict claim order. Jobs that land behind the bound are the
    full claim's: it runs when there is no bound, when the bounded claim
    comes back short (for the rest), and at least every FULL_CLAIM_EVERY seconds; while it is
    slow (it reads the dead head: FULL_CLAIM_SLOW_RATIO), no sooner than
    FULL_CLAIM_SPACING times its last duration after the last one. Only a
    hint for where to look: a lost or stale bound costs a full claim, never
    a job."""

    __slots__ = ("_bounds", "_full")

    def __init__(self) -> None:
        self._bounds: dict[Any, Position] = {}
        # The last full claim: its end, its duration, whether it was slow.
        self._full: dict[Any, tuple[float, float, bool]] = {}

    def bound(self, key: Any) -> Position | None:
        """The bound for the next claim with this filter, or None when it is
        to be a full claim: always while the last full claim was fast."""
        end, took, slow = self._full.get(key, (-math.inf, 0.0, False))
        if not slow:
            return None
        if time.monotonic() - end >= max(FULL_CLAIM_EVERY, took * FULL_CLAIM_SPACING):
            return None
        return self._bounds.get(key)

    def full_after_dry(self, key: Any, took: float) -> bool:
        """Whether a bounded claim that came back short (in `took` seconds) is
        followed by a full one now: unless the last full claim was slow and
        recent."""
        end, full_took, _ = self._full.get(key, (-math.inf, 0.0, False))
        if full_took < max(FULL_CLAIM_SLOW, FULL_CLAIM_SLOW_RATIO * took):
            return True
        return time.monotonic() - end >= FULL_CLAIM_SPACING * full_took

    def claimed(
        self, key: Any, jobs: Sequence[Job], *, full: bool, took: float = 0.0, asked: int = 0
    ) -> None:
        """A claim with this filter took `jobs`: the bound moves to the last
        of them in claim order (after a full claim, even backwards: the
        bounded claims go on from where it stopped). `took` is a full
        claim's duration in seconds, `asked` its limit."""
        if full:
            saturated = len(jobs) == asked >= SATURATED_BATCH
            slow = took >= FULL_CLAIM_SLOW * (SATURATED_SLOW_SHARE if saturated else 1.0)
            self._full[key] = (time.monotonic(), took, slow)
        if not jobs:
            return
        last = max((-j.priority, j.run_at, j.id) for j in jobs)
        old = self._bounds.get(key)
        if full or old is None or last > old:
            self._bounds[key] = last

    def forget(self) -> None:
        """Jobs went back behind the bounds through this queue (released, a
        queue resumed): the next claims are full ones."""
        self._bounds.clear()
        self._full.clear()


@dataclasses.dataclass(frozen=True, slots=True)
class Ctx:
    """What every operation needs: the engine's dialect and the queue's settings."""

    dialect: Dialect
    clock: Callable[[], dt.datetime] | None = None
    require_correlation_id: bool = False
    retry: Mapping[str, RetryPolicy] = dataclasses.field(default_factory=dict)
    default_retry: RetryPolicy = DEFAULT_RETRY
    lease: float = DEFAULT_LEASE
    max_payload_bytes: int = validate.DEFAULT_MAX_PAYLOAD_BYTES
    max_result_bytes: int = validate.DEFAULT_MAX_RESULT_BYTES
    limits_seen: LimitsSeen = dataclasses.field(default_factory=LimitsSeen)
    claim_bounds: ClaimBounds = dataclasses.field(default_factory=ClaimBounds)

    def now(self) -> Any:
        """The injected clock's time in the engine's form, or None for the database's."""
        return None if self.clock is None else self.dialect.time(self.clock())

    def retry_policy(self, job_type: str) -> RetryPolicy:
        return self.retry.get(job_type, self.default_retry)


def _names(name: str, values: Iterable[str] | None) -> list[str] | None:
    if values is None:
        return None
    if isinstance(values, str):
        raise InvalidArgument(f"{name}={values!r}: expected a list of names, not one string")
    items = [validate.name(f"{name}[{i}]", item) for i, item in enumerate(values)]
    return items or None


def queue_names(name: str, values: Iterable[str] | None) -> list[str] | None:
    """Queue names as a list, or None for every queue."""
    return _names(name, values)


def _job_id(value: uuid.UUID | str) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise InvalidArgument(f"job id {value!r}: expected a UUID") from None


def _held(name: str, jobs: Sequence[Job]) -> None:
    for job in jobs:
        if not isinstance(job, Job) or job.claim_token is None:
            raise InvalidArgument(f"{name}: {job!r} is not a claimed job")


def _sized(ctx: Ctx, job: NewJob) -> NewJob:
    """Refuse a job whose payload is over the queue's size limit."""
    if len(job.payload_json) * 4 > ctx.max_payload_bytes:  # else it fits for sure
        validate.payload_size("payload", job.payload_json, job.payload_bytes, ctx.max_payload_bytes)
    return job


def _with_correlation(ctx: Ctx, job: NewJob) -> NewJob:
    """The context's correlation id for a job without one. With none either,
    the job's is stored NULL and reads as its own id (`own_correlation_id`):
    the correlation index then holds only the ids that were given."""
    if job.correlation_id is not None:
        return job
    correlation_id = current_correlation_id()
    if correlation_id is None:
        if ctx.require_correlation_id:
            raise MissingCorrelationId(
                f"enqueue of {job.job_type!r}: this queue requires a correlation id and "
                "none was given or set in the context"
            )
        return job
    return dataclasses.replace(job, correlation_id=correlation_id)


def _trace_meta() -> dict[str, Any] | None:
    """`{"trace": carrier}` when a span is active (the `otel` extra is
    installed: `tracing` checks that once per process), else None."""
    carrier = tracing.inject()
    return {"trace": carrier} if carrier else None


def _with_meta(job: NewJob, meta: dict[str, Any] | None) -> NewJob:
    if meta is None or job.meta is not None:
        return job
    return dataclasses.replace(job, meta=meta)


# --- schema -------------------------------------------------------------------


def migration_files(engine: str) -> list[tuple[int, str, str]]:
    """(version, name, sql) of every migration shipped for an engine, in order."""
    folder = resources.files("jobvisor.queue").joinpath("migrations", engine)
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            version = int(entry.name.split("_", 1)[0])
            found.append((version, entry.name, entry.read_text(encoding="utf-8")))
    return sorted(found)


def migrate(ctx: Ctx) -> Plan[list[int]]:
    """Apply every migration not yet recorded, under a lock, in one transaction.
    Returns the versions applied by this call (empty when already current)."""
    sql = ctx.dialect.sql

    def steps() -> Steps[list[int]]:
        yield Stmt(sql.MIGRATION_LOCK, fetch="all")
        yield Stmt(sql.MIGRATIONS_TABLE_CREATE)
        applied = {row[0] for row in (yield Stmt(sql.MIGRATIONS_APPLIED, fetch="all"))}
        done = []
        for version, name, script in migration_files(ctx.dialect.name):
            if version in applied:
                continue
            yield Script(script)
            yield Stmt(sql.MIGRATION_RECORD, {"version": version, "name": name})
            done.append(version)
        return done

    return Plan(steps())


@functools.cache
def latest_version(engine: str) -> int:
    """The newest migration shipped for an engine."""
    return max(version for version, _, _ in migration_files(engine))


def check(ctx: Ctx) -> Plan[Readiness]:
    """Whether the database answers and its schema is current, changing nothing.

    Raises `DatabaseUnavailable` when the database cannot be reached (at once
    when no connection was ever made), `DatabaseRefused` when the server
    refuses the connection (a wrong password, an unknown database)."""
    sql = ctx.dialect.sql
    engine = ctx.dialect.name

    def steps() -> Steps[Readiness]:
        (exists,) = yield Stmt(sql.MIGRATIONS_TABLE_EXISTS, fetch="one")
        version = 0
        if exists:
            rows = yield Stmt(sql.MIGRATIONS_APPLIED, fetch="all")
            version = max((r[0] for r in rows), default=0)
        return Readiness(
            engine=engine, schema_version=version, latest_version=latest_version(engine)
        )

    return Plan(steps(), write=False, transaction=False)


def schema_version(ctx: Ctx) -> Plan[int]:
    """The highest applied migration version (0 for an empty database).

    It takes the migration lock too: creating the record table races a
    concurrent `migrate()` on a fresh PostgreSQL database otherwise."""
    sql = ctx.dialect.sql

    def steps() -> Steps[int]:
        yield Stmt(sql.MIGRATION_LOCK, fetch="all")
        yield Stmt(sql.MIGRATIONS_TABLE_CREATE)
        rows = yield Stmt(sql.MIGRATIONS_APPLIED, fetch="all")
        return max((r[0] for r in rows), default=0)

    return Plan(steps())


# --- enqueue ------------------------------------------------------------------


def _insert_one(ctx: Ctx, job: NewJob, *, notify: bool) -> Steps[uuid.UUID]:
    """Insert one job, or find the job holding its dedupe or unique key (a
    pending holder takes its payload and run_at under `on_conflict="replace"`).
    With `notify`, PostgreSQL's insert wakes idle workers in the same statement.

    A conflict is settled by the insert itself (ON CONFLICT on a unique
    index); only then is the holder's id read, and if the holder let the key
    go in between, the insert is tried again."""
    d = ctx.dialect
    params = {
        "id": d.id(job.id),
        "queue": job.queue,
        "job_type": job.job_type,
        "payload": job.payload_json,
        "priority": job.priority,
        "run_at": d.time(job.run_at),
        "delay": job.delay,
        "max_attempts": job.max_attempts,
        "dedupe_key": job.dedupe_key,
        "correlation_id": job.correlation_id,
        "meta": d.meta(job.meta),
        "concurrency_key": job.concurrency_key,
        "now": ctx.now(),
        "notify": notify,
    }
    return (yield from _insert_params(ctx, job, params))


def _insert_params(ctx: Ctx, job: NewJob, params: dict[str, Any]) -> Steps[uuid.UUID]:
    """Insert a job with these parameters (JOB_INSERT's; the unique key's
    added here), or return the id of the job holding its key."""
    d = ctx.dialect
    insert, holder, holder_params = _insert_statements(ctx, job)
    params.update(holder_params)
    if job.unique is not None:
        params["unique_states"] = d.names(job.unique.states)
    while True:
        row = yield Stmt(insert, params, fetch="one")
        if row is not None:
            return d.id_out(row[0])
        existing = yield Stmt(holder, holder_params, fetch="one")
        if existing is not None:
            return d.id_out(existing[0])
        # The holder of the key let it go in between: insert again.


def _insert_statements(
    ctx: Ctx, job: NewJob
) -> tuple[LiteralString, LiteralString, dict[str, Any]]:
    """The insert of one job, the read of its key's holder after a conflict,
    and the parameters of that read (the insert takes them too)."""
    sql = ctx.dialect.sql
    unique = job.unique
    if unique is None:
        return sql.JOB_INSERT, sql.JOB_GET_LIVE_BY_DEDUPE_KEY, {"dedupe_key": job.dedupe_key}
    key = {"unique_key": unique.base, "unique_period": unique.period, "now": ctx.now()}
    replace = unique.on_conflict is OnConflict.REPLACE
    insert = sql.JOB_INSERT_UNIQUE_REPLACE if replace else sql.JOB_INSERT_UNIQUE
    return insert, sql.JOB_GET_BY_UNIQUE_KEY, key


def enqueue(
    ctx: Ctx,
    job_type: str,
    payload: Any = None,
    *,
    queue: str = DEFAULT_QUEUE,
    priority: int = 0,
    run_at: dt.datetime | None = None,
    delay: float | dt.timedelta | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    dedupe_key: str | None = None,
    correlation_id: str | None = None,
    concurrency_key: str | None = None,
    unique: Unique | None = None,
    on_conflict: OnConflict | str = OnConflict.IGNORE,
    conn: Any = None,
) -> Plan[uuid.UUID]:
    """Add one job; returns its id. With `dedupe_key`, a live job with the same
    key is returned instead and nothing is written. With `unique` (a
    `Unique`), the job holding the same unique key is returned instead:
    with `on_conflict="ignore"` nothing is written; with `"replace"` a
    pending holder takes this payload and run_at (a debounce), while one that
    is running or past it is left unchanged. With `conn`, the job is
    written in the caller's transaction and exists only if the caller commits.

    The correlation id defaults to the context's (see `correlation_scope`),
    else a new one; a queue with `require_correlation_id` refuses to invent one.
    With the `otel` extra and a span active, the trace context is recorded in
    the job's `meta`, and the job's execution joins that trace.
    """
    job = _with_correlation(
        ctx,
        _sized(
            ctx,
            NewJob.build(
                job_type,
                payload,
                queue=queue,
                priority=priority,
                run_at=run_at,
                delay=delay,
                max_attempts=max_attempts,
                dedupe_key=dedupe_key,
                correlation_id=correlation_id,
                concurrency_key=concurrency_key,
                unique=unique,
                on_conflict=on_conflict,
            ),
        ),
    )
    job = _with_meta(job, _trace_meta())
    d = ctx.dialect

    notify = d.notifies and _due_now(ctx, job)

    def steps() -> Steps[uuid.UUID]:
        return (yield from _insert_one(ctx, job, notify=notify))

    # One statement (a dedupe conflict adds a read of the key's live holder,
    # which under READ COMMITTED sees the same as it would in a transaction).
    return Plan(steps(), conn=conn, transaction=False)


def _due_now(ctx: Ctx, job: NewJob) -> bool:
    """Whether a new job is due at once and so worth waking workers for. The
    local clock is good enough here: a needless NOTIFY costs an empty claim."""
    if job.delay:
        return False
    if job.run_at is None:
        return True
    now = ctx.clock() if ctx.clock is not None else dt.datetime.now(dt.UTC)
    return job.run_at <= now


def enqueue_many(
    ctx: Ctx, jobs: Iterable[Mapping[str, Any] | NewJob], *, conn: Any = None
) -> Plan[list[uuid.UUID]]:
    """Add many jobs in one transaction; returns their ids in order.

    Each item is a `NewJob` or a mapping of `enqueue`'s arguments
    (`{"job_type": "send_email", "payload": {...}, "priority": 5}`). Every item
    is checked before anything is written (`InvalidArgument` names the first
    bad one, `jobs[i]`). The rows go in by one binary COPY on PostgreSQL
    (executemany on SQLite); those with a dedupe key or `unique` go in one by
    one beside it, each with its own `unique` and `on_conflict`, so the job
    holding the key is returned instead, as `enqueue` does (two items with
    one key: the second finds the first). Every job records the same trace
    context, as in `enqueue`.
    """
    d = ctx.dialect
    checked = bulk.check(
        jobs,
        dialect=d,
        max_payload_bytes=ctx.max_payload_bytes,
        meta=d.meta(_trace_meta()),
        require_correlation_id=ctx.require_correlation_id,
    )

    def steps() -> Steps[list[uuid.UUID]]:
        if not checked.rows:
            return []
        (now,) = yield Stmt(d.sql.CLOCK_NOW, {"now": ctx.now()}, fetch="one")
        checked.timed(d, now)
        plain = checked.plain()
        if plain:
            yield Stmt(d.sql.JOB_COLUMNS_COPY, fetch="copy", rows=plain, types=d.copy_types)
        ids = checked.ids
        yield from _insert_keyed(ctx, checked, now)
        if d.notifies:
            for queue in sorted(checked.queues):
                yield Stmt(d.sql.JOB_NOTIFY, {"queue": queue}, fetch="all")
        return ids

    return Plan(steps(), conn=conn)


def _insert_keyed(ctx: Ctx, checked: bulk.Rows, now: Any) -> Steps[None]:
    """The bulk rows with a key, their ids set to the jobs that hold the keys.
    Those with a dedupe key go in one statement (ON CONFLICT DO NOTHING),
    then one read finds the holders of the keys it skipped; a row whose
    holder let its key go in between, and a row with `unique`, goes in as
    `enqueue` does it, one by one."""
    d = ctx.dialect
    rows, ids = checked.rows, checked.ids
    deduped = [i for i, job in checked.keyed.items() if job.unique is None]
    alone = [i for i, job in checked.keyed.items() if job.unique is not None]
    if deduped:
        params = {**d.keyed_rows([rows[i] for i in deduped]), "now": now}
        inserted = yield Stmt(d.sql.JOB_INSERT_KEYED_MANY, params, fetch="all")
        new = {d.id_out(r[0]) for r in inserted}
        skipped = [i for i in deduped if ids[i] not in new]
        if skipped:
            keys = d.names(sorted({rows[i][bulk.DEDUPE_KEY] for i in skipped}))
            found = yield Stmt(d.sql.JOB_GET_LIVE_BY_DEDUPE_KEYS, {"keys": keys}, fetch="all")
            holders = {key: d.id_out(job_id) for key, job_id in found}
            for i in skipped:
                holder = holders.get(rows[i][bulk.DEDUPE_KEY])
                if holder is None:
                    alone.append(i)
                else:
                    ids[i] = holder
    for i in sorted(alone):
        ids[i] = yield from _insert_params(ctx, checked.keyed[i], _keyed_params(rows[i], now))


def _keyed_params(row: list[Any], now: Any) -> dict[str, Any]:
    """JOB_INSERT's parameters for a bulk row with a key (its times set)."""
    return {
        "id": row[bulk.ID],
        "queue": row[bulk.QUEUE],
        "job_type": row[bulk.JOB_TYPE],
        "payload": row[bulk.PAYLOAD],
        "priority": row[bulk.PRIORITY],
        "run_at": row[bulk.RUN_AT],
        "delay": None,
        "max_attempts": row[bulk.MAX_ATTEMPTS],
        "dedupe_key": row[bulk.DEDUPE_KEY],
        "correlation_id": row[bulk.CORRELATION_ID],
        "meta": row[bulk.META],
        "concurrency_key": row[bulk.CONCURRENCY_KEY],
        "now": now,
        "notify": False,
    }


# --- the claim and its outcomes -----------------------------------------------


def claim(
    ctx: Ctx,
    worker_id: str,
    *,
    queues: Iterable[str] | None = None,
    job_types: Iterable[str] | None = None,
    limit: int = 1,
    lease: float | dt.timedelta | None = None,
    above_priority: int | None = None,
) -> Plan[list[Job]]:
    """Claim up to `limit` due jobs for `worker_id`, highest priority first, then
    oldest `run_at`, then id. Each claimed job has its attempt counted, the
    claim's fresh token and a lease of `lease` seconds from the database clock. Two
    claimers never receive the same job. An empty or missing filter means all.

    With `above_priority`, only jobs of a higher priority than that, and none
    of a limited type or queue: the claim of a worker busy with jobs of that
    priority when a job that jumps the queue arrives. It reads the claim
    index from its head, so it is quick while few such jobs wait."""
    validate.name("worker_id", worker_id)
    validate.count("limit", limit, high=validate.MAX_CLAIM_LIMIT)
    if above_priority is not None:
        validate.count("above_priority", above_priority, low=-(2**31), high=validate.MAX_INT32)
    seconds = _lease(ctx, lease)
    d = ctx.dialect
    queue_list, type_list = _names("queues", queues), _names("job_types", job_types)
    params = {
        "worker_id": worker_id,
        "queues": d.names(queue_list),
        "job_types": d.names(type_list),
        "limit": limit,
        "lease": seconds,
        "now": ctx.now(),
        "slack": 0.0 if ctx.clock is not None else d.clock_slack,
        # One token for the jobs of this claim: each pair (id, token) is
        # still unique, and the statement calls no volatile function.
        "token": d.claim_token(uuid.uuid4()),
    }

    if above_priority is not None:
        return _claim_above(ctx, {**params, "above": above_priority})
    seen = ctx.limits_seen
    key = (queue_list and tuple(queue_list), type_list and tuple(type_list))

    def steps() -> Steps[list[Job]]:
        trying = seen.worth_trying(key)
        plain = not trying or seen.plain_worth_trying(key)
        jobs: list[Job] = []
        if trying and (not plain or seen.limited_first(key)):
            jobs = yield from _claim_limited(ctx, params, limit, key)
            trying = False
        if plain and len(jobs) < limit:
            asked = limit - len(jobs)
            got = yield from _claim_plain(ctx, {**params, "limit": asked}, key)
            seen.plain_came_back(key, short=len(got) < asked)
            jobs.extend(got)
        if trying and len(jobs) < limit:
            jobs.extend((yield from _claim_limited(ctx, params, limit - len(jobs), key)))
        jobs.sort(key=lambda j: (-j.priority, j.run_at, j.id))
        return jobs

    # Each statement commits by itself, but for the limited claim's few.
    return Plan(steps(), transaction=False, planner=True)


def _claim_above(ctx: Ctx, params: dict[str, Any]) -> Plan[list[Job]]:
    def steps() -> Steps[list[Job]]:
        rows = yield Stmt(ctx.dialect.sql.JOB_CLAIM_ABOVE, params, fetch="all")
        jobs = [ctx.dialect.job(r) for r in rows]
        jobs.sort(key=lambda j: (-j.priority, j.run_at, j.id))
        return jobs

    return Plan(steps(), transaction=False, planner=True)


def _claim_plain(ctx: Ctx, params: dict[str, Any], key: Any) -> Steps[list[Job]]:
    """The claim of jobs of no limited group: bounded when this queue knows
    where its last claims left off (`ClaimBounds`), else, or when the bounded
    claim finds nothing, the full claim from the head of the claim index."""
    d, bounds = ctx.dialect, ctx.claim_bounds
    bound = bounds.bound(key) if d.bounded_claim else None
    jobs: list[Job] = []
    if bound is not None:
        after = {
            "after_priority": -bound[0],
            "after_run_at": bound[1],
            "after_id": bound[2],
            "mark_filter": _mark_filter(key),
        }
        began = time.monotonic()
        rows = yield Stmt(d.sql.JOB_CLAIM_AFTER, {**params, **after}, fetch="all")
        jobs = [d.job(r) for r in rows]
        bounds.claimed(key, jobs, full=False)
        if len(jobs) == params["limit"] or not bounds.full_after_dry(key, time.monotonic() - began):
            return jobs
    # Past a bounded claim that came back short, the full claim asks for the rest.
    began = time.monotonic()
    asked = params["limit"] - len(jobs)
    rows = yield Stmt(d.sql.JOB_CLAIM, {**params, "limit": asked}, fetch="all")
    took = time.monotonic() - began
    full = [d.job(r) for r in rows]
    if d.bounded_claim:
        bounds.claimed(key, full, full=True, took=took, asked=asked)
    return jobs + full


def _mark_filter(key: Any) -> str:
    """The name a claim filter's marks go by (JOB_CLAIM_AFTER): the same for
    every claimer whose filter takes the same queues and types, whatever their
    order, and short however many it names."""
    queues, types = key
    text = json.dumps([sorted(queues) if queues else None, sorted(types) if types else None])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _claim_limited(ctx: Ctx, params: dict[str, Any], room: int, key: Any) -> Steps[list[Job]]:
    """Claim up to `room` jobs of limited groups, in a transaction of its own:
    lock the groups the claim could take jobs of (PostgreSQL: an advisory
    lock per group, so claims of other groups and unlimited claims never wait
    on it; SQLite: the write lock already held), claim within every group's
    and key's room, and take the started jobs from the groups' and keys'
    token buckets. Every statement's parameters are known before the first
    runs, so on PostgreSQL the transaction is one round trip, and a group's
    lock is held only while the server works."""
    d = ctx.dialect
    window = max(CLAIM_WINDOW_MIN, room * CLAIM_WINDOW_FACTOR)
    claim_params = {**params, "limit": room, "window": window}
    taking = {k: params[k] for k in ("now", "lease", "token")}
    groups, rows, _, _ = (
        yield Batch(
            (
                BEGIN,
                Stmt(d.sql.LIMIT_LOCK, params, fetch="all"),
                Stmt(d.sql.JOB_CLAIM_LIMITED, claim_params, fetch="all"),
                Stmt(d.sql.LIMIT_TAKE_TOKENS, taking),
                Stmt(d.sql.KEY_BUCKET_TAKE, taking),
                COMMIT,
            )
        )
    )[1:5]
    ctx.limits_seen.saw(key, bool(groups))
    return [d.job(r) for r in rows]


def _lease(ctx: Ctx, lease: float | dt.timedelta | None) -> float:
    if lease is None:
        return ctx.lease
    return validate.seconds("lease", lease, positive=True, high=validate.MAX_LEASE)


def _held_many(
    ctx: Ctx,
    sql: LiteralString,
    jobs: Sequence[Job],
    extra: dict[str, Any],
    per_batch: Callable[[list[Job]], dict[str, Any]] | None = None,
) -> Plan[list[Job]]:
    """Run a statement guarded by (id, claim token) over many jobs; returns the
    jobs whose lease was lost (nothing changed for those). `per_batch` adds
    the parameters that follow the jobs of one statement (their results)."""
    plan = _held_rows(ctx, sql, jobs, extra, per_batch)

    def steps() -> Steps[list[Job]]:
        lost, _ = yield from plan.steps
        return lost

    return Plan(steps(), transaction=False)


def _held_rows(
    ctx: Ctx,
    sql: LiteralString,
    jobs: Sequence[Job],
    extra: dict[str, Any],
    per_batch: Callable[[list[Job]], dict[str, Any]] | None = None,
) -> Plan[tuple[list[Job], list[Any]]]:
    """`_held_many`, also returning the rows the statement returned."""
    _held("jobs", jobs)
    d = ctx.dialect
    now = ctx.now()
    # The statement returns ids only, so one statement must not see an id
    # twice: a stale claim of a job can sit beside its current one (a worker
    # that lost a lease and claimed the job again). Each repeat goes in the
    # next statement; at most one claim of a job can match.
    batches: list[list[int]] = []
    seen: dict[uuid.UUID, int] = {}
    for index, job in enumerate(jobs):
        repeat = seen[job.id] = seen.get(job.id, -1) + 1
        if repeat == len(batches):
            batches.append([])
        batches[repeat].append(index)

    def steps() -> Steps[tuple[list[Job], list[Any]]]:
        lost: set[int] = set()
        returned: list[Any] = []
        for batch in batches:
            held = [jobs[i] for i in batch]
            params = {**d.held(held), "now": now, **extra}
            if per_batch is not None:
                params.update(per_batch(held))
            rows = yield Stmt(sql, params, fetch="all")
            returned.extend(rows)
            if len(rows) == len(batch):
                continue  # the ids in a batch are unique, so every claim was held
            kept = {d.id_out(r[0]) for r in rows}
            lost.update(i for i in batch if jobs[i].id not in kept)
        return [jobs[i] for i in sorted(lost)], returned

    # Each statement is guarded by (id, claim token) job by job, so the
    # batches need no transaction around them.
    return Plan(steps(), transaction=False)


def _raise_lost(plan: Plan[list[Job]]) -> Plan[None]:
    def steps() -> Steps[None]:
        lost = yield from plan.steps
        if lost:
            raise LeaseLost(lost[0].id)

    return Plan(steps(), transaction=plan.transaction)


def renew_many(
    ctx: Ctx,
    jobs: Sequence[Job],
    *,
    lease: float | dt.timedelta | None = None,
    progress: Mapping[uuid.UUID, str] | None = None,
) -> Plan[list[Job]]:
    """Extend the lease of every job still held, in one statement, writing
    the progress its handler reported: `progress` maps a job id to its latest
    as JSON text (see `model.progress_json`); a job without an entry keeps its own.
    Returns the jobs whose lease was lost (their handlers should stop)."""
    seconds = _lease(ctx, lease)
    per_batch = _progress_params(ctx, progress)
    return _held_many(ctx, ctx.dialect.sql.JOB_RENEW_MANY, jobs, {"lease": seconds}, per_batch)


def renew_held(
    ctx: Ctx,
    jobs: Sequence[Job],
    *,
    lease: float | dt.timedelta | None = None,
    progress: Mapping[uuid.UUID, str] | None = None,
) -> Plan[Renewal]:
    """`renew_many`, also saying which of the jobs still held were asked to
    stop by `cancel` (a worker's fallback when it missed the notice, and its
    only way to hear it on SQLite). Same single statement."""
    seconds = _lease(ctx, lease)
    per_batch = _progress_params(ctx, progress)
    d = ctx.dialect
    plan = _held_rows(ctx, d.sql.JOB_RENEW_MANY, jobs, {"lease": seconds}, per_batch)

    def steps() -> Steps[Renewal]:
        lost, rows = yield from plan.steps
        asked = frozenset(d.id_out(r[0]) for r in rows if r[1])
        return Renewal(lost=tuple(lost), cancel_requested=asked)

    return Plan(steps(), transaction=False)


def _progress_params(
    ctx: Ctx, progress: Mapping[uuid.UUID, str] | None
) -> Callable[[list[Job]], dict[str, Any]]:
    """The renewal's `progress` parameter for each batch of jobs, checked."""
    if progress:
        for key, text in progress.items():
            if not isinstance(text, str):
                raise InvalidArgument(f"progress[{key!s}]={text!r}: expected JSON text")
    d = ctx.dialect

    def per_batch(held: list[Job]) -> dict[str, Any]:
        return {"progress": d.results(held, progress)}

    return per_batch


def renew(ctx: Ctx, job: Job, *, lease: float | dt.timedelta | None = None) -> Plan[None]:
    """Extend one job's lease; `LeaseLost` if the claim is no longer held."""
    return _raise_lost(renew_many(ctx, [job], lease=lease))


def complete_many(
    ctx: Ctx, jobs: Sequence[Job], *, results: Mapping[uuid.UUID, str] | None = None
) -> Plan[list[Job]]:
    """Mark every still-held job completed, in one statement, storing each
    one's result: `results` maps a job id to its result as JSON text (see
    `result_json`); a job without an entry stores none. Returns the jobs whose
    lease was lost (their results are dropped, nothing changes)."""
    d = ctx.dialect
    if results:
        for key, text in results.items():
            if not isinstance(text, str):
                raise InvalidArgument(f"results[{key!s}]={text!r}: expected JSON text")

    def per_batch(held: list[Job]) -> dict[str, Any]:
        return {"results": d.results(held, results)}

    return _held_many(ctx, d.sql.JOB_COMPLETE_MANY, jobs, {}, per_batch)


def complete(ctx: Ctx, job: Job, result: Any = None) -> Plan[None]:
    """Mark one held job completed, storing `result` (JSON-serialisable, at
    most the queue's `max_result_bytes`; None stores nothing); `LeaseLost` if
    the claim is no longer held."""
    text = result_json(result, ctx.max_result_bytes)
    return _raise_lost(complete_many(ctx, [job], results=None if text is None else {job.id: text}))


def result_json(value: Any, max_bytes: int = validate.DEFAULT_MAX_RESULT_BYTES) -> str | None:
    """A handler's return value as compact JSON text to store, or None for
    None. `InvalidArgument` when it is not JSON-serialisable (or holds what
    PostgreSQL cannot store, as a payload must not) or its JSON is longer
    than `max_bytes` (UTF-8)."""
    if value is None:
        return None
    try:
        text = payload_json(value)
    except InvalidArgument as exc:
        raise InvalidArgument(str(exc).replace("payload=", "result=", 1)) from None
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise InvalidArgument(
            f"result={validate.short(value)}: expected JSON of at most {max_bytes} bytes, "
            f"got {size} (raise {validate.MAX_RESULT_BYTES_ENV} to allow more)"
        )
    return text


def release_many(ctx: Ctx, jobs: Sequence[Job]) -> Plan[list[Job]]:
    """Return still-held jobs to pending now without counting the attempt (an
    interruption that was not the job's fault); returns the jobs whose lease was lost."""
    if jobs:
        ctx.claim_bounds.forget()  # they keep their run_at: behind the bounds
    return _held_many(ctx, ctx.dialect.sql.JOB_RELEASE_MANY, jobs, {})


def release(ctx: Ctx, job: Job) -> Plan[None]:
    """Return one held job to pending, attempt not counted; `LeaseLost` if not held."""
    return _raise_lost(release_many(ctx, [job]))


def _held_one(ctx: Ctx, sql: LiteralString, job: Job, extra: dict[str, Any]) -> Plan[JobStatus]:
    _held("job", [job])
    d = ctx.dialect
    params = {"id": d.id(job.id), "token": d.token(job), "now": ctx.now(), **extra}

    def steps() -> Steps[JobStatus]:
        row = yield Stmt(sql, params, fetch="one")
        if row is None:
            raise LeaseLost(job.id)
        return JobStatus(row[0])

    return Plan(steps(), transaction=False)


def _error_text(name: str, error: BaseException | str) -> str:
    if isinstance(error, BaseException):
        text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    elif isinstance(error, str):
        text = error
    else:
        raise InvalidArgument(f"{name}={error!r}: expected an exception or a string")
    # PostgreSQL text cannot hold NUL, and a message with binary junk in it
    # must not keep the job from being recorded as failed.
    text = text[:MAX_ERROR_CHARS].replace("\x00", "\ufffd")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: PostgreSQL could not store it
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def fail(
    ctx: Ctx, job: Job, error: BaseException | str, *, retry_in: float | None = None
) -> Plan[JobStatus]:
    """Record a failed attempt of a held job. With attempts left it becomes
    `retryable`, due after `retry_in` seconds or its type's backoff; otherwise
    `dead`, keeping `error`. Returns the new status; `LeaseLost` if not held."""
    delay = (
        ctx.retry_policy(job.job_type).delay(job.attempts, job.id)
        if retry_in is None
        else validate.seconds("retry_in", retry_in, high=validate.MAX_DELAY)
    )
    text = _error_text("error", error)
    return _held_one(ctx, ctx.dialect.sql.JOB_FAIL, job, {"delay": delay, "error": text})


def snooze(ctx: Ctx, job: Job, delay: float | dt.timedelta) -> Plan[None]:
    """Put a held job back to run after `delay`, giving its attempt back (the
    handler asked to wait, it did not fail). `LeaseLost` if not held."""
    seconds = validate.seconds("delay", delay, high=validate.MAX_DELAY)
    plan = _held_one(ctx, ctx.dialect.sql.JOB_SNOOZE, job, {"delay": seconds})

    def steps() -> Steps[None]:
        yield from plan.steps

    return Plan(steps(), transaction=False)


def cancel_held(ctx: Ctx, job: Job, reason: str = "cancelled by its handler") -> Plan[None]:
    """A handler gives its held job up for good: `cancelled`, never retried."""
    plan = _held_one(
        ctx, ctx.dialect.sql.JOB_CANCEL_HELD, job, {"error": _error_text("reason", reason)}
    )

    def steps() -> Steps[None]:
        yield from plan.steps

    return Plan(steps(), transaction=False)


# --- recovery -----------------------------------------------------------------


def reap_expired(ctx: Ctx, *, policy: RetryPolicy | None = None) -> Plan[int]:
    """Take back every running job whose lease has expired: `retryable` with
    its job type's backoff (the attempt stays counted), or `dead` when its
    attempts are spent. One statement guarded by the lease, so a job renewed or
    completed in between is never touched. `policy` replaces the queue's
    default backoff for types without their own. Returns how many were taken back."""
    by_type = reap_expired_by_type(ctx, policy=policy)

    def steps() -> Steps[int]:
        return sum((yield from by_type.steps).values())

    return Plan(steps(), transaction=False)


def reap_expired_by_type(
    ctx: Ctx, *, policy: RetryPolicy | None = None
) -> Plan[dict[tuple[str, str], int]]:
    """`reap_expired`, counted by (queue, job type): which handlers' jobs
    outlive their leases (stuck, or a lease too short for them)."""
    default = policy or ctx.default_retry
    rows: list[tuple[str | None, float, float, float]] = [
        (job_type, p.base, p.cap, p.jitter) for job_type, p in sorted(ctx.retry.items())
    ]
    rows.append((None, default.base, default.cap, default.jitter))
    params = {"now": ctx.now(), **ctx.dialect.policies(rows)}
    sql = ctx.dialect.sql.JOB_REAP_EXPIRED

    def steps() -> Steps[dict[tuple[str, str], int]]:
        counts: dict[tuple[str, str], int] = {}
        for row in (yield Stmt(sql, params, fetch="all")):
            counts[row[2], row[3]] = counts.get((row[2], row[3]), 0) + 1
        return counts

    return Plan(steps(), transaction=False)


# A job beside others in a worker that died of no known cause is charged an
# attempt at this many such crashes (see `requeue_crashed`).
CRASH_LIMIT: Final = 3


def requeue_crashed(
    ctx: Ctx,
    worker_id: str,
    *,
    error: str | None = None,
    culprit: uuid.UUID | str | None = None,
) -> Plan[int]:
    """Requeue at once every job `worker_id` still holds (its process crashed).
    A charged job is due now with the attempt counted and `error` recorded,
    or `dead` when attempts are spent; the others go back to pending with
    their attempt given back, as `release` does. With `culprit` (the job
    known to have caused the death, such as one past its hard time limit),
    only that job is charged. Without one (`os._exit`, the OOM killer), a job
    that ran alone in the worker is charged, and each of several counts one
    more crash and is charged only at its `CRASH_LIMIT`-th since it was last
    charged for one: the jobs beside a job that kills its workers lose no
    attempt unless they keep meeting it. Returns the count."""
    validate.name("worker_id", worker_id)
    params = {
        "worker_id": worker_id,
        "error": _error_text("error", error or f"worker {worker_id} exited while running the job"),
        "culprit": None if culprit is None else ctx.dialect.id(_job_id(culprit)),
        "crash_limit": CRASH_LIMIT,
        "now": ctx.now(),
    }
    sql = ctx.dialect.sql.JOB_REQUEUE_CRASHED

    def steps() -> Steps[int]:
        rows = yield Stmt(sql, params, fetch="all")
        return len(rows)

    return Plan(steps(), transaction=False)


# --- retention and reporting --------------------------------------------------

Retention = float | dt.timedelta | Mapping[JobStatus | str, float | dt.timedelta | None]


def cleanup(
    ctx: Ctx, older_than: Retention, *, batch_size: int = DEFAULT_CLEANUP_BATCH
) -> Plan[int]:
    """Delete terminal jobs finished more than `older_than` ago, in batches of
    `batch_size` (each its own transaction, so no long lock). `older_than` is one
    age for every terminal status or a mapping per status (a status left out, or
    mapped to None, is kept). Returns how many were deleted."""
    if isinstance(older_than, Mapping):
        ages: dict[JobStatus, float] = {}
        for key, value in older_than.items():
            try:
                status = JobStatus(key)
            except ValueError:
                raise InvalidArgument(f"older_than: {key!r} is not a job status") from None
            if status not in TERMINAL:
                raise InvalidArgument(
                    f"older_than: {status.value!r} is not terminal; expected completed, dead "
                    "or cancelled"
                )
            if value is not None:
                ages[status] = validate.seconds(
                    f"older_than[{status.value}]", value, high=validate.MAX_DELAY
                )
    else:
        age = validate.seconds("older_than", older_than, high=validate.MAX_DELAY)
        ages = {s: age for s in sorted(TERMINAL)}
    _check_batch_size(batch_size)
    sql = ctx.dialect.sql.JOB_DELETE_FINISHED
    now = ctx.now()

    def steps() -> Steps[int]:
        total = 0
        for status, age in ages.items():
            params = {"status": status.value, "age": age, "limit": batch_size, "now": now}
            total += yield from _delete_in_batches(sql, params, batch_size)
        return total

    return Plan(steps(), transaction=False)


def _check_batch_size(batch_size: int) -> None:
    validate.count("batch_size", batch_size, high=validate.MAX_BATCH_SIZE)


def _delete_in_batches(sql: LiteralString, params: dict[str, Any], batch_size: int) -> Steps[int]:
    """Run a DELETE of at most `batch_size` rows until it deletes fewer, each
    batch committed on its own (no long lock); returns how many went."""
    total = 0
    while True:
        deleted: int = yield Stmt(sql, params)
        total += deleted
        yield COMMIT
        if deleted < batch_size:
            return total


def summary(ctx: Ctx) -> Plan[Summary]:
    """Counts by queue and status, each queue's oldest due job's age, the
    paused queues and the limits."""
    sql = ctx.dialect.sql
    now = ctx.now()

    def steps() -> Steps[Summary]:
        rows = yield Stmt(sql.JOB_COUNT_BY_QUEUE_STATUS, {}, fetch="all")
        ages = yield Stmt(sql.JOB_OLDEST_DUE_AGE, {"now": now}, fetch="all")
        paused = yield Stmt(sql.QUEUE_PAUSED_LIST, fetch="all")
        limits = yield Stmt(sql.LIMIT_LIST, fetch="all")
        return Summary(
            rows=tuple(sorted(SummaryRow(r[0], JobStatus(r[1]), int(r[2])) for r in rows)),
            oldest_pending_age={r[0]: max(0.0, float(r[1])) for r in ages},
            paused=tuple(r[0] for r in paused),
            limits=tuple(limit_from_row(r) for r in limits),
        )

    return Plan(steps(), write=False, transaction=False)


def oldest_xmin(ctx: Ctx) -> Plan[XminHolder | None]:
    """The server process whose open transaction holds back the oldest xmin
    of the queue's database (it keeps VACUUM from removing dead job rows), or
    None when no other process holds one. PostgreSQL only: on SQLite, always
    None. A role without `pg_read_all_stats` sees only its own sessions."""
    sql = ctx.dialect.sql

    def steps() -> Steps[XminHolder | None]:
        row = yield Stmt(sql.DB_OLDEST_XMIN, {}, fetch="one")
        if row is None:
            return None
        pid, application_name, state, backend_type, age = row
        return XminHolder(int(pid), application_name, state, backend_type, max(0.0, float(age)))

    return Plan(steps(), write=False, transaction=False)


# How often `wait` looks at the job: soon after it starts, then backing off.
# Woken by notices (PostgreSQL), it looks once a second all the same: a job
# that ends otherwise (a reaped lease, a crash, a cancel) sends none.
WAIT_POLL_BASE = 0.005
WAIT_POLL_CAP = 0.5
WAIT_NOTICE_POLL = 1.0


class Waiting:
    """The clock of one `wait(job_id, timeout)`: the queue's `wait` reads the
    job, and `after(job)` says what next: None when it is terminal (return
    it), else how long to sleep before reading it again; `TimeoutError` when
    `timeout` seconds have passed (None: no limit)."""

    def __init__(
        self,
        job_id: uuid.UUID | str,
        timeout: float | dt.timedelta | None,
        *,
        notices: bool = False,
    ) -> None:
        self.job_id = _job_id(job_id)
        self.notices = notices
        self.timeout = (
            None
            if timeout is None
            else validate.seconds("timeout", timeout, high=validate.MAX_DELAY)
        )
        self._deadline = None if self.timeout is None else time.monotonic() + self.timeout
        self._polls = 0

    def after(self, job: Job) -> float | None:
        if job.status in TERMINAL:
            return None
        self._polls += 1
        delay = (
            WAIT_NOTICE_POLL
            if self.notices
            else backoff(self._polls, base=WAIT_POLL_BASE, cap=WAIT_POLL_CAP, jitter=0.2)
        )
        if self._deadline is None:
            return delay
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(
                f"job {self.job_id} is still {job.status.value} after {self.timeout:g}s"
            )
        return min(delay, remaining)


def wait_mark(ctx: Ctx, job_id: uuid.UUID | str) -> Plan[None]:
    """Say that someone waits for a job: when it completes or dies, the
    statement that ends it sends a `done` notice (PostgreSQL). Nothing for a
    job that has ended already, or does not exist."""
    jid = _job_id(job_id)
    d = ctx.dialect

    def steps() -> Steps[None]:
        yield Stmt(d.sql.JOB_WAIT_MARK, {"id": d.id(jid)})

    return Plan(steps(), transaction=False)


def get(ctx: Ctx, job_id: uuid.UUID | str) -> Plan[Job]:
    """One job by id; `JobNotFound` if there is none."""
    jid = _job_id(job_id)
    d = ctx.dialect

    def steps() -> Steps[Job]:
        row = yield Stmt(d.sql.JOB_GET, {"id": d.id(jid)}, fetch="one")
        if row is None:
            raise JobNotFound(jid)
        return d.job(row)

    return Plan(steps(), write=False, transaction=False)


def _refused(ctx: Ctx, jid: uuid.UUID, wanted: str) -> Steps[None]:
    """Raise JobNotFound saying why a guarded change matched no row."""
    d = ctx.dialect
    row = yield Stmt(d.sql.JOB_STATUS, {"id": d.id(jid)}, fetch="one")
    if row is None:
        raise JobNotFound(jid)
    raise JobNotFound(jid, f"it is {row[0]}, not {wanted}")


def _cancel_text(reason: str | None) -> str:
    """The error text a cancel leaves on its job: who asked, and why."""
    if reason is None:
        return f"cancelled by request from {_requester()}"
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidArgument(f"reason={reason!r}: expected a non-empty string")
    return _error_text("reason", f"cancelled by request from {_requester()}: {reason}")


def _requester() -> str:
    """Who is asking: user@host and process id of the caller."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):  # no login name and no passwd entry (a container)
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()} pid {os.getpid()}"


def cancel(ctx: Ctx, job_id: uuid.UUID | str, *, reason: str | None = None) -> Plan[JobStatus]:
    """Cancel a job. One that is pending or retryable is `cancelled` at once:
    it will never run. One that is `running` is marked cancel-requested in the
    same statement and this returns at once (`JobStatus.RUNNING`): its worker
    hears it (a notice on PostgreSQL, its next lease renewal everywhere) and
    stops the handler; the job then ends `cancelled`. If its completion or
    failure commits first, that outcome stands. The job's `last_error` says
    who asked (user@host and pid) and `reason`. A job already finished raises
    `JobNotFound` saying its status. Returns the job's status after the call."""
    jid = _job_id(job_id)
    d = ctx.dialect
    params = {"id": d.id(jid), "now": ctx.now(), "error": _cancel_text(reason)}

    def steps() -> Steps[JobStatus]:
        row = yield Stmt(d.sql.JOB_CANCEL, params, fetch="one")
        if row is None:
            yield from _refused(ctx, jid, "pending, retryable or running")
        return JobStatus(row[0])

    return Plan(steps(), transaction=False)


def cancel_many(
    ctx: Ctx,
    *,
    job_type: str | None = None,
    queue: str | None = None,
    reason: str | None = None,
    batch_size: int = DEFAULT_CLEANUP_BATCH,
) -> Plan[Cancelled]:
    """`cancel` every live job (pending, retryable or running) of `job_type`
    and/or `queue` (one of them at least), in batches of `batch_size`, each
    one statement and one commit. A job enqueued while this runs may be
    cancelled too. Returns how many were cancelled and how many running jobs
    were asked to stop."""
    job_type = _job_type_filter(job_type)
    queue = None if queue is None else validate.name("queue", queue)
    if job_type is None and queue is None:
        raise InvalidArgument("cancel_many: expected job_type or queue (or both), got neither")
    _check_batch_size(batch_size)
    params = {
        "job_type": job_type,
        "queue": queue,
        "limit": batch_size,
        "now": ctx.now(),
        "error": _cancel_text(reason),
    }
    sql = ctx.dialect.sql.JOB_CANCEL_MANY

    def steps() -> Steps[Cancelled]:
        cancelled = requested = 0
        while True:
            rows = yield Stmt(sql, params, fetch="all")
            yield COMMIT
            running = sum(1 for r in rows if r[0] == JobStatus.RUNNING)
            requested += running
            cancelled += len(rows) - running
            if len(rows) < batch_size:
                return Cancelled(cancelled=cancelled, requested=requested)

    return Plan(steps(), transaction=False)


# --- dead jobs ----------------------------------------------------------------


def dead_list(
    ctx: Ctx, limit: int = DEAD_LIST_DEFAULT, *, job_type: str | None = None
) -> Plan[list[Job]]:
    """Dead jobs, oldest first, at most `limit` (up to `MAX_LIST_LIMIT`; a
    non-positive limit means 100)."""
    validate.count("limit", limit, low=-validate.MAX_INT32, high=validate.MAX_LIST_LIMIT)
    d = ctx.dialect
    params = {
        "status": JobStatus.DEAD.value,
        "job_type": _job_type_filter(job_type),
        "limit": limit if limit > 0 else DEAD_LIST_DEFAULT,
    }

    def steps() -> Steps[list[Job]]:
        rows = yield Stmt(d.sql.JOB_LIST_BY_STATUS, params, fetch="all")
        return [d.job(r) for r in rows]

    return Plan(steps(), write=False, transaction=False)


def _job_type_filter(job_type: str | None) -> str | None:
    return None if job_type is None else validate.name("job_type", job_type)


def _check_job_type(job_type: str) -> None:
    """A whole-type operation's type: a non-empty string, never None (all types)."""
    if _job_type_filter(job_type) is None:
        raise InvalidArgument("job_type=None: expected a non-empty string")


def dead_count(ctx: Ctx, *, job_type: str | None = None) -> Plan[int]:
    """How many jobs are dead (of `job_type`, if given)."""
    sql = ctx.dialect.sql.JOB_COUNT_BY_STATUS
    params = {"status": JobStatus.DEAD.value, "job_type": _job_type_filter(job_type)}

    def steps() -> Steps[int]:
        row = yield Stmt(sql, params, fetch="one")
        return int(row[0])

    return Plan(steps(), write=False, transaction=False)


def dead_get(ctx: Ctx, job_id: uuid.UUID | str) -> Plan[Job]:
    """One dead job; `JobNotFound` if no dead job has this id."""
    inner = get(ctx, job_id)

    def steps() -> Steps[Job]:
        job = yield from inner.steps
        if job.status != JobStatus.DEAD:
            raise JobNotFound(job.id, f"it is {job.status.value}, not dead")
        return job

    return Plan(steps(), write=False, transaction=False)


def _check_run_at(run_at: dt.datetime | None) -> dt.datetime | None:
    return None if run_at is None else validate.run_at("run_at", run_at)


def dead_requeue(
    ctx: Ctx, job_id: uuid.UUID | str, run_at: dt.datetime | None = None
) -> Plan[None]:
    """A dead job back to pending with its attempts reset, due at `run_at` or now.
    `InvalidArgument` (nothing changed) if a live job now holds its dedupe key."""
    jid = _job_id(job_id)
    run_at = _check_run_at(run_at)
    d = ctx.dialect
    params = {"id": d.id(jid), "run_at": d.time(run_at), "now": ctx.now()}

    def steps() -> Steps[None]:
        row = yield Stmt(d.sql.JOB_REQUEUE_DEAD, params, fetch="one")
        if row is None:
            found = yield Stmt(d.sql.JOB_GET, {"id": d.id(jid)}, fetch="one")
            job = None if found is None else d.job(found)
            if job is not None and job.status == JobStatus.DEAD and job.dedupe_key is not None:
                key = {"dedupe_key": job.dedupe_key}
                live = yield Stmt(d.sql.JOB_GET_LIVE_BY_DEDUPE_KEY, key, fetch="one")
                if live is not None:
                    raise InvalidArgument(
                        f"job {jid} cannot be requeued: live job {d.id_out(live[0])} holds its "
                        f"dedupe_key={job.dedupe_key!r}"
                    )
            yield from _refused(ctx, jid, "dead")
        elif d.notifies:
            yield Stmt(d.sql.JOB_NOTIFY, {"queue": row[0]}, fetch="all")

    return Plan(steps())


def dead_requeue_type(
    ctx: Ctx,
    job_type: str,
    *,
    run_at: dt.datetime | None = None,
    batch_size: int = DEFAULT_CLEANUP_BATCH,
) -> Plan[TypeRequeue]:
    """Every dead job of `job_type` back to pending with its attempts reset,
    due at `run_at` or now. Jobs without a dedupe key go in batches of
    `batch_size`, one statement and one commit each; those with one go one by
    one, and a job whose key a live job holds stays dead (its id is in the
    result's `held`). A job that dies while this runs may be requeued too."""
    _check_job_type(job_type)
    run_at = _check_run_at(run_at)
    _check_batch_size(batch_size)
    d = ctx.dialect
    when = {"run_at": d.time(run_at), "now": ctx.now()}

    def steps() -> Steps[TypeRequeue]:
        queues: set[str] = set()
        requeued = 0
        params = {"job_type": job_type, "limit": batch_size, **when}
        while True:
            rows = yield Stmt(d.sql.JOB_REQUEUE_DEAD_OF_TYPE, params, fetch="all")
            yield COMMIT
            queues.update(r[0] for r in rows)
            requeued += len(rows)
            if len(rows) < batch_size:
                break
        held: list[uuid.UUID] = []
        keyed = yield Stmt(
            d.sql.JOB_DEAD_WITH_DEDUPE_KEY_OF_TYPE, {"job_type": job_type}, fetch="all"
        )
        for (raw_id,) in keyed:
            row = yield Stmt(d.sql.JOB_REQUEUE_DEAD, {"id": raw_id, **when}, fetch="one")
            yield COMMIT
            if row is not None:
                queues.add(row[0])
                requeued += 1
                continue
            found = yield Stmt(d.sql.JOB_GET, {"id": raw_id}, fetch="one")
            if found is not None and d.job(found).status == JobStatus.DEAD:
                held.append(d.id_out(raw_id))  # a live job holds its key
        if d.notifies:
            for name in sorted(queues):
                yield Stmt(d.sql.JOB_NOTIFY, {"queue": name}, fetch="all")
        return TypeRequeue(requeued=requeued, held=tuple(held))

    return Plan(steps(), transaction=False)


def dead_discard(ctx: Ctx, job_id: uuid.UUID | str) -> Plan[None]:
    """Delete one dead job for good."""
    jid = _job_id(job_id)
    d = ctx.dialect

    def steps() -> Steps[None]:
        row = yield Stmt(d.sql.JOB_DELETE_DEAD, {"id": d.id(jid)}, fetch="one")
        if row is None:
            yield from _refused(ctx, jid, "dead")

    return Plan(steps())


def dead_discard_type(
    ctx: Ctx, job_type: str, *, batch_size: int = DEFAULT_CLEANUP_BATCH
) -> Plan[int]:
    """Delete every dead job of `job_type` for good, in batches of
    `batch_size` (each its own transaction, as cleanup does). Returns how
    many were deleted."""
    _check_job_type(job_type)
    _check_batch_size(batch_size)
    params = {"job_type": job_type, "limit": batch_size}
    steps = _delete_in_batches(ctx.dialect.sql.JOB_DELETE_DEAD_OF_TYPE, params, batch_size)
    return Plan(steps, transaction=False)


# --- flow control -------------------------------------------------------------


def pause(ctx: Ctx, queue: str) -> Plan[None]:
    """Stop every claim, on every host, from taking jobs of `queue` until
    `resume`. Once this returns no claim returns a job of the queue: on
    PostgreSQL it waits for the claims in flight to end (a lock that every
    claim's read of the pause list conflicts with, held for a moment), on
    SQLite the write lock does the same. Running jobs finish as usual; enqueue
    still works, and the jobs wait. Pausing a paused queue changes nothing.

    If the lock cannot be had within 5 s (a long transaction that read the
    pause table holds it), `DatabaseUnavailable` is raised, nothing changed,
    and the claims that waited go on: try again."""
    name = validate.name("queue", queue)
    sql = ctx.dialect.sql
    timeout = {"lock_timeout": f"{PAUSE_LOCK_TIMEOUT_MS}ms"}

    def steps() -> Steps[None]:
        yield Stmt(sql.QUEUE_PAUSE_LOCK_TIMEOUT, timeout, fetch="all")
        yield Stmt(sql.QUEUE_PAUSE_LOCK)
        yield Stmt(sql.QUEUE_PAUSE, {"queue": name, "now": ctx.now()})

    return Plan(steps())


def resume(ctx: Ctx, queue: str) -> Plan[None]:
    """Let claims take jobs of `queue` again. On PostgreSQL the idle workers
    of the queue are woken at once (the notice a new job sends); SQLite's
    workers see it at their next poll. Resuming a queue that is not paused
    changes nothing."""
    name = validate.name("queue", queue)
    d = ctx.dialect

    def steps() -> Steps[None]:
        ctx.claim_bounds.forget()  # its jobs may sit behind the bounds
        row = yield Stmt(d.sql.QUEUE_RESUME, {"queue": name}, fetch="one")
        if row is not None and d.notifies:
            yield Stmt(d.sql.JOB_NOTIFY, {"queue": name}, fetch="all")

    return Plan(steps())


def paused(ctx: Ctx) -> Plan[list[str]]:
    """The paused queues, by name."""
    sql = ctx.dialect.sql.QUEUE_PAUSED_LIST

    def steps() -> Steps[list[str]]:
        return [r[0] for r in (yield Stmt(sql, fetch="all"))]

    return Plan(steps(), write=False, transaction=False)


def _scope(queue: str | None, job_type: str | None) -> tuple[LimitScope, str]:
    """The one group a limit call names: a queue or a job type."""
    if (queue is None) == (job_type is None):
        raise InvalidArgument(
            f"queue={queue!r}, job_type={job_type!r}: expected exactly one of queue or job_type"
        )
    if queue is not None:
        return LimitScope.QUEUE, validate.name("queue", queue)
    return LimitScope.TYPE, validate.name("job_type", job_type)


def limit_row(limit: Limit, now: Any) -> dict[str, Any]:
    """A limit's parameters for LIMIT_SET, checked."""
    concurrency = validate.fleet_limit("concurrency", limit.concurrency)
    key_concurrency = validate.fleet_limit("key_concurrency", limit.key_concurrency)
    rate = validate.rate("rate", limit.rate)
    key_rate = validate.rate("key_rate", limit.key_rate)
    for label, value in (("key_concurrency", key_concurrency), ("key_rate", limit.key_rate)):
        if value is not None and limit.scope is not LimitScope.TYPE:
            raise InvalidArgument(
                f"{label}={value!r} for queue {limit.name!r}: expected it on a job type "
                "only (a concurrency_key belongs to a job of a type)"
            )
    if concurrency is None and key_concurrency is None and rate is None and key_rate is None:
        raise InvalidArgument(
            f"{limit.scope.value} {limit.name!r}: expected concurrency, key_concurrency, "
            "rate or key_rate (clear_limit removes a limit)"
        )
    return {
        "kind": limit.scope.value,
        "name": limit.name,
        "concurrency": concurrency,
        "key_concurrency": key_concurrency,
        "rate_count": None if rate is None else rate[0],
        "rate_period": None if rate is None else rate[1],
        "key_rate_count": None if key_rate is None else key_rate[0],
        "key_rate_period": None if key_rate is None else key_rate[1],
        "source": limit.source.value,
        "now": now,
    }


def _limits_write(
    ctx: Ctx, rows: Sequence[dict[str, Any]], clear: Sequence[dict[str, Any]]
) -> Steps[None]:
    """Write and remove limits so that they hold from the commit on: on
    PostgreSQL after the claims in flight ended (as `pause` waits for them)."""
    ctx.limits_seen.forget()
    if not rows and not clear:
        return
    yield from _limits_lock(ctx)
    yield from _limits_apply(ctx, rows, clear)


def _limits_lock(ctx: Ctx) -> Steps[None]:
    """Wait (at most PAUSE_LOCK_TIMEOUT_MS on PostgreSQL) for the claims in
    flight, and hold new ones, until the transaction commits."""
    sql = ctx.dialect.sql
    timeout = {"lock_timeout": f"{PAUSE_LOCK_TIMEOUT_MS}ms"}
    if ctx.dialect.notifies:
        yield Stmt(sql.QUEUE_PAUSE_LOCK_TIMEOUT, timeout, fetch="all")
    yield Stmt(sql.LIMIT_TABLE_LOCK)


def _limits_apply(
    ctx: Ctx, rows: Sequence[dict[str, Any]], clear: Sequence[dict[str, Any]]
) -> Steps[None]:
    sql = ctx.dialect.sql
    for row in rows:
        yield Stmt(sql.LIMIT_SET, row)
    for row in clear:
        yield Stmt(sql.LIMIT_CLEAR, row, fetch="all")
    if ctx.dialect.notifies:  # more room, or none at all: idle workers look again
        for row in [*rows, *clear]:
            yield Stmt(sql.JOB_NOTIFY, {"queue": _wake_payload(row)}, fetch="all")


def _wake_payload(row: dict[str, Any]) -> str:
    """The notice that wakes the workers a group's jobs concern: its queue's
    new-job notice, or for a job type one that concerns every queue."""
    if row["kind"] == LimitScope.QUEUE.value:
        return str(row["name"])
    return Notice(NoticeKind.JOB).payload()


def set_limit(
    ctx: Ctx,
    *,
    queue: str | None = None,
    job_type: str | None = None,
    concurrency: int | None = None,
    rate: str | None = None,
    key_concurrency: int | None = None,
    key_rate: str | None = None,
) -> Plan[None]:
    """Limit one queue or one job type across every host: at most
    `concurrency` running jobs, at most `rate` starts ("100/s", "5/m",
    "1000/h"; a bucket of that many tokens), and for a job type at most
    `key_concurrency` running jobs and at most `key_rate` starts per
    `concurrency_key` (a bucket per key; a job without a key counts toward
    neither). The values replace
    the group's limits (one not given is no limit); at least one is needed
    (`clear_limit` removes them all). From the commit on no claim on any host
    goes past them; jobs already running finish. A type's limits declared in
    its handler are written again at each worker's boot, replacing these."""
    scope, name = _scope(queue, job_type)
    limit = Limit(
        scope, name, concurrency, key_concurrency, rate, LimitSource.OPERATOR, key_rate=key_rate
    )
    row = limit_row(limit, ctx.now())
    return Plan(_limits_write(ctx, [row], []))


def clear_limit(ctx: Ctx, *, queue: str | None = None, job_type: str | None = None) -> Plan[bool]:
    """Remove every limit of one queue or job type; True if it had some. Its
    waiting jobs are claimable at once (PostgreSQL wakes the idle workers)."""
    scope, name = _scope(queue, job_type)
    d = ctx.dialect

    def steps() -> Steps[bool]:
        ctx.limits_seen.forget()
        group = {"kind": scope.value, "name": name}
        rows = yield Stmt(d.sql.LIMIT_CLEAR, group, fetch="all")
        if rows and d.notifies:
            yield Stmt(d.sql.JOB_NOTIFY, {"queue": _wake_payload(group)}, fetch="all")
        return bool(rows)

    return Plan(steps())


def prune_key_buckets(ctx: Ctx) -> Plan[int]:
    """Delete the key buckets that have refilled since their last take (a
    key without a row has a full bucket, so nothing changes for any claim)
    and those of types that no longer have a key rate; returns how many.
    The maintenance leader runs it with the cleaner, so the table holds the
    keys in use, not every key ever seen."""
    sql = ctx.dialect.sql.KEY_BUCKET_PRUNE
    params = {"now": ctx.now()}

    def steps() -> Steps[int]:
        count: int = yield Stmt(sql, params)
        return count

    return Plan(steps(), transaction=False)


def limit_from_row(row: Sequence[Any]) -> Limit:
    """A `Limit` from a row of LIMIT_LIST."""
    rate = None if row[4] is None else validate.rate_text(int(row[4]), float(row[5]))
    key_rate = None if row[7] is None else validate.rate_text(int(row[7]), float(row[8]))
    return Limit(
        LimitScope(row[0]),
        row[1],
        row[2],
        row[3],
        rate,
        LimitSource(row[6]),
        key_rate=key_rate,
    )


def limits(ctx: Ctx) -> Plan[list[Limit]]:
    """Every limit the database holds, by scope and name."""
    sql = ctx.dialect.sql.LIMIT_LIST

    def steps() -> Steps[list[Limit]]:
        return [limit_from_row(row) for row in (yield Stmt(sql, fetch="all"))]

    return Plan(steps(), write=False, transaction=False)


def limits_sync(ctx: Ctx, declared: Sequence[Limit], *, job_types: Sequence[str]) -> Plan[int]:
    """Write the limits the code declares for its job types (`job_types`:
    every type its registry handles) and remove the declared-in-code limits of
    those types that declare none now; an operator's limit of a type without
    a declaration stays, as do the limits of types this code does not handle
    (another application's). Writes only what differs, in one transaction;
    returns how many groups changed."""
    now = ctx.now()
    rows = {(r["kind"], r["name"]): r for r in (limit_row(limit, now) for limit in declared)}
    handled = {validate.name("job_type", t) for t in job_types}
    sql = ctx.dialect.sql

    def changes() -> Steps[tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
        current = {
            (lim.scope.value, lim.name): lim
            for lim in map(limit_from_row, (yield Stmt(sql.LIMIT_LIST, fetch="all")))
        }
        wanted = [r for k, r in rows.items() if k not in current or _differs(current[k], r)]
        stale = [
            {"kind": kind, "name": name}
            for (kind, name), lim in current.items()
            if kind == LimitScope.TYPE.value
            and name in handled
            and (kind, name) not in rows
            and lim.source is LimitSource.CODE
        ]
        return wanted, stale

    def steps() -> Steps[int]:
        ctx.limits_seen.forget()
        wanted, stale = yield from changes()
        if not wanted and not stale:
            return 0
        # The read's lock ends before the wait for the write lock: two workers
        # booting at once would each hold the one and wait for the other's.
        # Under the write lock the limits are read again (another may have
        # written them meanwhile).
        yield COMMIT
        yield from _limits_lock(ctx)
        wanted, stale = yield from changes()
        yield from _limits_apply(ctx, wanted, stale)
        return len(wanted) + len(stale)

    return Plan(steps())


def _differs(current: Limit, row: dict[str, Any]) -> bool:
    def text(count: int | None, period: float) -> str | None:
        return None if count is None else validate.rate_text(count, period)

    return (
        current.concurrency,
        current.key_concurrency,
        current.rate,
        current.key_rate,
        current.source.value,
    ) != (
        row["concurrency"],
        row["key_concurrency"],
        text(row["rate_count"], row["rate_period"]),
        text(row["key_rate_count"], row["key_rate_period"]),
        row["source"],
    )


# --- leadership ---------------------------------------------------------------


def leader_attempt_elect(ctx: Ctx, name: str, holder: str, *, ttl: float) -> Plan[bool]:
    """Take or keep the leadership `name` for `ttl` seconds; True if `holder` leads."""
    ttl = validate.seconds("ttl", ttl, low=validate.MIN_LEASE, high=validate.MAX_LEASE)
    params = {"name": name, "holder": holder, "ttl": ttl, "now": ctx.now()}
    sql = ctx.dialect.sql.LEADER_ATTEMPT_ELECT

    def steps() -> Steps[bool]:
        row = yield Stmt(sql, params, fetch="one")
        return row is not None

    return Plan(steps(), transaction=False)


def leader_resign(ctx: Ctx, name: str, holder: str) -> Plan[None]:
    """Give up the leadership at once, if `holder` has it."""
    sql = ctx.dialect.sql.LEADER_RESIGN

    def steps() -> Steps[None]:
        yield Stmt(sql, {"name": name, "holder": holder})

    return Plan(steps(), transaction=False)


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
