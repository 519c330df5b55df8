"""Running plans on a connection someone else owns (a web framework's)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import (
    Callable,
    Iterator,
)
from typing import Any

import psycopg
from psycopg.types.json import JsonbLoader, JsonLoader

from ..errors import (
    InvalidArgument,
)
from ..plan import Batch, Dialect, Plan, Script, Step, T, drive
from .postgres.clock import DatabaseClock
from .postgres.dialect import POSTGRES
from .postgres.errors import wrap_postgres
from .postgres.runner import _pg_execute
from .sqlite.errors import wrap_sqlite
from .sqlite.runner import _sqlite_execute

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
