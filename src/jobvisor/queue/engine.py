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
import os
import random
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Generator, Iterable, Sequence
from typing import Any, Generic, Literal, Protocol, TypeVar

from psycopg_pool import AsyncConnectionPool, ConnectionPool

from . import sql_postgres, sql_sqlite
from .model import UTC, Job, JobStatus, NewJob

T = TypeVar("T")

Fetch = Literal["rowcount", "all", "one", "script", "copy", "commit"]


@dataclasses.dataclass(frozen=True, slots=True)
class Stmt:
    """One step of an operation: a statement and what to hand back from it.

    `rowcount` returns the affected row count, `all` the rows, `one` the first
    row or None, `script` runs several statements without parameters, `copy`
    bulk-inserts `rows`, and `commit` makes what came before durable: it ends
    the transaction and starts another (in a plan without a transaction of its
    own, where each statement commits by itself, it has nothing left to do).
    """

    sql: str = ""
    params: dict[str, Any] | None = None
    fetch: Fetch = "rowcount"
    rows: Sequence[Sequence[Any]] = ()


COMMIT = Stmt(fetch="commit")

Steps = Generator[Stmt, Any, T]


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
    transaction costs no round trip, always runs a plan in one."""

    steps: Steps[T]
    conn: Any = None
    write: bool = True
    transaction: bool = True


class SqlSet(Protocol):
    """The statements each engine module defines, under the same names."""

    MIGRATION_LOCK: str
    MIGRATIONS_TABLE_CREATE: str
    MIGRATIONS_APPLIED: str
    MIGRATION_RECORD: str
    CLOCK_NOW: str
    JOB_COLUMNS_COPY: str
    JOB_INSERT: str
    JOB_GET_LIVE_BY_DEDUPE_KEY: str
    JOB_NOTIFY: str
    JOB_CLAIM: str
    JOB_RENEW_MANY: str
    JOB_COMPLETE_MANY: str
    JOB_FAIL: str
    JOB_SNOOZE: str
    JOB_RELEASE_MANY: str
    JOB_CANCEL_HELD: str
    JOB_REAP_EXPIRED: str
    JOB_RELEASE_WORKER: str
    JOB_DELETE_FINISHED: str
    JOB_COUNT_BY_QUEUE_STATUS: str
    JOB_OLDEST_DUE_AGE: str
    JOB_GET: str
    JOB_LIST_BY_STATUS: str
    JOB_COUNT_BY_STATUS: str
    JOB_REQUEUE_DEAD: str
    JOB_REQUEUE_DEAD_OF_TYPE: str
    JOB_DEAD_WITH_DEDUPE_KEY_OF_TYPE: str
    JOB_DELETE_DEAD: str
    JOB_DELETE_DEAD_OF_TYPE: str
    JOB_CANCEL: str
    JOB_STATUS: str
    LEADER_ATTEMPT_ELECT: str
    LEADER_RESIGN: str


_STATUS = {status.value: status for status in JobStatus}


class Dialect:
    """Value conversions for PostgreSQL, which takes Python values as they are."""

    name = "postgres"
    sql: SqlSet = sql_postgres
    notifies = True

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

    def policies(self, rows: Sequence[tuple[str | None, float, float, float]]) -> dict[str, Any]:
        """(job_type or None for the default, base, cap, jitter) rows for the reaper."""
        return {
            "policy_types": [r[0] for r in rows],
            "policy_bases": [r[1] for r in rows],
            "policy_caps": [r[2] for r in rows],
            "policy_jitters": [r[3] for r in rows],
        }

    def id_out(self, value: Any) -> uuid.UUID:
        return value  # type: ignore[no-any-return]

    def time_out(self, value: Any) -> dt.datetime:
        return value  # type: ignore[no-any-return]

    def meta(self, value: dict[str, Any] | None) -> str | None:
        """A job's `meta` as JSON text (both engines take text for it), or None."""
        return None if value is None else json.dumps(value, separators=(",", ":"))

    def copy_row(self, job: NewJob, run_at: Any, now: Any) -> tuple[Any, ...]:
        return (
            job.id, job.queue, job.job_type, job.payload_json, job.priority, run_at,
            job.max_attempts, job.dedupe_key, job.correlation_id, now, self.meta(job.meta),
        )  # fmt: skip

    def add_seconds(self, when: Any, seconds: float) -> Any:
        return when + dt.timedelta(seconds=seconds)

    def job(self, row: Sequence[Any]) -> Job:
        # Positional, in Job's field order (the order every job query selects),
        # and the status by dict: keyword arguments and the enum's lookup were
        # most of a claim's client-side time (bench/queue_throughput.py).
        return Job(
            row[0], row[1], row[2], row[3], row[4], row[5], _STATUS[row[6]], row[7], row[8],
            row[9], row[10], row[11], row[12], row[13], row[14], row[15], row[16], row[17],
            row[18],
        )  # fmt: skip


def _epoch(value: dt.datetime | None) -> float | None:
    return None if value is None else value.timestamp()


def _from_epoch(value: float | None) -> dt.datetime | None:
    return None if value is None else dt.datetime.fromtimestamp(value, UTC)


class SqliteDialect(Dialect):
    """SQLite stores ids as text, claim tokens as 32 hex digits, times as Unix
    epoch seconds, payloads and meta as JSON text, and receives lists as JSON."""

    name = "sqlite"
    sql: SqlSet = sql_sqlite
    notifies = False

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

    def policies(self, rows: Sequence[tuple[str | None, float, float, float]]) -> dict[str, Any]:
        return {"policies": json.dumps([list(r) for r in rows])}

    def id_out(self, value: Any) -> uuid.UUID:
        return uuid.UUID(value)

    def time_out(self, value: Any) -> dt.datetime:
        return dt.datetime.fromtimestamp(value, UTC)

    def add_seconds(self, when: Any, seconds: float) -> Any:
        return when + seconds

    def copy_row(self, job: NewJob, run_at: Any, now: Any) -> tuple[Any, ...]:
        return (
            str(job.id), job.queue, job.job_type, job.payload_json, job.priority, run_at,
            job.max_attempts, job.dedupe_key, job.correlation_id, now, self.meta(job.meta),
        )  # fmt: skip

    def job(self, row: Sequence[Any]) -> Job:
        return Job(
            uuid.UUID(row[0]), row[1], row[2], json.loads(row[3]), row[4],
            dt.datetime.fromtimestamp(row[5], UTC), _STATUS[row[6]], row[7], row[8],
            row[9], row[10], row[11], _from_epoch(row[12]),
            uuid.UUID(hex=row[13]) if row[13] else None, row[14],
            dt.datetime.fromtimestamp(row[15], UTC), _from_epoch(row[16]), _from_epoch(row[17]),
            json.loads(row[18]) if row[18] is not None else None,
        )  # fmt: skip


POSTGRES = Dialect()
SQLITE = SqliteDialect()


def drive(steps: Steps[T], execute: Callable[[Stmt], Any]) -> T:
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

    def close(self) -> None: ...


class AsyncRunner(Protocol):
    dialect: Dialect

    async def run(self, plan: Plan[T]) -> T: ...

    async def close(self) -> None: ...


# --- PostgreSQL ---------------------------------------------------------------


def _pg_execute(cur: Any, stmt: Stmt, *, begin: bool = False) -> Any:
    """Run one step on `cur`; `begin`: the plan runs in a transaction of our
    own on an autocommit connection, so a `commit` step opens the next one."""
    fetch = stmt.fetch
    if fetch == "script":
        cur.execute(stmt.sql)
        return None
    if fetch == "commit":
        cur.connection.commit()
        if begin:
            cur.execute("BEGIN")
        return None
    if fetch == "copy":
        with cur.copy(stmt.sql) as copy:
            for row in stmt.rows:
                copy.write_row(row)
        return None
    cur.execute(stmt.sql, stmt.params)
    if fetch == "all":
        return cur.fetchall()
    if fetch == "one":
        return cur.fetchone()
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
PG_SESSION_SETUP = "SET random_page_cost = 1.1; SET enable_sort = off"

# The pools' connections are in autocommit mode: a plan that wants a
# transaction opens one with BEGIN (and the pool's context commits it, or rolls
# it back on an error); a plan without one runs each statement on its own.
PG_POOL_KWARGS: dict[str, Any] = {"autocommit": True}


def _pg_configure(conn: Any) -> None:
    conn.execute(PG_SESSION_SETUP)
    conn.commit()


async def _pg_configure_async(conn: Any) -> None:
    await conn.execute(PG_SESSION_SETUP)
    await conn.commit()


class PostgresRunner:
    """Runs plans on a psycopg `ConnectionPool`, one transaction per plan."""

    dialect: Dialect = POSTGRES

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 4) -> None:
        self.pool = ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            open=False,
            name="jobvisor",
            configure=_pg_configure,
            kwargs=PG_POOL_KWARGS,
        )
        self.pool.open(wait=False)

    def run(self, plan: Plan[T]) -> T:
        if plan.conn is not None:
            with plan.conn.cursor() as cur:
                return drive(plan.steps, lambda s: _pg_execute(cur, s))
        begin = plan.transaction
        with self.pool.connection() as conn, conn.cursor() as cur:
            if begin:
                cur.execute("BEGIN")
            return drive(plan.steps, lambda s: _pg_execute(cur, s, begin=begin))

    def close(self) -> None:
        self.pool.close()


class AsyncPostgresRunner:
    """Runs plans on a psycopg `AsyncConnectionPool`, one transaction per plan.

    The pool opens on first use, inside the running event loop."""

    dialect: Dialect = POSTGRES

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 4) -> None:
        self.pool = AsyncConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            open=False,
            name="jobvisor",
            configure=_pg_configure_async,
            kwargs=PG_POOL_KWARGS,
        )
        self._opened = False

    async def open(self) -> None:
        if not self._opened:
            self._opened = True
            await self.pool.open(wait=False)

    async def run(self, plan: Plan[T]) -> T:
        if plan.conn is not None:
            async with plan.conn.cursor() as cur:
                return await self._drive(cur, plan.steps)
        await self.open()
        begin = plan.transaction
        async with self.pool.connection() as conn, conn.cursor() as cur:
            if begin:
                await cur.execute("BEGIN")
            return await self._drive(cur, plan.steps, begin=begin)

    @staticmethod
    async def _drive(cur: Any, steps: Steps[T], *, begin: bool = False) -> T:
        result: Any = None
        try:
            while True:
                stmt = steps.send(result)
                if stmt.fetch == "copy":
                    async with cur.copy(stmt.sql) as copy:
                        for row in stmt.rows:
                            await copy.write_row(row)
                    result = None
                elif stmt.fetch == "commit":
                    await cur.connection.commit()
                    if begin:
                        await cur.execute("BEGIN")
                elif stmt.fetch == "script":
                    await cur.execute(stmt.sql)
                else:
                    await cur.execute(stmt.sql, stmt.params)
                    if stmt.fetch == "all":
                        result = await cur.fetchall()
                    elif stmt.fetch == "one":
                        result = await cur.fetchone()
                    else:
                        result = cur.rowcount
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

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


def _sqlite_execute(conn: sqlite3.Connection, stmt: Stmt, *, own: bool) -> Any:
    fetch = stmt.fetch
    if fetch == "script":
        for statement in split_script(stmt.sql):
            conn.execute(statement)
        return None
    if fetch == "commit":
        if own:
            conn.execute("COMMIT")
            conn.execute("BEGIN IMMEDIATE")
        return None
    if fetch == "copy":
        conn.executemany(stmt.sql, stmt.rows)
        return None
    cur = conn.execute(stmt.sql, stmt.params or {})
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


class SqliteRunner:
    """Runs plans on one `sqlite3` connection in WAL mode, one at a time.

    Each plan is one transaction; writers begin with BEGIN IMMEDIATE so two
    processes never both read-then-upgrade, and wait up to `busy_timeout`
    seconds for the write lock."""

    dialect: Dialect = SQLITE

    def __init__(self, path: str, *, busy_timeout: float = 10.0) -> None:
        self.path = path
        self.busy_timeout = busy_timeout
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    def connect(self) -> sqlite3.Connection:
        """A new connection configured as jobvisor needs it (WAL, busy timeout)."""
        _create_private(self.path)
        conn = sqlite3.connect(
            self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
        )
        try:
            _enter_wal(conn, self.busy_timeout)
            conn.execute("PRAGMA synchronous=NORMAL")
        except BaseException:
            conn.close()
            raise
        return conn

    def run(self, plan: Plan[T]) -> T:
        if plan.conn is not None:
            caller: sqlite3.Connection = plan.conn
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

    async def run(self, plan: Plan[T]) -> T:
        if plan.conn is not None:
            return self.sync.run(plan)
        return await asyncio.to_thread(self.sync.run, plan)

    async def close(self) -> None:
        await asyncio.to_thread(self.sync.close)
