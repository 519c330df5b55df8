"""sqlite3's errors as jobvisor's."""

from __future__ import annotations

import sqlite3
from typing import Final

from ....errortext import driver_text
from ...errors import (
    DatabaseError,
    DatabaseUnavailable,
    Fault,
    JobvisorError,
    SchemaMissing,
)


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


_SQLITE_SCHEMA: Final = ("no such table", "no such column")


def classify_sqlite(exc: BaseException) -> Fault | None:
    """The kind of a sqlite3 error (`queue.faults`); None for any other."""
    return _classify_sqlite(exc) if isinstance(exc, sqlite3.Error) else None


def _classify_sqlite(exc: sqlite3.Error) -> Fault:
    # OperationalError covers a locked or busy file, a full disk, a read-only
    # file and an I/O error; the others (IntegrityError, DataError,
    # ProgrammingError...) are the statement's own, and so is a missing
    # table or column (also an OperationalError: the schema is not there).
    if isinstance(exc, sqlite3.OperationalError) and not str(exc).startswith(_SQLITE_SCHEMA):
        return Fault.MAY_PASS
    return Fault.PERMANENT
