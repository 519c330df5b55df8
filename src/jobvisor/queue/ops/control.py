"""Job control: waiting for a job, reading one, cancelling, the dead jobs
(list, requeue, discard), and pausing queues."""

from __future__ import annotations

import datetime as dt
import getpass
import os
import socket
import time
import uuid

from ...backoff import backoff
from .. import validate
from ..errors import InvalidArgument, JobNotFound
from ..model import TERMINAL, Job, JobStatus, TypeRequeue
from ..plan import COMMIT, Plan, Steps, Stmt
from ..reports import Cancelled
from .context import (
    DEFAULT_CLEANUP_BATCH,
    PAUSE_LOCK_TIMEOUT_MS,
    Ctx,
    _check_batch_size,
    _delete_in_batches,
    _job_id,
)
from .settling import _error_text

DEAD_LIST_DEFAULT = 100


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
        return self.after_poll(f"job {self.job_id} is still {job.status.value}")

    def after_poll(self, still: str) -> float:
        """How long to sleep before the next read; `TimeoutError` saying
        `still` (what was waited for is not there) when the time is up."""
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
            raise TimeoutError(f"{still} after {self.timeout:g}s")
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
