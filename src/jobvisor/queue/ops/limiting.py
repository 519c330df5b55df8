"""Concurrency and rate limits: set, clear, list, sync with the declared ones,
and the key buckets' pruning."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import validate
from ..errors import InvalidArgument
from ..model import (
    Limit,
    LimitScope,
    LimitSource,
)
from ..notices import Notice, NoticeKind
from ..plan import COMMIT, Plan, Steps, Stmt
from .context import PAUSE_LOCK_TIMEOUT_MS, Ctx


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
