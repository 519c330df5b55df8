"""Putting jobs in: `enqueue` (dedupe keys and unique jobs) and `enqueue_many`
(a COPY, or a keyed insert for jobs with dedupe keys)."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, LiteralString

from .. import bulk
from ..model import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_QUEUE,
    NewJob,
    OnConflict,
    Unique,
)
from ..plan import Plan, Steps, Stmt
from .context import Ctx, _sized, _trace_meta, _with_correlation, _with_meta

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
        "id": d.id(d.keyed_id(job.id, job.placement_key)),
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
