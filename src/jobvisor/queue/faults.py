"""What an error from the database means for a caller that wants to retry.

A long-running loop (a worker's claim, flush or renew) meets three kinds of
error, and each asks for a different answer:

- `Fault.UNREACHABLE`: the database cannot be reached or the connection broke
  (refused, reset, pool timeout, server shutting down). Only the database
  coming back fixes it, and a new process would wait for the same thing:
  retry with backoff for as long as it takes.
- `Fault.MAY_PASS`: the database answers but refuses for now: a read-only
  server (a failover, `default_transaction_read_only`), a serialization
  failure or deadlock, a full disk, too many connections, a locked SQLite
  file. Retry with backoff, but not forever: past a limit, a fresh process
  (new connections, perhaps to the new primary) is the better bet.
- `Fault.PERMANENT`: anything else — a bad value, a missing table, a bug.
  A retry sends the same statement to the same answer: stop.

`classify()` reads the driver's exception, or the `JobvisorError` that wraps
one (`DatabaseUnavailable`, `DatabaseError`) through its `__cause__`.
"""

from __future__ import annotations

import enum
import sqlite3
from typing import Final

import psycopg

from .errors import DatabaseUnavailable

# SQLSTATE classes and codes that mean the connection, not the statement, failed.
_CONNECTION_CLASSES: Final = frozenset({"08"})  # connection exception
_SHUTDOWN_CODES: Final = frozenset({"57P01", "57P02", "57P03"})  # admin/crash shutdown, starting
# SQLSTATE classes whose errors pass with time: transaction rollback (40),
# insufficient resources (53), object not in prerequisite state (55: lock
# not available), operator intervention (57: statement cancelled), system
# error (58: I/O).
_TRANSIENT_CLASSES: Final = frozenset({"40", "53", "55", "57", "58"})
_READ_ONLY: Final = "25006"  # read_only_sql_transaction: a read-only server or standby
_SQLITE_SCHEMA: Final = ("no such table", "no such column")
_MAX_CAUSES: Final = 8  # how far down a chain of wrapped exceptions to look


class Fault(enum.StrEnum):
    UNREACHABLE = "unreachable"
    MAY_PASS = "may_pass"
    PERMANENT = "permanent"


def classify(exc: BaseException) -> Fault:
    """The kind of `exc`, for a caller deciding whether to retry it."""
    for _ in range(_MAX_CAUSES):
        if isinstance(exc, psycopg.Error):
            return _classify_psycopg(exc)
        if isinstance(exc, sqlite3.Error):
            return _classify_sqlite(exc)
        if isinstance(exc, ConnectionError | TimeoutError):
            return Fault.UNREACHABLE
        cause = exc.__cause__
        if cause is None:
            break
        exc = cause
    return Fault.UNREACHABLE if isinstance(exc, DatabaseUnavailable) else Fault.PERMANENT


def _classify_psycopg(exc: psycopg.Error) -> Fault:
    state = exc.sqlstate
    if isinstance(exc, psycopg.InterfaceError):
        return Fault.UNREACHABLE  # the connection is closed or unusable
    if state is None:
        # No SQLSTATE: the server never answered (refused, reset, pool
        # timeout); anything but an OperationalError is the client's own.
        return Fault.UNREACHABLE if isinstance(exc, psycopg.OperationalError) else Fault.PERMANENT
    if state[:2] in _CONNECTION_CLASSES or state in _SHUTDOWN_CODES:
        return Fault.UNREACHABLE
    if state == _READ_ONLY or state[:2] in _TRANSIENT_CLASSES:
        return Fault.MAY_PASS
    return Fault.PERMANENT


def _classify_sqlite(exc: sqlite3.Error) -> Fault:
    # OperationalError covers a locked or busy file, a full disk, a read-only
    # file and an I/O error; the others (IntegrityError, DataError,
    # ProgrammingError...) are the statement's own, and so is a missing
    # table or column (also an OperationalError: the schema is not there).
    if isinstance(exc, sqlite3.OperationalError) and not str(exc).startswith(_SQLITE_SCHEMA):
        return Fault.MAY_PASS
    return Fault.PERMANENT
