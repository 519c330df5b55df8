"""A test app that makes one loop of the worker that loads it meet database
errors: `JOBVISOR_APP=tests.service.worker.faulty_app:registry`.

It serves the handlers of `FAULT_APP` (by default `tests.service.worker.app:registry`)
and, at import, wraps the database call of one loop of the worker (the
worker imports its app before it starts its loops):

- `FAULT_LOOP`: `claim` (`AsyncQueue.claim`), `flush`
  (`AsyncQueue.complete_many`), `renew` (`AsyncServiceOps.renew_held`) or
  `listen` (the `LISTEN` statement of the notification connection).
- `FAULT_KIND`: what the call raises, as the engine's driver would:
  `unreachable` (the connection is gone), `may_pass` (a read-only server
  or file) or `permanent` (a value out of range).
- `FAULT_FILE`: the call raises while this file exists; the test removes it
  to end the fault. With `FAULT_ONCE=1` the first call that finds it removes
  it and raises once, so that one worker process only meets the fault.
- `FAULT_LIMIT`: the worker's `fault_limit`, in seconds (default: the
  worker's own).

The call raises before it reaches the database: nothing is written, as when
the server refuses the statement.
"""

from __future__ import annotations

import functools
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from jobvisor.queue.api import AsyncQueue
from jobvisor.queue.internal import AsyncServiceOps
from jobvisor.worker import loop as worker_loop
from jobvisor.worker.registry import load_app

registry = load_app(os.environ.get("FAULT_APP", "tests.service.worker.app:registry"))

LOOP = os.environ.get("FAULT_LOOP", "")
KIND = os.environ.get("FAULT_KIND", "may_pass")
FILE = Path(os.environ.get("FAULT_FILE", "/nonexistent"))
ONCE = os.environ.get("FAULT_ONCE") == "1"
LIMIT = os.environ.get("FAULT_LIMIT")
POSTGRES = os.environ.get("JOBVISOR_DATABASE_URL", "").startswith("postgres")


def _error() -> Exception:
    if KIND == "unreachable":
        if POSTGRES:
            return psycopg.OperationalError("server closed the connection unexpectedly")
        return sqlite3.OperationalError("unable to open database file")  # classified may_pass
    if KIND == "may_pass":
        if POSTGRES:
            return psycopg.errors.ReadOnlySqlTransaction(
                "cannot execute UPDATE in a read-only transaction"
            )
        return sqlite3.OperationalError("attempt to write a readonly database")
    if POSTGRES:
        return psycopg.errors.NumericValueOutOfRange("value out of range for type interval")
    return OverflowError("date value out of range")


def _active() -> bool:
    if not ONCE:
        return FILE.exists()
    try:
        FILE.unlink()
    except FileNotFoundError:
        return False
    return True


def _faulty(call: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(call)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        if _active():
            raise _error()
        return await call(*args, **kwargs)

    return wrapper


def _faulty_listen(execute: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(execute)
    async def wrapper(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        if str(query).startswith("LISTEN") and _active():
            raise _error()
        return await execute(self, query, *args, **kwargs)

    return wrapper


# Where each loop's call lives: the public queue, or the service's operations.
_CALLS: dict[str, tuple[type, str]] = {
    "claim": (AsyncQueue, "claim"),
    "flush": (AsyncQueue, "complete_many"),
    "renew": (AsyncServiceOps, "renew_held"),
}
if LOOP in _CALLS:
    owner, name = _CALLS[LOOP]
    setattr(owner, name, _faulty(getattr(owner, name)))
elif LOOP == "listen":
    psycopg.AsyncConnection.execute = _faulty_listen(psycopg.AsyncConnection.execute)  # type: ignore[method-assign]

if LIMIT is not None:
    _init = worker_loop.Worker.__init__
    _limit = float(LIMIT)

    @functools.wraps(_init)
    def _init_with_limit(self: worker_loop.Worker, *args: Any, **kwargs: Any) -> None:
        _init(self, *args, **kwargs, fault_limit=_limit)

    worker_loop.Worker.__init__ = _init_with_limit  # type: ignore[method-assign]
