"""What the dashboard reads: operations written
once for both engines, bound to `Queue` and `AsyncQueue` like those of `ops`.

Every read is bounded and index-backed, so a page costs the same on a table
of ten million jobs as on an empty one; and the reads own no index of their
own that the queue's writes would pay for but the correlation index (which
holds given correlation ids only) and the due index (written once per
enqueue or retry):

- a page of jobs walks one index from a cursor (keyset pagination, never
  OFFSET): the primary key (newest first), the finish index (finished jobs
  of one status, the last finished first), the lease index (running jobs),
  the correlation index, or the claim index (the jobs waiting to run, in
  the order they will be claimed);
- counts stop at `COUNT_CAP` jobs per status (pending and retryable
  together: the claim index holds both); a status past it is counted in a
  sample of the table's pages (PostgreSQL's TABLESAMPLE) and shown as
  "about" (`Count.exact` is False); SQLite counts it exactly;
- the finished jobs per minute come from the finish-time index;
- the fleet (`queue.fleet`) is the `jobvisor_supervisors` table, one row per supervisor.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ..correlation import job_of_correlation, own_correlation_id
from . import validate
from .errors import InvalidArgument
from .model import UTC, JobStatus, LimitScope
from .ops import Ctx, limit_from_row
from .plan import Dialect, Plan, Steps, Stmt

COUNT_CAP: Final = 1_000  # jobs counted exactly per status before sampling
SAMPLE_ROWS: Final = 10_000  # about how many rows a sampled count reads
PAGE_DEFAULT: Final = 50
PAGE_MAX: Final = 500
THROUGHPUT_MINUTES: Final = 60
MINUTE_CAP: Final = 200  # finished jobs counted per minute and status before estimating
PREVIEW_CHARS: Final = 200  # the statements cut payloads and errors to this
_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND: Final = dt.timedelta(microseconds=1)
_FIRST_DUE: Final = (validate.MAX_INT32, uuid.UUID(int=0))  # before the first due job
_FAR_FUTURE: Final = dt.datetime(9999, 1, 1, tzinfo=UTC)  # after every finish and lease
_LAST_ID: Final = uuid.UUID(int=2**128 - 1)
_FIRST_SECOND: Final = (dt.datetime(1, 1, 1, tzinfo=UTC) - _EPOCH).total_seconds()
_LAST_SECOND: Final = (dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC) - _EPOCH).total_seconds()


class JobOrder(enum.StrEnum):
    NEWEST = "newest"  # newest first (ids are time-ordered); by finish or lease with a status
    DUE = "due"  # the jobs waiting to run, in claim order


@dataclasses.dataclass(frozen=True, slots=True)
class JobListing:
    """A job as a list shows it: its payload and last error cut to
    `PREVIEW_CHARS` characters (`payload_bytes` says how large it is)."""

    id: uuid.UUID
    queue: str
    job_type: str
    status: JobStatus
    priority: int
    attempts: int
    max_attempts: int
    run_at: dt.datetime
    created_at: dt.datetime
    finished_at: dt.datetime | None
    correlation_id: str | None
    payload_preview: str
    payload_bytes: int
    error_preview: str | None

    @property
    def payload_truncated(self) -> bool:
        return self.payload_bytes > len(self.payload_preview.encode())


@dataclasses.dataclass(frozen=True, slots=True)
class JobPage:
    """One page of jobs, the cursor of the next (None: this is the last),
    and the order it lists them in, in words."""

    jobs: tuple[JobListing, ...]
    next_cursor: str | None
    order: str = "newest first"


@dataclasses.dataclass(frozen=True, slots=True)
class Count:
    value: int
    exact: bool = True


@dataclasses.dataclass(frozen=True, slots=True)
class QueueState:
    """One queue on the overview: its jobs by status, whether it is paused,
    how long its oldest due job has waited (None: none is due), and its
    fleet-wide limits in one phrase ("" for none)."""

    name: str
    counts: Mapping[JobStatus, Count]
    paused: bool
    oldest_due_age: float | None
    limits: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class Minute:
    """Jobs finished in one minute (estimated past `MINUTE_CAP` when not `exact`)."""

    start: dt.datetime
    completed: int
    dead: int
    exact: bool = True


def _time(value: Any) -> dt.datetime:
    """A time read back: PostgreSQL gives datetimes, SQLite epoch seconds."""
    if isinstance(value, dt.datetime):
        return value
    return dt.datetime.fromtimestamp(value, UTC)


def _listing(d: Dialect, row: Sequence[Any]) -> JobListing:
    return JobListing(
        id=d.id_out(row[0]),
        queue=row[1],
        job_type=row[2],
        status=JobStatus(row[3]),
        priority=int(row[4]),
        attempts=int(row[5]),
        max_attempts=int(row[6]),
        run_at=_time(row[7]),
        created_at=_time(row[8]),
        finished_at=None if row[9] is None else _time(row[9]),
        correlation_id=row[10] or own_correlation_id(d.id_out(row[0])),
        payload_preview=row[11],
        payload_bytes=int(row[12]),
        error_preview=row[13],
    )


# --- pages of jobs --------------------------------------------------------------


def _optional_name(label: str, value: str | None) -> str | None:
    return None if value is None or value == "" else validate.name(label, value)


def _status(value: JobStatus | str | None) -> JobStatus | None:
    if value is None or value == "":
        return None
    try:
        return JobStatus(value)
    except ValueError:
        expected = ", ".join(s.value for s in JobStatus)
        raise InvalidArgument(f"status={value!r}: expected one of {expected}") from None


def _order(value: JobOrder | str | None) -> JobOrder | None:
    if value is None or value == "":
        return None
    try:
        return JobOrder(value)
    except ValueError:
        raise InvalidArgument(f"order={value!r}: expected newest or due") from None


def _before(d: Dialect, cursor: str | None) -> Any:
    """A newest-first cursor: the id of the last job shown."""
    if cursor is None or cursor == "":
        return None
    try:
        return d.id(uuid.UUID(cursor))
    except ValueError:
        raise InvalidArgument(f"cursor={cursor!r}: expected a job id") from None


def _exact(d: Dialect) -> bool:
    """Whether the engine keeps times as datetimes (PostgreSQL) rather than
    epoch seconds (SQLite)."""
    return d.name == "postgres"


def _stored_time(d: Dialect, raw: str) -> Any:
    """A time of a cursor, as the engine stores it (`_cursor_time`); a time
    outside the years 1 to 9999 raises ValueError or OverflowError."""
    if _exact(d):
        return _EPOCH + dt.timedelta(microseconds=int(raw))
    seconds = float(raw)
    if not _FIRST_SECOND <= seconds <= _LAST_SECOND:  # NaN too
        raise ValueError(raw)
    return seconds


def _cursor_time(when: Any) -> str:
    """A time for a cursor, exactly as the engine stores it (microseconds
    since the epoch, or SQLite's epoch seconds), in characters a URL keeps
    as they are."""
    return str((when - _EPOCH) // _MICROSECOND) if isinstance(when, dt.datetime) else repr(when)


def _due_cursor(d: Dialect, cursor: str | None) -> dict[str, Any]:
    """A claim-order cursor: `priority~run_at~id` of the last job shown."""
    if cursor is None or cursor == "":
        far_past = dt.datetime(1, 1, 2, tzinfo=UTC)
        return {"priority": _FIRST_DUE[0], "run_at": d.time(far_past), "after": d.id(_FIRST_DUE[1])}
    try:
        priority, raw, job_id = cursor.split("~")
        return {
            "priority": int(priority),
            "run_at": _stored_time(d, raw),
            "after": d.id(uuid.UUID(job_id)),
        }
    except (ValueError, OverflowError):
        raise InvalidArgument(f"cursor={cursor!r}: expected priority~run_at~id") from None


def _time_cursor(d: Dialect, cursor: str | None) -> dict[str, Any]:
    """A finish-order or lease-order cursor: `time~id` of the last job shown."""
    if cursor is None or cursor == "":
        return {"at": d.time(_FAR_FUTURE), "before": d.id(_LAST_ID)}
    try:
        raw, job_id = cursor.split("~")
        return {"at": _stored_time(d, raw), "before": d.id(uuid.UUID(job_id))}
    except (ValueError, OverflowError):
        raise InvalidArgument(f"cursor={cursor!r}: expected time~id") from None


class _Walk(enum.Enum):
    """How a page walks the table: which index, and its cursor."""

    NEWEST = "newest"  # the primary key backwards; cursor: the id
    CORRELATION = "correlation"  # the correlation index and the job itself; the id
    DUE = "due"  # the claim index; priority~run_at~id
    FINISHED = "finished"  # the finish index backwards; finished_at~id
    RUNNING = "running"  # the lease index backwards; lease_expires_at~id


_IN_WORDS: Final = {
    _Walk.NEWEST: "newest first",
    _Walk.CORRELATION: "newest first",
    _Walk.DUE: "in the order they will run",
    _Walk.FINISHED: "the last finished first",
    _Walk.RUNNING: "the last claimed or renewed first",
}

_FINISHED: Final = frozenset({JobStatus.COMPLETED, JobStatus.DEAD, JobStatus.CANCELLED})
_WAITING: Final = frozenset({JobStatus.PENDING, JobStatus.RETRYABLE})


def _walk(order: JobOrder | None, status: JobStatus | None, correlated: bool) -> _Walk:
    """The walk a page's filters and order ask for; a pair no index serves
    raises `InvalidArgument`."""
    if order is JobOrder.DUE:
        if correlated:
            raise InvalidArgument(
                "order=due with a correlation id: the jobs of a correlation id are"
                " listed newest first"
            )
        if status not in (None, *_WAITING):
            raise InvalidArgument(
                f"order=due with status={status.value if status else None!r}: expected"
                " pending, retryable or none (the jobs waiting to run)"
            )
        return _Walk.DUE
    if correlated:
        return _Walk.CORRELATION
    if status is None:
        return _Walk.NEWEST
    if status in _FINISHED:
        return _Walk.FINISHED
    if status is JobStatus.RUNNING:
        return _Walk.RUNNING
    if order is JobOrder.NEWEST:
        raise InvalidArgument(
            f"order=newest with status={status.value!r}: the jobs waiting to run are listed"
            " by run time (order=due, or no order)"
        )
    return _Walk.DUE


_STATEMENTS: Final = {
    _Walk.NEWEST: "JOB_PAGE_NEWEST",
    _Walk.CORRELATION: "JOB_PAGE_OF_CORRELATION",
    _Walk.DUE: "JOB_PAGE_DUE",
    _Walk.FINISHED: "JOB_PAGE_FINISHED",
    _Walk.RUNNING: "JOB_PAGE_RUNNING",
}


def _next_cursor(d: Dialect, walk: _Walk, last: Sequence[Any]) -> str:
    if walk is _Walk.DUE:
        return f"{last[4]}~{_cursor_time(last[7])}~{d.id_out(last[0])}"
    if walk is _Walk.FINISHED:
        return f"{_cursor_time(last[9])}~{d.id_out(last[0])}"
    if walk is _Walk.RUNNING:
        return f"{_cursor_time(last[14])}~{d.id_out(last[0])}"
    return str(d.id_out(last[0]))


def job_page(
    ctx: Ctx,
    *,
    status: JobStatus | str | None = None,
    queue: str | None = None,
    job_type: str | None = None,
    correlation_id: str | None = None,
    order: JobOrder | str | None = None,
    cursor: str | None = None,
    limit: int = PAGE_DEFAULT,
) -> Plan[JobPage]:
    """A page of at most `limit` jobs (up to `PAGE_MAX`) matching every
    filter given, after `cursor` (the page before's `next_cursor`; None for
    the first page). Each page walks an index, so the order follows the
    status:

    - `newest` (the default without a status, or with a correlation id):
      newest first; completed, dead or cancelled jobs: the last finished
      first; running jobs: the last claimed (or renewed) first;
    - `due` (the default for pending or retryable jobs, which have no
      newest-first order): the jobs waiting to run, pending or retryable,
      in the order they will be claimed.

    An empty string counts as no filter. A filter, order or cursor of the
    wrong form, or an order the status has not, raises `InvalidArgument`."""
    d = ctx.dialect
    wanted = _status(status)
    how = _order(order)
    validate.count("limit", limit, high=PAGE_MAX)
    correlation = None if not correlation_id else validate.key("correlation_id", correlation_id)
    walk = _walk(how, wanted, correlation is not None)
    params: dict[str, Any] = {
        "status": None if wanted is None else wanted.value,
        "queue": _optional_name("queue", queue),
        "job_type": _optional_name("job_type", job_type),
        "correlation_id": correlation,
        "limit": limit + 1,
    }
    if walk is _Walk.DUE:
        params.update(_due_cursor(d, cursor))
    elif walk in (_Walk.FINISHED, _Walk.RUNNING):
        params.update(_time_cursor(d, cursor))
    else:
        params["before"] = _before(d, cursor)
    if walk is _Walk.CORRELATION:
        own = job_of_correlation(correlation or "")
        params["own"] = None if own is None else d.id(own)
    sql = getattr(d.sql, _STATEMENTS[walk])

    def steps() -> Steps[JobPage]:
        rows = yield Stmt(sql, params, fetch="all")
        if walk is _Walk.DUE:  # the two parts of the claim order, merged
            rows = sorted(rows, key=lambda r: (-r[4], r[7], r[0]))
        elif walk is _Walk.CORRELATION:  # the job itself among those carrying its id
            rows = sorted(rows, key=lambda r: r[0], reverse=True)
        more = len(rows) > limit
        rows = rows[:limit]
        return JobPage(
            jobs=tuple(_listing(d, r) for r in rows),
            next_cursor=_next_cursor(d, walk, rows[-1]) if more else None,
            order=_IN_WORDS[walk],
        )

    return Plan(steps(), write=False, transaction=False)


# --- the overview -----------------------------------------------------------------


def _sample_percent(estimate: float) -> float:
    """The share of the table's pages a sampled count reads (100: all)."""
    if estimate <= 0:
        return 100.0
    return min(100.0, max(0.01, 100.0 * SAMPLE_ROWS / estimate))


def queue_states(ctx: Ctx, *, cap: int = COUNT_CAP) -> Plan[list[QueueState]]:
    """Every queue with a job, a pause or a limit, by name: its jobs by
    status (exact up to `cap` per status, "about" past it), paused or not,
    its oldest due job's age, and its limits."""
    d = ctx.dialect
    validate.count("cap", cap, high=validate.MAX_INT32 - 1)

    def steps() -> Steps[list[QueueState]]:
        counts: dict[tuple[str, JobStatus], Count] = {}
        over: list[JobStatus] = []
        for sql, params, statuses in _capped_counts(d, cap + 1):
            rows = yield Stmt(sql, params, fetch="all")
            past = sum(int(r[2]) for r in rows) > cap
            if past:
                over.extend(statuses)
            for queue, status, n in rows:
                counts[(queue, JobStatus(status))] = Count(int(n), exact=not past)
        if over:
            yield from _sampled(d, over, counts)
        paused = {r[0] for r in (yield Stmt(d.sql.QUEUE_PAUSED_LIST, fetch="all"))}
        limited = {
            lim.name: lim.describe()
            for lim in map(limit_from_row, (yield Stmt(d.sql.LIMIT_LIST, fetch="all")))
            if lim.scope is LimitScope.QUEUE
        }
        names = sorted({queue for queue, _ in counts} | paused | set(limited))
        ages: dict[str, float | None] = {}
        if names:
            params = {"queues": d.names(names), "now": ctx.now()}
            rows = yield Stmt(d.sql.JOB_OLDEST_DUE_OF_QUEUES, params, fetch="all")
            ages = {r[0]: None if r[1] is None else max(0.0, float(r[1])) for r in rows}
        return [
            QueueState(
                name=name,
                counts={s: counts.get((name, s), Count(0)) for s in JobStatus},
                paused=name in paused,
                oldest_due_age=ages.get(name),
                limits=limited.get(name, ""),
            )
            for name in names
        ]

    return Plan(steps(), write=False, transaction=False)


def _capped_counts(d: Dialect, cap: int) -> list[tuple[Any, dict[str, Any], tuple[JobStatus, ...]]]:
    """The capped counts' statements, each over the index its statuses
    have, with the statuses each counts."""
    waiting = (JobStatus.PENDING, JobStatus.RETRYABLE)
    return [
        (d.sql.JOB_COUNT_WAITING_CAPPED, {"cap": cap}, waiting),
        (d.sql.JOB_COUNT_RUNNING_CAPPED, {"cap": cap}, (JobStatus.RUNNING,)),
        *(
            (d.sql.JOB_COUNT_FINISHED_CAPPED, {"status": s.value, "cap": cap}, (s,))
            for s in (JobStatus.COMPLETED, JobStatus.DEAD, JobStatus.CANCELLED)
        ),
    ]


def _sampled(
    d: Dialect, over: Sequence[JobStatus], counts: dict[tuple[str, JobStatus], Count]
) -> Steps[None]:
    """Replace the counts of the statuses past the cap by a sample's, scaled
    up (never below the jobs already counted)."""
    (estimate,) = yield Stmt(d.sql.JOB_ROWS_ESTIMATE, {}, fetch="one")
    percent = _sample_percent(float(estimate))
    exact = percent >= 100.0
    params = {"statuses": d.names([s.value for s in over]), "percent": percent}
    rows = yield Stmt(d.sql.JOB_COUNT_SAMPLED, params, fetch="all")
    for key in [k for k in counts if k[1] in over]:
        counts[key] = Count(counts[key].value, exact=exact)
    for queue, status, n in rows:
        key = (queue, JobStatus(status))
        scaled = round(int(n) * 100.0 / percent)
        counts[key] = Count(max(scaled, counts.get(key, Count(0)).value), exact=exact)


def throughput(
    ctx: Ctx, *, minutes: int = THROUGHPUT_MINUTES, cap: int = MINUTE_CAP
) -> Plan[list[Minute]]:
    """Completed and dead jobs in each of the last `minutes` minutes, oldest
    first, the current minute last (minutes without any count zero). A
    minute with more than `cap` of either is estimated from the time its
    first `cap` took (`Minute.exact` False); SQLite counts exactly."""
    d = ctx.dialect
    validate.count("minutes", minutes, high=24 * 60)
    validate.count("cap", cap, high=validate.MAX_INT32)
    now = ctx.now()

    def steps() -> Steps[list[Minute]]:
        (clock,) = yield Stmt(d.sql.CLOCK_NOW, {"now": now}, fetch="one")
        last = int(_time(clock).timestamp() // 60)
        params = {"first": last - minutes + 1, "last": last, "cap": cap}
        rows = yield Stmt(d.sql.JOB_FINISHED_PER_MINUTE, params, fetch="all")
        found = {
            int(m): (_per_minute(int(m), nc, c_at, cap), _per_minute(int(m), nd, d_at, cap))
            for m, nc, c_at, nd, d_at in rows
        }
        none = (Count(0), Count(0))
        return [
            Minute(
                start=dt.datetime.fromtimestamp(m * 60, UTC),
                completed=found.get(m, none)[0].value,
                dead=found.get(m, none)[1].value,
                exact=found.get(m, none)[0].exact and found.get(m, none)[1].exact,
            )
            for m in range(last - minutes + 1, last + 1)
        ]

    return Plan(steps(), write=False, transaction=False)


def _per_minute(minute: int, counted: Any, last_at: Any, cap: int) -> Count:
    """A minute's count; past the cap, scaled from the seconds the first
    `cap` jobs took to the whole minute."""
    n = int(counted or 0)
    if last_at is None or n < cap:
        return Count(n)
    took = (_time(last_at) - dt.datetime.fromtimestamp(minute * 60, UTC)).total_seconds()
    return Count(max(n, round(n * 60.0 / max(took, 0.001))), exact=False)
