"""The engines: how a plan of statements meets a database.

An operation (see `ops`) is written once, as a generator that yields `Stmt`s
and receives their results. A runner drives that generator inside one
transaction: the PostgreSQL runners on a psycopg pool (sync or async), the
SQLite runner on one serialised `sqlite3` connection (its async face runs the
same plan in a thread). A `Dialect` converts values to and from each engine's
column types. So every operation exists once, and sync and async callers share
it; only these few drive loops know whether they await.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import json
import logging
import os
import random
import sqlite3
import threading
import time
import uuid
from collections.abc import (
    AsyncIterator,
    Callable,
    Generator,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from typing import Any, Final, Generic, Literal, LiteralString, Protocol, TypeAlias, TypeVar

import psycopg
from psycopg.types.json import JsonbLoader, JsonLoader
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from . import sql_postgres, sql_sqlite
from .errors import (
    DatabaseError,
    DatabaseRefused,
    DatabaseUnavailable,
    InvalidArgument,
    JobvisorError,
    SchemaMissing,
)
from .model import UTC, Job, JobStatus

T = TypeVar("T")

Fetch = Literal["rowcount", "all", "one", "copy", "commit", "begin"]
Query: TypeAlias = LiteralString | bytes


@dataclasses.dataclass(frozen=True, slots=True)
class Stmt:
    """One step of an operation: a statement and what to hand back from it.

    `rowcount` returns the affected row count, `all` the rows, `one` the first
    row or None, `copy` bulk-inserts `rows`, and `commit` makes what came
    before durable: it ends the transaction and starts another (in a plan
    without a transaction of its own, where each statement commits by itself,
    it has nothing left to do). `begin` opens a transaction in such a plan,
    for the statements up to the next `commit` (a plan that has one already,
    and SQLite, where every plan has one, go on in theirs).

    A `copy` with `types` (the columns' PostgreSQL types) goes in binary
    format; a `jsonb` column then takes JSON text as it is.

    `sql` is a `LiteralString`: a statement of the engine's SQL module, never
    one built at run time (values go in `params`; tests/queue/test_engine.py
    checks every statement handed to a `Stmt` is such a constant).
    """

    sql: LiteralString = ""
    params: dict[str, Any] | None = None
    fetch: Fetch = "rowcount"
    rows: Sequence[Sequence[Any]] = ()
    types: Sequence[str] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class Script:
    """A migration file's statements, run as they are (no parameters, no
    result). The one path for SQL that is not a literal: the files are the
    package's own data (see `ops.migration_files`)."""

    text: str


COMMIT = Stmt(fetch="commit")
BEGIN = Stmt(fetch="begin")


@dataclasses.dataclass(frozen=True, slots=True)
class Batch:
    """Statements whose parameters are all known before the first runs, sent
    together: the step's result is the list of their results, in order.

    On PostgreSQL they go in one pipeline, one round trip however many there
    are (a transaction begun in a batch and committed in it holds its locks
    for the server's work only, never for a round trip); elsewhere they run
    one by one. Every statement of a batch whose `now` is None gets the same
    reading of the clock, taken when the batch is sent."""

    stmts: tuple[Stmt, ...]


Step: TypeAlias = Stmt | Script | Batch
Steps = Generator[Step, Any, T]


@dataclasses.dataclass(slots=True)
class Plan(Generic[T]):
    """An operation ready to run: its steps, and the caller's own connection
    when the work belongs in the caller's transaction.

    `transaction=False` says the plan needs no transaction around its steps:
    it is one statement (atomic by itself), or statements whose effects stand
    alone, each read seeing what committed before it (as every statement does
    under READ COMMITTED anyway). PostgreSQL then runs each statement on its
    own, sparing the BEGIN and COMMIT round trips: the claim, the completion
    flush and the lease renewal are one round trip each. SQLite, where a
    transaction costs no round trip, always runs a plan in one.

    `planner=True` says the plan's statements want jobvisor's planner
    settings (`PG_PLANNER`: the claim). A PostgreSQL session has them from
    its start; behind PgBouncer's transaction pooling, where nothing set on
    a session may outlive a transaction, such a plan runs in a transaction
    that sets them with SET LOCAL."""

    steps: Steps[T]
    conn: Any = None
    write: bool = True
    transaction: bool = True
    planner: bool = False


class SqlSet(Protocol):
    """The statements each engine module defines, under the same names."""

    MIGRATION_LOCK: LiteralString
    MIGRATIONS_TABLE_CREATE: LiteralString
    MIGRATIONS_APPLIED: LiteralString
    MIGRATION_RECORD: LiteralString
    MIGRATIONS_TABLE_EXISTS: LiteralString
    CLOCK_SAMPLE: LiteralString
    CLOCK_NOW: LiteralString
    JOB_COLUMNS_COPY: LiteralString
    JOB_INSERT: LiteralString
    JOB_GET_LIVE_BY_DEDUPE_KEY: LiteralString
    JOB_INSERT_KEYED_MANY: LiteralString
    JOB_GET_LIVE_BY_DEDUPE_KEYS: LiteralString
    JOB_INSERT_UNIQUE: LiteralString
    JOB_INSERT_UNIQUE_REPLACE: LiteralString
    JOB_GET_BY_UNIQUE_KEY: LiteralString
    JOB_NOTIFY: LiteralString
    JOB_CLAIM: LiteralString
    JOB_CLAIM_AFTER: LiteralString
    JOB_CLAIM_ABOVE: LiteralString
    LIMIT_LOCK: LiteralString
    JOB_CLAIM_LIMITED: LiteralString
    LIMIT_TAKE_TOKENS: LiteralString
    KEY_BUCKET_TAKE: LiteralString
    KEY_BUCKET_PRUNE: LiteralString
    LIMIT_TABLE_LOCK: LiteralString
    LIMIT_SET: LiteralString
    LIMIT_CLEAR: LiteralString
    LIMIT_LIST: LiteralString
    JOB_RENEW_MANY: LiteralString
    JOB_COMPLETE_MANY: LiteralString
    JOB_FAIL: LiteralString
    JOB_SNOOZE: LiteralString
    JOB_RELEASE_MANY: LiteralString
    JOB_CANCEL_HELD: LiteralString
    JOB_REAP_EXPIRED: LiteralString
    JOB_REQUEUE_CRASHED: LiteralString
    JOB_DELETE_FINISHED: LiteralString
    JOB_COUNT_BY_QUEUE_STATUS: LiteralString
    JOB_OLDEST_DUE_AGE: LiteralString
    JOB_GET: LiteralString
    JOB_LIST_BY_STATUS: LiteralString
    JOB_COUNT_BY_STATUS: LiteralString
    JOB_REQUEUE_DEAD: LiteralString
    JOB_REQUEUE_DEAD_OF_TYPE: LiteralString
    JOB_DEAD_WITH_DEDUPE_KEY_OF_TYPE: LiteralString
    JOB_DELETE_DEAD: LiteralString
    JOB_DELETE_DEAD_OF_TYPE: LiteralString
    JOB_CANCEL: LiteralString
    JOB_CANCEL_MANY: LiteralString
    JOB_STATUS: LiteralString
    QUEUE_PAUSE_LOCK_TIMEOUT: LiteralString
    QUEUE_PAUSE_LOCK: LiteralString
    QUEUE_PAUSE: LiteralString
    QUEUE_RESUME: LiteralString
    QUEUE_PAUSED_LIST: LiteralString
    JOB_WAIT_MARK: LiteralString
    LEADER_ATTEMPT_ELECT: LiteralString
    LEADER_RESIGN: LiteralString
    SCHEDULE_UPSERT: LiteralString
    SCHEDULE_DISABLE_UNDECLARED: LiteralString
    SCHEDULE_LIST: LiteralString
    SCHEDULE_GET: LiteralString
    SCHEDULE_ENABLED: LiteralString
    SCHEDULE_ADVANCE: LiteralString
    DB_OLDEST_XMIN: LiteralString
    JOB_PAGE_NEWEST: LiteralString
    JOB_PAGE_FINISHED: LiteralString
    JOB_PAGE_RUNNING: LiteralString
    JOB_PAGE_OF_CORRELATION: LiteralString
    JOB_PAGE_DUE: LiteralString
    JOB_COUNT_WAITING_CAPPED: LiteralString
    JOB_COUNT_RUNNING_CAPPED: LiteralString
    JOB_COUNT_FINISHED_CAPPED: LiteralString
    JOB_COUNT_SAMPLED: LiteralString
    JOB_ROWS_ESTIMATE: LiteralString
    JOB_OLDEST_DUE_OF_QUEUES: LiteralString
    JOB_FINISHED_PER_MINUTE: LiteralString
    SUPERVISOR_HEARTBEAT: LiteralString
    SUPERVISOR_LIST: LiteralString
    SUPERVISOR_DELETE: LiteralString
    SUPERVISOR_PRUNE: LiteralString
    JOB_RUNNING_BY_WORKER: LiteralString


_STATUS = {status.value: status for status in JobStatus}


class Dialect(Protocol):
    """How one engine takes and gives back values: its statements (`sql`),
    whether it has notifications, and the conversions between Python values
    and its column types. `PostgresDialect` and `SqliteDialect` implement it."""

    name: str
    sql: SqlSet
    notifies: bool
    copy_types: tuple[str, ...]
    """The column types of JOB_COLUMNS_COPY for a binary COPY (empty: the
    engine's bulk insert needs none)."""
    clock_slack: float
    """Seconds a claim looks ahead of its own reading of the clock: how far
    two processes' readings of the database's clock may disagree (`CLOCK_SLACK`
    on PostgreSQL; none on SQLite, whose clock is the host's own)."""
    bounded_claim: bool
    """Whether claims start past the last job claimed (JOB_CLAIM_AFTER, see
    `ops.ClaimBounds`): on PostgreSQL, whose claim index keeps the entries of
    claimed jobs until vacuum may remove them; not on SQLite, which updates
    its index in place."""

    def id(self, value: uuid.UUID) -> Any: ...

    def time(self, value: dt.datetime | None) -> Any: ...

    def names(self, values: Sequence[str] | None) -> Any: ...

    def held(self, jobs: Sequence[Job]) -> dict[str, Any]:
        """The ids and claim tokens of held jobs, as the guarded statements take them."""
        ...

    def token(self, job: Job) -> Any: ...

    def claim_token(self, value: uuid.UUID) -> Any:
        """A new claim token as the claim statement takes it."""
        ...

    def results(self, jobs: Sequence[Job], results: Mapping[uuid.UUID, str] | None) -> Any:
        """These jobs' entries of a JSON-text-by-id map, as a batch statement
        takes them (a completion's results, a renewal's progress)."""
        ...

    def policies(self, rows: Sequence[tuple[str | None, float, float, float]]) -> dict[str, Any]:
        """(job_type or None for the default, base, cap, jitter) rows for the reaper."""
        ...

    def keyed_rows(self, rows: Sequence[Sequence[Any]]) -> dict[str, Any]:
        """Bulk rows (`queue.bulk`'s, times set) as JOB_INSERT_KEYED_MANY takes them."""
        ...

    def id_out(self, value: Any) -> uuid.UUID: ...

    def meta(self, value: dict[str, Any] | None) -> str | None: ...

    def add_seconds(self, when: Any, seconds: float) -> Any: ...

    def job(self, row: Sequence[Any]) -> Job: ...


def _meta_json(value: dict[str, Any] | None) -> str | None:
    """A job's `meta` as JSON text (both engines take text for it), or None."""
    return None if value is None else json.dumps(value, separators=(",", ":"))


# Each process reckons the database's time from its own reading of the server's
# clock (`DatabaseClock`): two readings may disagree by about half a round trip
# each, and a job one process enqueued "now" could look a few milliseconds
# ahead to another that claims right after. A PostgreSQL claim therefore takes
# jobs due up to this much ahead of its reading: a job never waits for the
# next poll for want of a millisecond, and none starts more than this early.
CLOCK_SLACK: Final = 0.05


class PostgresDialect:
    """PostgreSQL takes Python values as they are; lists are arrays."""

    name = "postgres"
    sql: SqlSet = sql_postgres
    notifies = True
    clock_slack = CLOCK_SLACK
    bounded_claim = True
    copy_types: tuple[str, ...] = (
        *("uuid", "text", "text", "jsonb", "int4", "timestamptz", "int4"),
        *("text", "text", "timestamptz", "jsonb", "text"),
    )

    def id(self, value: uuid.UUID) -> Any:
        return value

    def time(self, value: dt.datetime | None) -> Any:
        return value

    def names(self, values: Sequence[str] | None) -> Any:
        return list(values) if values else None

    def held(self, jobs: Sequence[Job]) -> dict[str, Any]:
        return {"ids": [j.id for j in jobs], "tokens": [j.claim_token for j in jobs]}

    def token(self, job: Job) -> Any:
        return job.claim_token

    def claim_token(self, value: uuid.UUID) -> Any:
        return value

    def results(self, jobs: Sequence[Job], results: Mapping[uuid.UUID, str] | None) -> Any:
        return [results.get(j.id) for j in jobs] if results else None

    def keyed_rows(self, rows: Sequence[Sequence[Any]]) -> dict[str, Any]:
        names: tuple[str, ...] = ("ids", "queues", "job_types", "payloads", "priorities")
        names += ("run_ats", "max_attempts", "dedupe_keys", "correlation_ids", "created", "metas")
        names += ("concurrency_keys",)
        columns = {name: [row[i] for row in rows] for i, name in enumerate(names)}
        del columns["created"]  # the statement's own `now`
        return columns

    def policies(self, rows: Sequence[tuple[str | None, float, float, float]]) -> dict[str, Any]:
        return {
            "policy_types": [r[0] for r in rows],
            "policy_bases": [r[1] for r in rows],
            "policy_caps": [r[2] for r in rows],
            "policy_jitters": [r[3] for r in rows],
        }

    def id_out(self, value: Any) -> uuid.UUID:
        return value  # type: ignore[no-any-return]

    def meta(self, value: dict[str, Any] | None) -> str | None:
        return _meta_json(value)

    def add_seconds(self, when: Any, seconds: float) -> Any:
        return when + dt.timedelta(seconds=seconds)

    def job(self, row: Sequence[Any]) -> Job:
        # Positional, in Job's field order (the order every job query selects),
        # and the status by dict: keyword arguments and the enum's lookup were
        # most of a claim's client-side time (bench/queue_throughput.py).
        return Job(
            row[0],
            row[1],
            row[2],
            row[3],
            row[4],
            row[5],
            _STATUS[row[6]],
            row[7],
            row[8],
            row[9],
            row[10] or row[0].hex,  # NULL: the job's own id (correlation.own_correlation_id)
            row[11],
            row[12],
            row[13],
            row[14],
            row[15],
            row[16],
            row[17],
            row[18],
            *(_left_behind(row, _from_iso) if len(row) > _CLAIM_COLUMNS else ()),
        )


# A claim reads the first 19 columns; `get` and the dead-job reads add what a
# job left behind (result, progress and errors) and its unique key.
_CLAIM_COLUMNS: Final = 19


def _from_iso(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value)


def _left_behind(row: Sequence[Any], at: Callable[[Any], dt.datetime]) -> tuple[Any, ...]:
    """(result, progress, errors, unique_key) from the columns after the
    claim's, decoded; `at` turns an error entry's time into a datetime."""
    errors = row[21] or ()
    return (
        row[19],
        row[20],
        tuple({**entry, "at": at(entry["at"])} for entry in errors),
        row[22],
    )


def _epoch(value: dt.datetime | None) -> float | None:
    return None if value is None else value.timestamp()


def _from_epoch(value: float | None) -> dt.datetime | None:
    return None if value is None else dt.datetime.fromtimestamp(value, UTC)


class SqliteDialect:
    """SQLite stores ids as text, claim tokens as 32 hex digits, times as Unix
    epoch seconds, payloads and meta as JSON text, and receives lists as JSON."""

    name = "sqlite"
    sql: SqlSet = sql_sqlite
    notifies = False
    clock_slack = 0.0
    bounded_claim = False
    copy_types: tuple[str, ...] = ()

    def id(self, value: uuid.UUID) -> Any:
        return str(value)

    def time(self, value: dt.datetime | None) -> Any:
        return _epoch(value)

    def names(self, values: Sequence[str] | None) -> Any:
        return json.dumps(list(values)) if values else None

    def held(self, jobs: Sequence[Job]) -> dict[str, Any]:
        pairs = [[str(j.id), j.claim_token.hex if j.claim_token else None] for j in jobs]
        return {"pairs": json.dumps(pairs)}

    def token(self, job: Job) -> Any:
        return job.claim_token.hex if job.claim_token else None

    def claim_token(self, value: uuid.UUID) -> Any:
        return value.hex

    def results(self, jobs: Sequence[Job], results: Mapping[uuid.UUID, str] | None) -> Any:
        if not results:
            return None
        return json.dumps({str(j.id): results[j.id] for j in jobs if j.id in results})

    def policies(self, rows: Sequence[tuple[str | None, float, float, float]]) -> dict[str, Any]:
        return {"policies": json.dumps([list(r) for r in rows])}

    def keyed_rows(self, rows: Sequence[Sequence[Any]]) -> dict[str, Any]:
        return {"rows": json.dumps([[*row[:9], *row[10:]] for row in rows])}

    def id_out(self, value: Any) -> uuid.UUID:
        return uuid.UUID(value)

    def meta(self, value: dict[str, Any] | None) -> str | None:
        return _meta_json(value)

    def add_seconds(self, when: Any, seconds: float) -> Any:
        return when + seconds

    def job(self, row: Sequence[Any]) -> Job:
        job_id = uuid.UUID(row[0])
        return Job(
            job_id,
            row[1],
            row[2],
            json.loads(row[3]),
            row[4],
            dt.datetime.fromtimestamp(row[5], UTC),
            _STATUS[row[6]],
            row[7],
            row[8],
            row[9],
            row[10] or job_id.hex,  # NULL: the job's own id
            row[11],
            _from_epoch(row[12]),
            uuid.UUID(hex=row[13]) if row[13] else None,
            row[14],
            dt.datetime.fromtimestamp(row[15], UTC),
            _from_epoch(row[16]),
            _from_epoch(row[17]),
            json.loads(row[18]) if row[18] is not None else None,
            *(
                _left_behind(
                    [*row[:19], *(_json(v) for v in row[19:22]), *row[22:]], _from_epoch_at
                )
                if len(row) > _CLAIM_COLUMNS
                else ()
            ),
        )


def _json(value: str | None) -> Any:
    return None if value is None else json.loads(value)


def _from_epoch_at(value: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(value, UTC)


POSTGRES: Dialect = PostgresDialect()
SQLITE: Dialect = SqliteDialect()


def drive(steps: Steps[T], execute: Callable[[Step], Any]) -> T:
    """Run an operation's steps to the end through `execute`."""
    result: Any = None
    try:
        while True:
            result = execute(steps.send(result))
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


class SyncRunner(Protocol):
    dialect: Dialect

    def run(self, plan: Plan[T]) -> T: ...

    def transaction(self) -> contextlib.AbstractContextManager[Any]: ...

    def close(self) -> None: ...


class AsyncRunner(Protocol):
    dialect: Dialect
    target: str

    async def run(self, plan: Plan[T]) -> T: ...

    def transaction(self) -> contextlib.AbstractAsyncContextManager[Any]: ...

    async def close(self) -> None: ...


# --- driver errors ------------------------------------------------------------


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or "(no message)"


def driver_text(exc: BaseException) -> str:
    """The driver's class and text, as the wrapped error's message ends."""
    return f"{type(exc).__module__}.{type(exc).__qualname__}: {_one_line(exc)}"


# What the server says, at connection time, when a retry cannot pass: a wrong
# password or an unknown role or database. libpq gives these no SQLSTATE
# before the session exists, only the server's FATAL message.
_REFUSALS = (
    "authentication failed",  # password, peer, ident, scram…
    "no password supplied",
    "no pg_hba.conf entry",
    "does not exist",  # the role or the database
)


def refused_by_server(exc: BaseException) -> bool:
    """Whether a failed connection attempt will fail the same way again."""
    text = str(exc).lower()
    return isinstance(exc, psycopg.ProgrammingError) or any(r in text for r in _REFUSALS)


def wrap_postgres(exc: psycopg.Error) -> JobvisorError:
    """The jobvisor error for a psycopg (or psycopg_pool) exception."""
    if isinstance(exc, psycopg.errors.UndefinedTable | psycopg.errors.UndefinedColumn):
        return SchemaMissing(
            f"the database has no jobvisor schema or an older one; run `jobvisor migrate` "
            f"({driver_text(exc)})"
        )
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return DatabaseUnavailable(f"database unavailable ({driver_text(exc)})")
    return DatabaseError(f"database error ({driver_text(exc)})")


def wrap_sqlite(exc: sqlite3.Error) -> JobvisorError:
    """The jobvisor error for a sqlite3 exception."""
    text = str(exc)
    if text.startswith(("no such table: jobvisor_", "no such column")):
        return SchemaMissing(
            f"the database has no jobvisor schema or an older one; run `jobvisor migrate` "
            f"({driver_text(exc)})"
        )
    if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
        # Not an outage: the file answers, it cannot grow. A retry passes
        # once space returns (`faults.classify` says MAY_PASS).
        return DatabaseError(
            f"database full: the SQLite file cannot grow (no space left on its file "
            f"system, or max_page_count reached); the statement was not applied "
            f"({driver_text(exc)})"
        )
    if isinstance(exc, sqlite3.OperationalError):
        return DatabaseUnavailable(f"database unavailable ({driver_text(exc)})")
    return DatabaseError(f"database error ({driver_text(exc)})")


class _Connecting:
    """What the pool's connection attempts have said, until one succeeded.

    Until the first connection, a caller does not wait the pool's timeout
    for a database that is not there: the first attempt's error is raised at
    once (`DatabaseRefused` when the server refused us, which no retry
    fixes; `DatabaseUnavailable` otherwise). Once connected, calls wait for
    the pool as usual, riding out a restart of the server."""

    def __init__(self) -> None:
        self.connected = False
        self.error: BaseException | None = None
        self.attempted = threading.Event()

    @contextlib.contextmanager
    def attempt(self) -> Iterator[None]:
        """Around one connection attempt of the pool: records its outcome."""
        try:
            yield
        except Exception as exc:
            self.error = exc
            self.attempted.set()
            raise
        self.connected, self.error = True, None
        self.attempted.set()

    def raise_if_failed(self) -> None:
        """Raise the wrapped error of a failed attempt when none ever succeeded."""
        exc = self.error
        if self.connected or exc is None:
            return
        if refused_by_server(exc):
            raise DatabaseRefused(
                f"the server refused the connection ({driver_text(exc)})"
            ) from exc
        raise DatabaseUnavailable(f"could not connect ({driver_text(exc)})") from exc

    def unavailable(self, exc: PoolTimeout) -> JobvisorError:
        """The error for a pool timeout: the last failed attempt says why."""
        last = self.error
        if last is None:
            return wrap_postgres(exc)
        return DatabaseUnavailable(f"no connection within the pool's timeout ({driver_text(last)})")


def _recording(base: type[Any], connecting: _Connecting) -> Any:
    """`base` (a psycopg connection class) whose `connect` reports to `connecting`."""
    connect_base = base.connect.__func__

    if issubclass(base, psycopg.AsyncConnection):

        async def connect_async(cls: Any, *args: Any, **kwargs: Any) -> Any:
            with connecting.attempt():
                return await connect_base(cls, *args, **kwargs)

        return type(base.__name__, (base,), {"connect": classmethod(connect_async)})

    def connect(cls: Any, *args: Any, **kwargs: Any) -> Any:
        with connecting.attempt():
            return connect_base(cls, *args, **kwargs)

    return type(base.__name__, (base,), {"connect": classmethod(connect)})


def check_conninfo(url: str) -> None:
    """Refuse a PostgreSQL URL libpq cannot parse (an unknown option, a bad
    port) before any connection is tried."""
    try:
        psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        raise InvalidArgument(f"database URL: {_one_line(exc)}") from exc


# --- the time of a statement ----------------------------------------------------

# How long one reading of the database's clock is carried forward before the
# next: long enough that reading costs nothing, short enough that a server
# whose clock was stepped is followed within the minute.
CLOCK_REFRESH: Final = 60.0


class DatabaseClock:
    """The database server's time as this process reckons it, for the `now`
    parameter every statement takes (no statement that changes a row calls
    `now()`, see the SQL modules).

    It is read from the server (`CLOCK_SAMPLE`, taken to be midway through
    the round trip), when a pool opens a connection and whenever the last
    reading is older than `CLOCK_REFRESH`, and carried forward by this
    process's monotonic clock in between: times still come from the
    database's clock, to within half a round trip, and a step of this host's
    wall clock changes nothing."""

    def __init__(self) -> None:
        self._reading: tuple[dt.datetime, float] | None = None

    def due(self) -> bool:
        """Whether the server's clock should be read before the next statement."""
        reading = self._reading
        return reading is None or time.monotonic() - reading[1] > CLOCK_REFRESH

    def set(self, server: dt.datetime, before: float, after: float) -> None:
        """Record a reading: `server`'s time, read between these two
        monotonic instants."""
        self._reading = (server, (before + after) / 2)

    def read(self, cur: Any) -> None:
        """Read the server's clock on a psycopg cursor or connection."""
        before = time.monotonic()
        (server,) = cur.execute(sql_postgres.CLOCK_SAMPLE).fetchone()
        self.set(server, before, time.monotonic())

    async def read_async(self, cur: Any) -> None:
        """`read` on an async cursor or connection."""
        before = time.monotonic()
        (server,) = await (await cur.execute(sql_postgres.CLOCK_SAMPLE)).fetchone()
        self.set(server, before, time.monotonic())

    def now(self) -> dt.datetime:
        reading = self._reading
        if reading is None:
            raise RuntimeError("the database's clock was never read")
        server, at = reading
        return server + dt.timedelta(seconds=time.monotonic() - at)


def _local_time() -> float:
    """SQLite's own clock is this host's: Unix epoch seconds."""
    return time.time()


def with_time(params: dict[str, Any] | None, now: Callable[[], Any]) -> dict[str, Any] | None:
    """The parameters of a statement, its `now` filled in when the plan left
    it None (no injected clock): the engine's time at this very statement."""
    if params is None or params.get("now", False) is not None:
        return params
    return {**params, "now": now()}


# --- PostgreSQL ---------------------------------------------------------------

# The pool logs each failed connection attempt; the runners raise what it
# says (`_Connecting`). Where the program configured no logging (the command
# line), this keeps those attempts from reaching stderr through logging's
# last-resort handler on top of the one error line; where it did (the worker,
# the supervisor), they are logged as before.
logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())


@dataclasses.dataclass(frozen=True, slots=True)
class _PgStep:
    """What one step asks of a PostgreSQL cursor, for either face to carry out:
    `commit` first, then `begin` again, then run `query` (as a COPY when
    `copy`), then read back `fetch`."""

    commit: bool = False
    begin: Query | None = None
    query: Query | None = None
    params: dict[str, Any] | None = None
    copy: Sequence[Sequence[Any]] | None = None
    types: Sequence[str] = ()
    fetch: Fetch | None = None


def _pg_step(
    step: Stmt | Script, *, opening: LiteralString | None, clock: DatabaseClock
) -> _PgStep:
    """The one dispatch of a step on PostgreSQL. `opening`: the plan runs in
    a transaction of our own on an autocommit connection, begun with that
    statement, so a `commit` step opens the next one with it (behind
    PgBouncer the planner settings are set again, see `PgSession`). A `now`
    left None is the database's time (`clock`)."""
    if isinstance(step, Script):
        # Migration scripts are package data, not literals: passed as bytes,
        # psycopg runs them as they are (several statements, no parameters).
        return _PgStep(query=step.text.encode())
    fetch = step.fetch
    if fetch == "commit":
        return _PgStep(commit=True, begin=opening)
    if fetch == "begin":
        return _PgStep(begin=None if opening else "BEGIN")
    if fetch == "copy":
        return _PgStep(query=step.sql, copy=step.rows, types=step.types)
    return _PgStep(query=step.sql, params=with_time(step.params, clock.now), fetch=fetch)


class _JsonTextBinaryDumper(psycopg.adapt.Dumper):
    """JSON text, already encoded and checked, in jsonb's binary form: a
    version byte, then the text (the stock jsonb dumper would encode it again)."""

    oid = psycopg.adapters.types["jsonb"].oid
    format = psycopg.pq.Format.BINARY

    def dump(self, obj: Any) -> bytes:
        text: str = obj
        return b"\x01" + text.encode()


def _copy_types(cur: Any, copy: Any, types: Sequence[str]) -> None:
    """Make a COPY binary with these column types; jsonb columns take text.
    (The dumper is the cursor's own: a plan's cursor lives for one plan.)"""
    if types:
        cur.adapters.register_dumper(None, _JsonTextBinaryDumper)
        copy.set_types(types)


def _at_one_time(batch: Batch, now: Any) -> list[Stmt]:
    """A batch's statements, each `now` left None set to `now`."""
    return [dataclasses.replace(st, params=with_time(st.params, lambda: now)) for st in batch.stmts]


def _pipelined(stmts: Sequence[Stmt]) -> bool:
    """Whether a batch can go in a pipeline: statements with parameters, and
    plain BEGIN and COMMIT (a batch in a plan's own transaction, or behind
    PgBouncer, runs one by one)."""
    return all(st.fetch in ("all", "one", "rowcount", "begin", "commit") for st in stmts)


def _pipeline_query(st: Stmt) -> Query:
    if st.fetch == "begin":
        return "BEGIN"
    if st.fetch == "commit":
        return "COMMIT"
    return st.sql


def _pipeline_result(st: Stmt, cur: Any) -> Any:
    if st.fetch == "all":
        return cur.fetchall()
    if st.fetch == "one":
        return cur.fetchone()
    if st.fetch == "rowcount":
        return cur.rowcount
    return None


def _pg_batch(
    cur: Any, batch: Batch, *, clock: DatabaseClock, opening: LiteralString | None, pipeline: bool
) -> list[Any]:
    stmts = _at_one_time(batch, clock.now())
    if not (pipeline and opening is None and _pipelined(stmts)):
        return [_pg_execute(cur, st, clock=clock, opening=opening) for st in stmts]
    conn = cur.connection
    cursors = [conn.cursor() for _ in stmts]
    try:
        with conn.pipeline():
            for st, c in zip(stmts, cursors, strict=True):
                c.execute(_pipeline_query(st), st.params)
        return [_pipeline_result(st, c) for st, c in zip(stmts, cursors, strict=True)]
    finally:
        for c in cursors:
            c.close()


async def _pg_batch_async(
    cur: Any, batch: Batch, *, clock: DatabaseClock, opening: LiteralString | None
) -> list[Any]:
    stmts = _at_one_time(batch, clock.now())
    if not (opening is None and _pipelined(stmts)):
        return [await _pg_execute_async(cur, st, clock=clock, opening=opening) for st in stmts]
    conn = cur.connection
    cursors = [conn.cursor() for _ in stmts]
    try:
        async with conn.pipeline():
            for st, c in zip(stmts, cursors, strict=True):
                await c.execute(_pipeline_query(st), st.params)
        results = []
        for st, c in zip(stmts, cursors, strict=True):
            if st.fetch == "all":
                results.append(await c.fetchall())
            elif st.fetch == "one":
                results.append(await c.fetchone())
            else:
                results.append(_pipeline_result(st, c))
        return results
    finally:
        for c in cursors:
            await c.close()


def _pg_execute(
    cur: Any,
    step: Step,
    *,
    clock: DatabaseClock,
    opening: LiteralString | None = None,
    pipeline: bool = False,
) -> Any:
    """Run one step on `cur`. `pipeline`: the cursor's connection is the
    runner's own, in autocommit, where a batch may go in a pipeline."""
    if isinstance(step, Batch):
        return _pg_batch(cur, step, clock=clock, opening=opening, pipeline=pipeline)
    s = _pg_step(step, opening=opening, clock=clock)
    if s.commit:
        cur.connection.commit()
    if s.begin is not None:
        cur.execute(s.begin)
    if s.query is None:
        return None
    if s.copy is not None:
        with cur.copy(s.query) as copy:
            _copy_types(cur, copy, s.types)
            for row in s.copy:
                copy.write_row(row)
        return None
    cur.execute(s.query, s.params)
    if s.fetch == "all":
        return cur.fetchall()
    if s.fetch == "one":
        return cur.fetchone()
    return cur.rowcount


async def _pg_execute_async(
    cur: Any,
    step: Step,
    *,
    clock: DatabaseClock,
    opening: LiteralString | None = None,
    pipeline: bool = False,
) -> Any:
    if isinstance(step, Batch):
        if not pipeline:
            stmts = _at_one_time(step, clock.now())
            return [await _pg_execute_async(cur, st, clock=clock, opening=opening) for st in stmts]
        return await _pg_batch_async(cur, step, clock=clock, opening=opening)
    s = _pg_step(step, opening=opening, clock=clock)
    if s.commit:
        await cur.connection.commit()
    if s.begin is not None:
        await cur.execute(s.begin)
    if s.query is None:
        return None
    if s.copy is not None:
        async with cur.copy(s.query) as copy:
            _copy_types(cur, copy, s.types)
            for row in s.copy:
                await copy.write_row(row)
        return None
    await cur.execute(s.query, s.params)
    if s.fetch == "all":
        return await cur.fetchall()
    if s.fetch == "one":
        return await cur.fetchone()
    return cur.rowcount


# The claim walks the claim index in order and stops at `limit` rows. On a
# table whose statistics are cold (a fresh database right after a bulk
# enqueue) the planner prefers a bitmap scan and a sort of every due row
# instead: 50 ms a claim instead of 1, and psycopg's prepared statements keep
# that plan. The claim's order is the claim index's own, so sorts are priced
# out (a statement with no other way, such as the dead-job list, still sorts);
# and 1.1 is the usual random_page_cost for SSD storage. Both apply only to
# jobvisor's own connections (bench/queue_throughput.py --cold-statistics:
# 2,800 -> 10,700 jobs/s, and the prepared plans keep pickup latency low).
# The JIT is off too: on a big table the claim's estimate (a walk of the whole
# index, its filter on paused queues and limits judged to keep one row) passes
# jit_above_cost, and compiling it took 250 ms where running it takes 2 ms
# (10 million pending jobs, bench/backlog.py). No statement of the queue runs
# long enough for the JIT to pay.
PG_SESSION_SETUP: Final[LiteralString] = (
    "SET random_page_cost = 1.1; SET enable_sort = off; SET jit = off"
)

# For a queue opened with `synchronous_commit=False` (the worker's own): its
# commits do not wait for the WAL flush. See `connect`.
PG_ASYNC_COMMIT: Final[LiteralString] = "SET synchronous_commit = off"

# Behind PgBouncer in transaction pooling, the next transaction may run on
# another client's server connection: the planner settings are set for the
# transaction of a `Plan.planner` plan only, in the round trip of its BEGIN.
PG_BEGIN_PLANNER: Final[LiteralString] = (
    "BEGIN; SET LOCAL random_page_cost = 1.1; SET LOCAL enable_sort = off; SET LOCAL jit = off"
)
PG_BEGIN_PLANNER_ASYNC_COMMIT: Final[LiteralString] = (
    PG_BEGIN_PLANNER + "; SET LOCAL synchronous_commit = off"
)

# The pools' connections are in autocommit mode: a plan that wants a
# transaction opens one with BEGIN (and the pool's context commits it, or rolls
# it back on an error); a plan without one runs each statement on its own.
PG_POOL_KWARGS: dict[str, Any] = {"autocommit": True}

# Behind PgBouncer (before 1.21, or without max_prepared_statements) a
# server-side prepared statement may be looked up on a server connection that
# never prepared it: psycopg prepares none.
PG_BOUNCER_KWARGS: dict[str, Any] = {**PG_POOL_KWARGS, "prepare_threshold": None}


@dataclasses.dataclass(frozen=True, slots=True)
class PgSession:
    """How a runner's connections are set up: `setup`, run once per new
    connection (None: nothing outlives a transaction), the connection
    arguments, and how a `Plan.planner` plan begins (None: as any other)."""

    setup: LiteralString | None
    kwargs: dict[str, Any]
    begin_planner: LiteralString | None

    @classmethod
    def build(cls, *, synchronous_commit: bool, pgbouncer: bool) -> PgSession:
        if pgbouncer:
            begin = PG_BEGIN_PLANNER if synchronous_commit else PG_BEGIN_PLANNER_ASYNC_COMMIT
            return cls(None, PG_BOUNCER_KWARGS, begin)
        setup = PG_SESSION_SETUP
        if not synchronous_commit:
            setup += "; " + PG_ASYNC_COMMIT
        return cls(setup, PG_POOL_KWARGS, None)

    def opening(self, plan: Plan[Any]) -> LiteralString | None:
        """The statement a plan's transaction begins with; None: it runs
        each statement on its own."""
        if plan.planner and self.begin_planner is not None:
            return self.begin_planner
        return "BEGIN" if plan.transaction else None


class PostgresRunner:
    """Runs plans on a psycopg `ConnectionPool`, one transaction per plan."""

    dialect: Dialect = POSTGRES

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 4,
        synchronous_commit: bool = True,
        pgbouncer: bool = False,
    ) -> None:
        self.target = url
        self.connecting = _Connecting()
        self.clock = clock = DatabaseClock()
        self.session = session = PgSession.build(
            synchronous_commit=synchronous_commit, pgbouncer=pgbouncer
        )

        def configure(conn: psycopg.Connection[Any]) -> None:
            if session.setup is not None:
                conn.execute(session.setup)
            clock.read(conn)  # a new connection may be to a new server
            conn.commit()

        self.pool = ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            open=False,
            name="jobvisor",
            configure=configure,
            kwargs=session.kwargs,
            connection_class=_recording(psycopg.Connection, self.connecting),
        )
        self.pool.open(wait=False)

    def _first_connection(self) -> None:
        if not self.connecting.connected:
            self.connecting.attempted.wait(self.pool.timeout)
            self.connecting.raise_if_failed()

    def run(self, plan: Plan[T]) -> T:
        try:
            clock = self.clock
            if plan.conn is not None:
                with plan.conn.cursor() as cur:
                    if clock.due():
                        clock.read(cur)
                    return drive(plan.steps, lambda s: _pg_execute(cur, s, clock=clock))
            self._first_connection()
            opening = self.session.opening(plan)
            with self.pool.connection() as conn, conn.cursor() as cur:
                if clock.due():
                    clock.read(cur)
                if opening is not None:
                    cur.execute(opening)
                return drive(
                    plan.steps,
                    lambda s: _pg_execute(cur, s, clock=clock, opening=opening, pipeline=True),
                )
        except PoolTimeout as exc:
            raise self.connecting.unavailable(exc) from exc
        except psycopg.Error as exc:
            raise wrap_postgres(exc) from exc

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Any]:
        try:
            self._first_connection()
            with self.pool.connection() as conn:
                conn.execute("BEGIN")
                yield conn  # the pool's context commits, or rolls back on an error
        except PoolTimeout as exc:
            raise self.connecting.unavailable(exc) from exc
        except psycopg.Error as exc:
            raise wrap_postgres(exc) from exc

    def close(self) -> None:
        self.pool.close()


class AsyncPostgresRunner:
    """Runs plans on a psycopg `AsyncConnectionPool`, one transaction per plan.

    The pool opens on first use, inside the running event loop."""

    dialect: Dialect = POSTGRES

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 4,
        synchronous_commit: bool = True,
        pgbouncer: bool = False,
    ) -> None:
        self.target = url
        self.connecting = _Connecting()
        self.clock = clock = DatabaseClock()
        self.session = session = PgSession.build(
            synchronous_commit=synchronous_commit, pgbouncer=pgbouncer
        )

        async def configure(conn: psycopg.AsyncConnection[Any]) -> None:
            if session.setup is not None:
                await conn.execute(session.setup)
            await clock.read_async(conn)  # a new connection may be to a new server
            await conn.commit()

        self.pool = AsyncConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            open=False,
            name="jobvisor",
            configure=configure,
            kwargs=session.kwargs,
            connection_class=_recording(psycopg.AsyncConnection, self.connecting),
        )
        self._opened = False

    async def open(self) -> None:
        if not self._opened:
            self._opened = True
            await self.pool.open(wait=False)

    async def _first_connection(self) -> None:
        await self.open()
        if not self.connecting.connected:
            # The pool connects in a task of this loop; a thread waits for its outcome.
            await asyncio.to_thread(self.connecting.attempted.wait, self.pool.timeout)
            self.connecting.raise_if_failed()

    async def run(self, plan: Plan[T]) -> T:
        try:
            if plan.conn is not None:
                async with plan.conn.cursor() as cur:
                    return await self._drive(cur, plan.steps, pipeline=False)
            await self._first_connection()
            opening = self.session.opening(plan)
            async with self.pool.connection() as conn, conn.cursor() as cur:
                return await self._drive(cur, plan.steps, opening=opening, pipeline=True)
        except PoolTimeout as exc:
            raise self.connecting.unavailable(exc) from exc
        except psycopg.Error as exc:
            raise wrap_postgres(exc) from exc

    async def _drive(
        self, cur: Any, steps: Steps[T], *, opening: LiteralString | None = None, pipeline: bool
    ) -> T:
        """Run `steps` on `cur`, in a transaction begun by `opening` when one is
        given; `pipeline`: `cur` is on a connection of the pool."""
        clock = self.clock
        if clock.due():
            await clock.read_async(cur)
        if opening is not None:
            await cur.execute(opening)
        result: Any = None
        try:
            while True:
                result = await _pg_execute_async(
                    cur, steps.send(result), clock=clock, opening=opening, pipeline=pipeline
                )
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Any]:
        try:
            await self._first_connection()
            async with self.pool.connection() as conn:
                await conn.execute("BEGIN")
                yield conn
        except PoolTimeout as exc:
            raise self.connecting.unavailable(exc) from exc
        except psycopg.Error as exc:
            raise wrap_postgres(exc) from exc

    async def close(self) -> None:
        await self.pool.close()


# --- SQLite -------------------------------------------------------------------


def split_script(script: str) -> Iterable[str]:
    """The statements of a migration file, for sqlite3 (whose executescript
    would commit the surrounding transaction)."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            statement = buffer.strip()
            buffer = ""
            if statement.rstrip(";").strip() and not _only_comments(statement):
                yield statement
    if buffer.strip() and not _only_comments(buffer):
        yield buffer


def _only_comments(text: str) -> bool:
    return all(not ln.strip() or ln.strip().startswith("--") for ln in text.splitlines())


def _sqlite_execute(conn: sqlite3.Connection, step: Step, *, own: bool) -> Any:
    if isinstance(step, Batch):
        return [_sqlite_execute(conn, st, own=own) for st in _at_one_time(step, _local_time())]
    if isinstance(step, Script):
        for statement in split_script(step.text):
            conn.execute(statement)
        return None
    fetch = step.fetch
    if fetch == "begin":
        return None  # every plan runs in a transaction on SQLite
    if fetch == "commit":
        if own:
            conn.execute("COMMIT")
            conn.execute("BEGIN IMMEDIATE")
        return None
    if fetch == "copy":
        conn.executemany(step.sql, step.rows)
        return None
    cur = conn.execute(step.sql, with_time(step.params, _local_time) or {})
    if fetch == "all":
        return cur.fetchall()
    if fetch == "one":
        return cur.fetchone()
    return cur.rowcount


def _enter_wal(conn: sqlite3.Connection, busy_timeout: float) -> None:
    """Switch the file to WAL mode, retrying until `busy_timeout`.

    The switch needs an exclusive lock and SQLite reports "database is locked"
    at once, without its busy handler, while another connection is reading or
    switching: several processes opening a fresh file at the same moment hit
    it. The mode is stored in the file, so this only waits on a fresh one."""
    deadline = time.monotonic() + busy_timeout
    pause = 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(pause * (0.5 + random.random()))
        pause = min(pause * 2, 0.1)


def _create_private(path: str) -> None:
    """Create the database file readable by its owner only (0600), if it does
    not exist yet: SQLite would create it 0644 under the usual umask, payloads
    readable by every user, and gives its -wal and -shm files the database
    file's mode. An existing file keeps the mode its owner chose."""
    if path in ("", ":memory:") or os.path.exists(path):
        return
    # Created meanwhile, or a bad directory: sqlite3 reports the latter itself.
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def _ended_early() -> DatabaseError:
    # SQLite rolls a transaction back by itself after some errors (a full
    # disk, an I/O error): the block must not go on as if it were still open.
    return DatabaseError(
        "the transaction was rolled back: SQLite ended it after an earlier error "
        "(a full disk or an I/O error); nothing done in it was kept"
    )


class SqliteRunner:
    """Runs plans on one `sqlite3` connection in WAL mode, one at a time.

    Each plan is one transaction; writers begin with BEGIN IMMEDIATE so two
    processes never both read-then-upgrade, and wait up to `busy_timeout`
    seconds for the write lock."""

    dialect: Dialect = SQLITE

    def __init__(self, path: str, *, busy_timeout: float = 10.0) -> None:
        self.path = self.target = path
        self.busy_timeout = busy_timeout
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._in_blocks: set[int] = set()  # ids of the connections `transaction()` lent

    def connect(self) -> sqlite3.Connection:
        """A new connection configured as jobvisor needs it (WAL, busy timeout,
        recursive triggers)."""
        try:
            _create_private(self.path)
            conn = sqlite3.connect(
                self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise wrap_sqlite(exc) from exc
        try:
            _enter_wal(conn, self.busy_timeout)
            conn.execute("PRAGMA synchronous=NORMAL")
            # A workflow's cancel cascades through its hand-over trigger firing
            # for the children it ends (migration 16).
            conn.execute("PRAGMA recursive_triggers=ON")
        except BaseException as exc:
            conn.close()
            if isinstance(exc, sqlite3.Error):
                raise wrap_sqlite(exc) from exc
            raise
        return conn

    def run(self, plan: Plan[T]) -> T:
        try:
            if plan.conn is not None:
                caller: sqlite3.Connection = plan.conn
                if id(caller) in self._in_blocks and not caller.in_transaction:
                    raise _ended_early()  # or the statement would commit on its own
                return drive(plan.steps, lambda s: _sqlite_execute(caller, s, own=False))
            with self._lock:
                if self._conn is None:
                    self._conn = self.connect()
                conn = self._conn
                conn.execute("BEGIN IMMEDIATE" if plan.write else "BEGIN")
                try:
                    result = drive(plan.steps, lambda s: _sqlite_execute(conn, s, own=True))
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
                return result
        except sqlite3.Error as exc:
            raise wrap_sqlite(exc) from exc

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Any]:
        """A transaction on a connection of its own (the queue's connection
        stays free for other threads); it waits for the write lock up front."""
        conn = self.connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            self._in_blocks.add(id(conn))
            try:
                yield conn
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            if not conn.in_transaction:
                raise _ended_early()
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise wrap_sqlite(exc) from exc
        finally:
            self._in_blocks.discard(id(conn))
            conn.close()

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


class AsyncSqliteRunner:
    """The SQLite runner for async callers: each plan runs in a worker thread,
    so the event loop never waits on SQLite's locks or disk."""

    def __init__(self, path: str, *, busy_timeout: float = 10.0) -> None:
        self.sync = SqliteRunner(path, busy_timeout=busy_timeout)
        self.dialect: Dialect = SQLITE
        self.target = path

    async def run(self, plan: Plan[T]) -> T:
        if plan.conn is not None:
            return self.sync.run(plan)
        return await asyncio.to_thread(self.sync.run, plan)

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Any]:
        context = self.sync.transaction()
        conn = await asyncio.to_thread(context.__enter__)
        try:
            yield conn
        except BaseException as exc:
            if not await asyncio.to_thread(context.__exit__, type(exc), exc, exc.__traceback__):
                raise
        else:
            await asyncio.to_thread(context.__exit__, None, None, None)

    async def close(self) -> None:
        await asyncio.to_thread(self.sync.close)


# --- a connection someone else owns ---------------------------------------------


class _UnpreparedCursor(psycopg.Cursor[Any]):
    """Prepares nothing on the server: the session is its owner's (who may
    be behind PgBouncer, or count on its own prepared statements)."""

    def execute(
        self,
        query: Any,
        params: Any = None,
        *,
        prepare: bool | None = None,
        binary: bool | None = None,
    ) -> Any:
        return super().execute(query, params, prepare=False, binary=binary)


def _plain_cursor(conn: psycopg.Connection[Any]) -> psycopg.Cursor[Any]:
    """A cursor on a psycopg connection an application configured for
    itself, reading values as jobvisor's statements expect them: Django, for
    one, sets its connections' cursor class to client-side binding and loads
    JSON columns as text."""
    cur = _UnpreparedCursor(conn)
    cur.adapters.register_loader("jsonb", JsonbLoader)
    cur.adapters.register_loader("json", JsonLoader)
    return cur


class BorrowedRunner:
    """Runs every plan on a connection its owner lends for the call (`lend()`
    returns it: a web framework's connection of the current thread), within
    whatever transaction the owner has open, or statement by statement when
    it has none. It never begins, commits or closes anything: an operation
    enqueued in the owner's transaction exists if and only if the owner
    commits, and a plan that must commit part of its work (`migrate`,
    batched clean-ups) is refused."""

    def __init__(self, dialect: Dialect, lend: Callable[[], Any]) -> None:
        self.dialect = dialect
        self.lend = lend
        self.target = "(borrowed connection)"
        self.clock = DatabaseClock()

    def run(self, plan: Plan[T]) -> T:
        conn = plan.conn if plan.conn is not None else self.lend()
        try:
            if self.dialect is POSTGRES:
                clock = self.clock
                with _plain_cursor(conn) as cur:
                    if clock.due():
                        clock.read(cur)
                    return drive(plan.steps, lambda s: _pg_execute(cur, _lendable(s), clock=clock))
            return drive(plan.steps, lambda s: _sqlite_execute(conn, _lendable(s), own=False))
        except psycopg.Error as exc:
            raise wrap_postgres(exc) from exc
        except sqlite3.Error as exc:
            raise wrap_sqlite(exc) from exc

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Any]:
        """The lent connection, in its owner's transaction (if any)."""
        yield self.lend()

    def close(self) -> None:
        """Nothing to close: the connection is its owner's."""


def _lendable(step: Step) -> Step:
    """`step`, unless it would commit or migrate on a borrowed connection."""
    if isinstance(step, Batch):
        for st in step.stmts:
            _lendable(st)
        return step
    if isinstance(step, Script) or step.fetch in ("commit", "begin"):
        raise InvalidArgument(
            "this operation manages its own transactions or migrates: run it on a queue "
            "of its own (jobvisor.connect), not on a borrowed connection"
        )
    return step
