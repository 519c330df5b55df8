"""`classify()`: what a database error means for a loop that retries it,
from the driver's exception or from the `JobvisorError` that wraps it."""

from __future__ import annotations

import sqlite3

import psycopg
import psycopg_pool
import pytest
from psycopg import errors as pg

from jobvisor.queue.errors import DatabaseError, DatabaseUnavailable, InvalidArgument
from jobvisor.queue.faults import Fault, classify

CASES = [
    (psycopg.OperationalError("connection refused"), Fault.UNREACHABLE),
    (psycopg_pool.PoolTimeout("couldn't get a connection"), Fault.UNREACHABLE),
    (psycopg.InterfaceError("the connection is closed"), Fault.UNREACHABLE),
    (pg.AdminShutdown("terminating connection"), Fault.UNREACHABLE),
    (pg.CannotConnectNow("the database system is starting up"), Fault.UNREACHABLE),
    (pg.ConnectionFailure("connection failure"), Fault.UNREACHABLE),
    (ConnectionResetError("reset"), Fault.UNREACHABLE),
    (pg.ReadOnlySqlTransaction("cannot execute UPDATE in a read-only transaction"), Fault.MAY_PASS),
    (pg.SerializationFailure("could not serialize"), Fault.MAY_PASS),
    (pg.DeadlockDetected("deadlock detected"), Fault.MAY_PASS),
    (pg.DiskFull("could not extend file"), Fault.MAY_PASS),
    (pg.TooManyConnections("too many clients"), Fault.MAY_PASS),
    (pg.LockNotAvailable("could not obtain lock"), Fault.MAY_PASS),
    (pg.QueryCanceled("canceling statement"), Fault.MAY_PASS),
    (sqlite3.OperationalError("database is locked"), Fault.MAY_PASS),
    (sqlite3.OperationalError("database or disk is full"), Fault.MAY_PASS),
    (sqlite3.OperationalError("attempt to write a readonly database"), Fault.MAY_PASS),
    (sqlite3.OperationalError("no such table: jobvisor_jobs"), Fault.PERMANENT),
    (sqlite3.IntegrityError("UNIQUE constraint failed"), Fault.PERMANENT),
    (pg.NumericValueOutOfRange("value out of range"), Fault.PERMANENT),
    (pg.DatetimeFieldOverflow("date/time field value out of range"), Fault.PERMANENT),
    (pg.UndefinedTable('relation "jobvisor_jobs" does not exist'), Fault.PERMANENT),
    (psycopg.ProgrammingError("no results to fetch"), Fault.PERMANENT),
    (ValueError("bad value"), Fault.PERMANENT),
    (OverflowError("date value out of range"), Fault.PERMANENT),
    (InvalidArgument("lease=1e12: expected at most 1 day"), Fault.PERMANENT),
]  # fmt: skip  (one case a line reads as a table)


@pytest.mark.parametrize(("error", "fault"), CASES, ids=lambda v: type(v).__name__)
def test_a_driver_error_is_classified(error: BaseException, fault: Fault) -> None:
    assert classify(error) is fault


def _wrapped(wrapper: Exception, cause: BaseException) -> Exception:
    wrapper.__cause__ = cause
    return wrapper


@pytest.mark.parametrize(("error", "fault"), CASES, ids=lambda v: type(v).__name__)
def test_a_wrapped_error_is_classified_by_its_cause(error: BaseException, fault: Fault) -> None:
    assert classify(_wrapped(DatabaseError("refused"), error)) is fault
    assert classify(_wrapped(DatabaseUnavailable("gone"), error)) is fault


def test_a_wrapper_without_a_cause_is_classified_by_its_own_class() -> None:
    assert classify(DatabaseUnavailable("the database cannot be reached")) is Fault.UNREACHABLE
    assert classify(DatabaseError("refused")) is Fault.PERMANENT
