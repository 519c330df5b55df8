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

from typing import Final

from .drivers.postgres.errors import classify_postgres
from .drivers.sqlite.errors import classify_sqlite
from .errors import DatabaseUnavailable, Fault

__all__ = ["Fault", "classify"]

_MAX_CAUSES: Final = 8  # how far down a chain of wrapped exceptions to look


def classify(exc: BaseException) -> Fault:
    """The kind of `exc`, for a caller deciding whether to retry it."""
    for _ in range(_MAX_CAUSES):
        fault = classify_postgres(exc) or classify_sqlite(exc)
        if fault is not None:
            return fault
        if isinstance(exc, ConnectionError | TimeoutError):
            return Fault.UNREACHABLE
        cause = exc.__cause__
        if cause is None:
            break
        exc = cause
    return Fault.UNREACHABLE if isinstance(exc, DatabaseUnavailable) else Fault.PERMANENT
