"""The SQLite runners: one serialised `sqlite3` connection in WAL mode (the
async face runs its plans in a thread)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import (
    AsyncIterator,
    Iterable,
    Iterator,
)
from typing import Any

from ....backoff import backoff
from ...errors import (
    DatabaseError,
)
from ...plan import Batch, Dialect, Plan, Script, Step, T, _at_one_time, drive, with_time
from ...validate import DEFAULT_BUSY_TIMEOUT
from .dialect import SQLITE
from .errors import wrap_sqlite


def _local_time() -> float:
    """SQLite's own clock is this host's: Unix epoch seconds."""
    return time.time()


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


WAL_RETRY_BASE = 0.005  # seconds before the second try at switching to WAL
WAL_RETRY_CAP = 0.1


def _enter_wal(conn: sqlite3.Connection, busy_timeout: float) -> None:
    """Switch the file to WAL mode, retrying until `busy_timeout`.

    The switch needs an exclusive lock and SQLite reports "database is locked"
    at once, without its busy handler, while another connection is reading or
    switching: several processes opening a fresh file at the same moment hit
    it. The mode is stored in the file, so this only waits on a fresh one."""
    deadline = time.monotonic() + busy_timeout
    tries = 0
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
        tries += 1
        time.sleep(backoff(tries, base=WAL_RETRY_BASE, cap=WAL_RETRY_CAP))


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

    def __init__(self, path: str, *, busy_timeout: float = DEFAULT_BUSY_TIMEOUT) -> None:
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

    def __init__(self, path: str, *, busy_timeout: float = DEFAULT_BUSY_TIMEOUT) -> None:
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
