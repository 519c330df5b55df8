"""Recovery and retention: expired leases reaped, a crashed worker's jobs
requeued, finished jobs cleaned up, and the summary and xmin reports."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Mapping
from typing import Final

from .. import validate
from ..drivers.postgres.sql.workflows import WorkflowSql as PostgresWorkflowSql
from ..drivers.sqlite.sql.workflows import WorkflowSql as SqliteWorkflowSql
from ..errors import InvalidArgument
from ..model import TERMINAL, JobStatus, RetryPolicy
from ..plan import BEGIN, COMMIT, Plan, Steps, Stmt
from ..reports import Summary, SummaryRow, XminHolder
from .context import DEFAULT_CLEANUP_BATCH, Ctx, _check_batch_size, _delete_in_batches, _job_id
from .limiting import limit_from_row
from .settling import _error_text

# --- recovery -----------------------------------------------------------------


def _workflow_sql(name: str) -> type[PostgresWorkflowSql] | type[SqliteWorkflowSql]:
    """The workflow statements of the engine called `name`."""
    return PostgresWorkflowSql if name == "postgres" else SqliteWorkflowSql


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
    sql = ctx.dialect.sql

    def steps() -> Steps[int]:
        # Whether a job ran alone is read first: the update's own changes
        # must not make the last of several look alone (SQLite's subqueries
        # see the rows the statement already changed).
        held = yield Stmt(sql.JOB_HELD_BY_WORKER, {"worker_id": worker_id}, fetch="one")
        rows = yield Stmt(sql.JOB_REQUEUE_CRASHED, {**params, "alone": held[0] == 1}, fetch="all")
        return len(rows)

    return Plan(steps(), transaction=True)


# --- retention and reporting --------------------------------------------------

Retention = float | dt.timedelta | Mapping[JobStatus | str, float | dt.timedelta | None]


def cleanup(
    ctx: Ctx, older_than: Retention, *, batch_size: int = DEFAULT_CLEANUP_BATCH
) -> Plan[int]:
    """Delete terminal jobs finished more than `older_than` ago, in batches of
    `batch_size` (each its own transaction, so no long lock). `older_than` is one
    age for every terminal status or a mapping per status (a status left out, or
    mapped to None, is kept). Returns how many were deleted. The jobs of a
    batch are left to `batch_cleanup`, which removes a batch whole."""
    ages = retention_ages(older_than)
    _check_batch_size(batch_size)
    sql = ctx.dialect.sql.JOB_DELETE_FINISHED
    now = ctx.now()

    def steps() -> Steps[int]:
        total = 0
        for status, age in ages.items():
            params = {"status": status.value, "age": age, "limit": batch_size, "now": now}
            total += yield from _delete_in_batches(sql, params, batch_size)
        if not ctx.dialect.bucket_count:  # a cluster has no workflows (drivers.citus)
            total += yield from _delete_finished_workflows(ctx, ages, batch_size)
        return total

    return Plan(steps(), transaction=False)


def _delete_finished_workflows(
    ctx: Ctx, ages: Mapping[JobStatus, float], batch_size: int
) -> Steps[int]:
    """Delete whole workflows every job of which is past its status's
    retention, a batch of `batch_size` workflows per transaction: a parent
    goes only with the children that read its result. Returns how many jobs
    went."""
    d = ctx.dialect
    sql = _workflow_sql(d.name)
    params = {f"age_{status.value}": ages.get(status) for status in TERMINAL}
    params.update(limit=batch_size, now=ctx.now())
    total = 0
    while True:
        yield BEGIN
        picked = yield Stmt(sql.WORKFLOW_FINISHED_PICK, params, fetch="all")
        ids = [d.id_out(row[0]) for row in picked]
        if ids:
            key = json.dumps([str(i) for i in ids]) if d.name == "sqlite" else ids
            total += yield Stmt(sql.WORKFLOW_DELETE_JOBS, {"ids": key})
            yield Stmt(sql.WORKFLOW_DELETE_EDGES, {"ids": key})
            yield Stmt(sql.WORKFLOW_DELETE, {"ids": key})
        yield COMMIT
        if len(ids) < batch_size:
            return total


def retention_ages(older_than: Retention) -> dict[JobStatus, float]:
    """The retention in seconds of each terminal status kept for a while
    (a status absent is kept for ever); `InvalidArgument` for a bad one."""
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
    return ages


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
