"""Batches: a group of jobs whose last member to finish enqueues callbacks.

A batch is a row in `jobvisor_batches` with a count of its unfinished
members. Opening one writes that row and its callbacks' jobs-to-be (their
ids, payloads and options, in `jobvisor_batch_callbacks`); adding members
counts them in under the batch row's lock and inserts them, marked with the
batch's id, in the same transaction; closing says no more members come from
the opener. The rest happens in the database: migration 0015's trigger,
whose WHEN clause looks only at jobs with a batch id, counts a member down
when it becomes terminal (completed, dead or cancelled), and the statement
that takes the count to zero while the batch is closed sets its
`finished_at` (a guarded update with one winner) and inserts the callbacks
in the same transaction. So a callback is enqueued exactly once, by the
commit that finished the last member; no sweep decides it. `batch_sweep` is
only a safety net for a batch left closed with no unfinished member and no
callbacks, and `batch_cleanup` removes finished batches whole.

Every function here returns a `Plan`, as `ops` does, so the sync and async
queues share them (`api` binds them)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from ..correlation import current_correlation_id
from . import ops, validate
from .drivers.postgres.sql.batches import BatchSql as PostgresBatchSql
from .drivers.sqlite.sql.batches import BatchSql as SqliteBatchSql
from .errors import BatchFinished, BatchNotFound, InvalidArgument
from .jsonvalue import payload_json
from .model import Job, JobStatus, NewJob, new_job_id
from .ops.context import one_database, uuid_of
from .ops.recovery import retention_ages
from .ops.scheduling import _time_out
from .plan import COMMIT, Plan, Steps, Stmt

# The callbacks a batch may have, by the keyword that sets each.
CALLBACK_KINDS: Final = {"on_success": "success", "on_failure": "failure", "on_finish": "finish"}
# The options a task's callback takes from the task (the rest are a member's).
_CALLBACK_OPTIONS: Final = ("queue", "priority", "max_attempts")
RESULTS_PAGE_DEFAULT: Final = 100
RESULTS_PAGE_MAX: Final = 10_000
SWEEP_LIMIT: Final = 100


@dataclasses.dataclass(frozen=True, slots=True)
class BatchStatus:
    """A batch as `get_batch` reads it.

    `counts` maps each status to how many members have it (callbacks are not
    members); `total` is how many members were added; `closed` says its
    opener closed it; `finished` that its last member finished and its
    callbacks were enqueued: `callbacks` maps the kind of each enqueued one
    ("success", "failure", "finish") to its job id."""

    id: uuid.UUID
    meta: dict[str, Any] | None
    closed: bool
    finished: bool
    total: int
    unfinished: int
    counts: Mapping[str, int]
    callbacks: Mapping[str, uuid.UUID]
    created_at: dt.datetime
    closed_at: dt.datetime | None
    finished_at: dt.datetime | None


@dataclasses.dataclass(frozen=True, slots=True)
class BatchPage:
    """One page of a batch's members, in id order: each `Job` with its
    status, `result` and `errors`. `cursor` is what to pass to
    `batch_results` for the next page; None on the last one."""

    jobs: list[Job]
    cursor: str | None


def for_dialect(name: str) -> type[PostgresBatchSql] | type[SqliteBatchSql]:
    """The batch statements of the engine called `name`."""
    return PostgresBatchSql if name == "postgres" else SqliteBatchSql


def batch_id_of(value: uuid.UUID | str) -> uuid.UUID:
    """A batch id from a UUID or its text; `InvalidArgument` otherwise."""
    return uuid_of("batch id", value)


def _callback_job(ctx: ops.Ctx, name: str, value: Any, payload: dict[str, Any]) -> NewJob | None:
    """The job a callback argument stands for: a job type, or a task (its
    name, queue, priority and max_attempts), with the batch's payload."""
    if value is None:
        return None
    job_type: Any = value
    options: Any = {}
    if not isinstance(value, str):
        job_type, options = getattr(value, "name", None), getattr(value, "options", None)
        if not isinstance(job_type, str) or not isinstance(options, Mapping):
            raise InvalidArgument(f"{name}={value!r}: expected a job type (str) or a task")
    chosen = {k: options[k] for k in _CALLBACK_OPTIONS if k in options}
    try:
        job = NewJob.build(job_type, payload, **chosen)
    except InvalidArgument as exc:
        raise InvalidArgument(f"{name}: {exc}") from None
    validate.payload_size(name, payload, job.payload_bytes, ctx.max_payload_bytes)
    return job


def _meta(meta: Any) -> dict[str, Any] | None:
    if meta is None:
        return None
    if not isinstance(meta, Mapping):
        raise InvalidArgument(f"meta={meta!r}: expected a mapping of JSON values or None")
    plain = dict(meta)
    try:
        payload_json(plain)
    except InvalidArgument as exc:
        raise InvalidArgument(f"meta: {exc}") from None
    return plain


def batch_open(
    ctx: ops.Ctx,
    *,
    on_success: Any = None,
    on_failure: Any = None,
    on_finish: Any = None,
    meta: Mapping[str, Any] | None = None,
) -> Plan[uuid.UUID]:
    """Open a batch; returns its id. Each callback is a job type or a task
    (`@registry.task`), enqueued once the batch is closed and its last member
    has finished: `on_finish` always, `on_success` only when every member
    completed, `on_failure` when one did not (dead or cancelled). A callback's
    payload is `{"batch_id": str, "meta": meta}` (a task callback takes
    `batch_id` and `meta` parameters); a task callback keeps its queue,
    priority and max_attempts. Bad input raises `InvalidArgument`, nothing
    written. Prefer `Queue.batch`, which opens, fills and closes one."""
    one_database(ctx, "batch")
    d = ctx.dialect
    s = for_dialect(d.name)
    batch_id = new_job_id()
    plain_meta = _meta(meta)
    payload = {"batch_id": str(batch_id), "meta": plain_meta}
    given = {"on_success": on_success, "on_failure": on_failure, "on_finish": on_finish}
    callbacks = {
        CALLBACK_KINDS[name]: job
        for name, value in given.items()
        if (job := _callback_job(ctx, name, value, payload)) is not None
    }
    correlation_id = current_correlation_id()

    def steps() -> Steps[uuid.UUID]:
        params = {"id": d.id(batch_id), "meta": d.meta(plain_meta), "now": ctx.now()}
        yield Stmt(s.BATCH_INSERT, params)
        for kind, job in sorted(callbacks.items()):
            yield Stmt(
                s.BATCH_CALLBACK_INSERT,
                {
                    "batch_id": d.id(batch_id),
                    "kind": kind,
                    "job_id": d.id(job.id),
                    "queue": job.queue,
                    "job_type": job.job_type,
                    "payload": job.payload_json,
                    "priority": job.priority,
                    "max_attempts": job.max_attempts,
                    "correlation_id": correlation_id,
                },
            )
        return batch_id

    return Plan(steps())


def _member(name: str, item: Any) -> Any:
    """A member item as `enqueue_many` takes it: a task call (`task.args(...)`)
    becomes its enqueue arguments; a deduplicated job is refused (its key's
    holder, which may be anyone's job, would be counted in)."""
    arguments = getattr(item, "enqueue_arguments", None)
    if callable(arguments):
        item = arguments()
    if isinstance(item, NewJob):
        keyed = item.dedupe_key is not None or item.unique is not None
    elif isinstance(item, Mapping):
        keyed = item.get("dedupe_key") is not None or item.get("unique") is not None
    else:
        return item  # enqueue_many names it
    if keyed:
        raise InvalidArgument(
            f"{name}: a batch member with a dedupe_key or unique: expected neither "
            "(a batch counts the jobs it creates, not another job holding the key)"
        )
    return item


def _refuse_add(ctx: ops.Ctx, batch_id: uuid.UUID) -> Steps[None]:
    s = for_dialect(ctx.dialect.name)
    row = yield Stmt(s.BATCH_GET, {"id": ctx.dialect.id(batch_id)}, fetch="one")
    if row is None:
        raise BatchNotFound(batch_id)
    raise BatchFinished(batch_id)


def _join(
    ctx: ops.Ctx, batch_id: uuid.UUID, insert: Plan[list[uuid.UUID]], count: int
) -> Plan[list[uuid.UUID]]:
    """Count `count` members into the batch (taking its row lock), insert them
    by `insert`'s steps and mark them as its own, in one transaction."""
    d = ctx.dialect
    s = for_dialect(d.name)

    def steps() -> Steps[list[uuid.UUID]]:
        if count == 0:
            grown = yield Stmt(s.BATCH_GET, {"id": d.id(batch_id)}, fetch="one")
            if grown is None:
                raise BatchNotFound(batch_id)
            return []
        grown = yield Stmt(s.BATCH_GROW, {"id": d.id(batch_id), "count": count}, fetch="one")
        if grown is None:
            yield from _refuse_add(ctx, batch_id)
        ids: list[uuid.UUID] = yield from insert.steps
        ids_param: Any = ids if d.name == "postgres" else json.dumps([str(i) for i in ids])
        yield Stmt(s.BATCH_ATTACH, {"batch_id": d.id(batch_id), "ids": ids_param})
        return ids

    return Plan(steps(), conn=insert.conn)


def batch_add(
    ctx: ops.Ctx,
    /,
    batch_id: uuid.UUID | str,
    job_type: Any,
    payload: Any = None,
    **options: Any,
) -> Plan[uuid.UUID]:
    """Add one job to a batch that has not finished; returns its id. The
    arguments are `enqueue`'s (`job_type` may be a task call,
    `task.args(...)`), except that a member takes no `dedupe_key` or
    `unique`. A running member may add to its own batch (`job.batch_id`): the
    batch cannot finish while it runs. `BatchFinished` once the batch's
    callbacks are enqueued, `BatchNotFound` for an unknown id; nothing is
    written then."""
    bid = batch_id_of(batch_id)
    conn = options.pop("conn", None)
    if not isinstance(job_type, str) and callable(getattr(job_type, "enqueue_arguments", None)):
        if payload is not None:
            raise InvalidArgument("payload: expected None with a task call (its arguments)")
        options = {**job_type.enqueue_arguments(), **options}
    else:
        options = {"job_type": job_type, "payload": payload, **options}
    item = _member("job", options)
    many = batch_add_many(ctx, bid, [item], conn=conn)

    def steps() -> Steps[uuid.UUID]:
        (job_id,) = yield from many.steps
        return job_id

    return Plan(steps(), conn=conn)


def batch_add_many(
    ctx: ops.Ctx, batch_id: uuid.UUID | str, jobs: Iterable[Any], *, conn: Any = None
) -> Plan[list[uuid.UUID]]:
    """Add many jobs to a batch that has not finished, in one transaction;
    returns their ids in order. Each item is what `enqueue_many` takes, or a
    task call (`task.args(...)`); none may have a `dedupe_key` or `unique`.
    `BatchFinished` / `BatchNotFound` as `batch_add`."""
    bid = batch_id_of(batch_id)
    if isinstance(jobs, str | bytes | Mapping):
        raise InvalidArgument(f"jobs={jobs!r}: expected an iterable of jobs")
    items = [_member(f"jobs[{i}]", item) for i, item in enumerate(jobs)]
    insert = ops.enqueue_many(ctx, items, conn=conn)
    return _join(ctx, bid, insert, len(items))


def batch_close(ctx: ops.Ctx, batch_id: uuid.UUID | str) -> Plan[bool]:
    """Close a batch: its opener adds no more members (a running member
    still may). When none is unfinished (an empty batch, or every member
    finished already), it finishes now and its callbacks are enqueued.
    Returns whether this call finished it. Closing twice changes nothing."""
    bid = batch_id_of(batch_id)
    d = ctx.dialect
    s = for_dialect(d.name)

    def steps() -> Steps[bool]:
        params = {"id": d.id(bid), "now": ctx.now()}
        yield Stmt(s.BATCH_CLOSE, params)
        return (yield from _fire(ctx, params))

    return Plan(steps())


def _fire(ctx: ops.Ctx, params: dict[str, Any]) -> Steps[bool]:
    """The guarded firing of a batch; whether it fired."""
    rows: list[Any] = []
    for sql in for_dialect(ctx.dialect.name).BATCH_FIRE:
        rows = yield Stmt(sql, params, fetch="all")
    return bool(rows)


def get_batch(ctx: ops.Ctx, batch_id: uuid.UUID | str) -> Plan[BatchStatus]:
    """A batch's state: its members' counts by status, whether it is closed
    and finished, and the callbacks enqueued (their job ids by kind).
    `BatchNotFound` for an unknown id."""
    bid = batch_id_of(batch_id)
    d = ctx.dialect
    s = for_dialect(d.name)

    def steps() -> Steps[BatchStatus]:
        params = {"id": d.id(bid)}
        row = yield Stmt(s.BATCH_GET, params, fetch="one")
        if row is None:
            raise BatchNotFound(bid)
        counts = yield Stmt(s.BATCH_MEMBER_COUNTS, params, fetch="all")
        callbacks = yield Stmt(s.BATCH_CALLBACKS_ENQUEUED, params, fetch="all")
        meta = row[1]
        return BatchStatus(
            id=bid,
            meta=json.loads(meta) if isinstance(meta, str) else meta,
            closed=bool(row[2]),
            finished=row[8] is not None,
            total=row[3],
            unfinished=row[4],
            counts={status: n for status, n in sorted(counts)},
            callbacks={kind: d.id_out(job_id) for kind, job_id in callbacks},
            created_at=_time_out(row[6]) or dt.datetime.min,
            closed_at=_time_out(row[7]),
            finished_at=_time_out(row[8]),
        )

    return Plan(steps(), write=False, transaction=False)


def batch_results(
    ctx: ops.Ctx,
    batch_id: uuid.UUID | str,
    cursor: str | None = None,
    *,
    limit: int = RESULTS_PAGE_DEFAULT,
) -> Plan[BatchPage]:
    """One page of a batch's members (not its callbacks), in id order, each
    with its status, result and errors; pass the page's `cursor` back for the
    next one (None: the first page). A callback reads its batch this way,
    page by page, however large it is. `InvalidArgument` for a bad cursor or
    limit (1..10,000); an unknown batch has no members (an empty page)."""
    bid = batch_id_of(batch_id)
    validate.count("limit", limit, high=RESULTS_PAGE_MAX)
    after: uuid.UUID | None = None
    if cursor is not None:
        try:
            after = uuid.UUID(str(cursor))
        except ValueError:
            raise InvalidArgument(
                f"cursor={cursor!r}: expected None or the cursor of a previous page"
            ) from None
    d = ctx.dialect
    s = for_dialect(d.name)

    def steps() -> Steps[BatchPage]:
        params = {
            "id": d.id(bid),
            "after": None if after is None else d.id(after),
            "limit": limit + 1,
        }
        rows = yield Stmt(s.BATCH_RESULTS_PAGE, params, fetch="all")
        jobs = [d.job(row) for row in rows[:limit]]
        more = len(rows) > limit
        return BatchPage(jobs, str(jobs[-1].id) if more else None)

    return Plan(steps(), write=False, transaction=False)


def batch_sweep(ctx: ops.Ctx, *, limit: int = SWEEP_LIMIT) -> Plan[int]:
    """The safety net: finish each closed batch (at most `limit`) that has
    no unfinished member and no callbacks enqueued, recounting its members
    under its lock first. The trigger finishes every batch as its last member
    finishes, so this finds nothing unless something went wrong (a count
    changed by hand). Returns how many batches it finished."""
    validate.count("limit", limit, high=validate.MAX_BATCH_SIZE)
    d = ctx.dialect
    s = for_dialect(d.name)

    def steps() -> Steps[int]:
        if d.bucket_count:  # a cluster has no batches (drivers.citus): nothing to read
            return 0
        stalled = yield Stmt(s.BATCH_STALLED, {"limit": limit}, fetch="all")
        yield COMMIT
        fired = 0
        for (batch_id,) in stalled:
            params = {"id": batch_id, "now": ctx.now()}
            locked = yield Stmt(s.BATCH_LOCK, params, fetch="one")
            if locked is not None:
                yield Stmt(s.BATCH_RECOUNT, params)
                fired += yield from _fire(ctx, params)
            yield COMMIT
        return fired

    return Plan(steps())


def batch_cleanup(
    ctx: ops.Ctx, older_than: ops.Retention, *, batch_size: int = ops.DEFAULT_CLEANUP_BATCH
) -> Plan[int]:
    """Delete finished batches whole: the batch, its members and its
    callbacks, once every one of those jobs is terminal and finished more
    than its status's `older_than` ago (as `cleanup` takes it; a status kept
    keeps its batches). `cleanup` leaves batches' jobs to this. Each batch
    goes in a transaction of its own; returns how many batches were deleted."""
    ages = retention_ages(older_than)
    validate.count("batch_size", batch_size, high=validate.MAX_BATCH_SIZE)
    d = ctx.dialect
    s = for_dialect(d.name)
    params: dict[str, Any] = {status.value: ages.get(status) for status in _RETAINED}
    params.update(now=ctx.now(), limit=batch_size)

    def steps() -> Steps[int]:
        if d.bucket_count:  # a cluster has no batches (drivers.citus): nothing to read
            return 0
        deleted = 0
        while True:
            expired = yield Stmt(s.BATCH_EXPIRED, params, fetch="all")
            yield COMMIT
            for (batch_id,) in expired:
                one = {**params, "id": batch_id}
                gone = yield Stmt(s.BATCH_DELETE, one, fetch="one")
                if gone is not None:
                    yield Stmt(s.BATCH_DELETE_JOBS, one)
                    yield Stmt(s.BATCH_DELETE_CALLBACKS, one)
                    deleted += 1
                yield COMMIT
            if len(expired) < batch_size:
                return deleted

    return Plan(steps())


_RETAINED: Final[Sequence[JobStatus]] = (JobStatus.COMPLETED, JobStatus.DEAD, JobStatus.CANCELLED)
