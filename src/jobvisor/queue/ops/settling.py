"""What becomes of a claimed job: lease renewal and progress, completion and
its result, release, failure, snooze, and a cancel by its own handler."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, LiteralString

from ...errortext import describe
from .. import validate
from ..errors import InvalidArgument, LeaseLost
from ..jsonvalue import payload_json
from ..model import Job, JobStatus
from ..plan import Plan, Steps, Stmt
from ..reports import Renewal
from .context import Ctx, _held

# An error message is kept to this many characters: enough for a traceback's
# last frames, small enough that a failing handler cannot bloat the table.
MAX_ERROR_CHARS = 8000


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
    as JSON text (see `jsonvalue.progress_json`); a job without an entry keeps its own.
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
        text = describe(error)
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
