"""psycopg's errors as jobvisor's, and the pool's first connection attempts."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import (
    Iterator,
)
from typing import Any, Final

import psycopg
from psycopg_pool import PoolTimeout

from ....errortext import driver_text, flat_message
from ... import conninfo
from ...errors import (
    DatabaseError,
    DatabaseRefused,
    DatabaseUnavailable,
    Fault,
    InvalidArgument,
    JobvisorError,
    SchemaMissing,
)

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
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError) or _node_lost(exc):
        return DatabaseUnavailable(f"database unavailable ({driver_text(exc)})")
    if isinstance(exc, psycopg.errors.FeatureNotSupported) and "distributed" in str(exc):
        return DatabaseError(
            f"database error ({driver_text(exc)}): the jobs table is spread over a Citus"
            " cluster; set JOBVISOR_CITUS=1 (connect(..., citus=True))"
        )
    return DatabaseError(f"database error ({driver_text(exc)})")


# What a Citus coordinator says (as an internal error) when a worker node it
# needs for the statement does not answer: the database is away in part, and
# the statement is worth trying again as when the server itself is away.
_NODE_LOST: Final = (
    "connection to the remote node",
    "connection marked as essential",
    "could not establish any connections to the node",
    "could not connect to the remote node",
    "terminating connection due to",
    "server closed the connection unexpectedly",
    "connection not open",
)


def _node_lost(exc: psycopg.Error) -> bool:
    if not isinstance(exc, psycopg.errors.InternalError_):
        return False
    text = str(exc)
    return any(sign in text for sign in _NODE_LOST)


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
    port, a password holding a raw `@`, see `conninfo`) before any connection
    is tried."""
    conninfo.check_authority(url)
    try:
        options = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        raise InvalidArgument(f"database URL: {flat_message(exc)}") from exc
    conninfo.check_options({k: None if v is None else str(v) for k, v in options.items()})


# --- what an error means for a retry (see `queue.faults`) ------------------

# SQLSTATE classes and codes that mean the connection, not the statement, failed.
_CONNECTION_CLASSES: Final = frozenset({"08"})  # connection exception
_SHUTDOWN_CODES: Final = frozenset({"57P01", "57P02", "57P03"})  # admin/crash shutdown, starting
# SQLSTATE classes whose errors pass with time: transaction rollback (40),
# insufficient resources (53), object not in prerequisite state (55: lock
# not available), operator intervention (57: statement cancelled), system
# error (58: I/O).
_TRANSIENT_CLASSES: Final = frozenset({"40", "53", "55", "57", "58"})
_READ_ONLY: Final = "25006"  # read_only_sql_transaction: a read-only server or standby


def classify_postgres(exc: BaseException) -> Fault | None:
    """The kind of a psycopg error (`queue.faults`); None for any other."""
    return _classify_psycopg(exc) if isinstance(exc, psycopg.Error) else None


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
