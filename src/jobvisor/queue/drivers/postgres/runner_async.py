"""The PostgreSQL runners on a psycopg pool: this module is the source of both.

`runner.py`, the sync runner, is generated from it by `tools/async_to_sync.py`
(coroutines become functions, `await` goes, async names become their sync
twins, and a block under `if _ASYNC:` keeps only its `else`); edit this
module and run the tool, never the generated one. tests/contract/queue/test_generated.py
checks the two agree.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import (
    AsyncIterator,
)
from typing import Any, Final, LiteralString, cast

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ...plan import Batch, Dialect, Plan, Step, Steps, Stmt, T, _at_one_time
from .clock import DatabaseClock
from .dialect import POSTGRES
from .errors import _Connecting, _recording, wrap_postgres
from .session import PgSession, _copy_types, _pg_step, _pipeline_query, _pipelined

# False in the generated sync module (see `tools/async_to_sync.py`).
_ASYNC: Final = True


async def _pg_batch(
    cur: Any, batch: Batch, *, clock: DatabaseClock, opening: LiteralString | None, pipeline: bool
) -> list[Any]:
    stmts = _at_one_time(batch, clock.now())
    if not (pipeline and opening is None and _pipelined(stmts)):
        return [await _pg_execute(cur, st, clock=clock, opening=opening) for st in stmts]
    conn = cur.connection
    cursors = [conn.cursor() for _ in stmts]
    try:
        async with conn.pipeline():
            for st, c in zip(stmts, cursors, strict=True):
                await c.execute(_pipeline_query(st), st.params)
        return [await _pipeline_result(st, c) for st, c in zip(stmts, cursors, strict=True)]
    finally:
        for c in cursors:
            await c.close()


async def _pipeline_result(st: Stmt, cur: Any) -> Any:
    if st.fetch == "all":
        return await cur.fetchall()
    if st.fetch == "one":
        return await cur.fetchone()
    if st.fetch == "rowcount":
        return cur.rowcount
    return None


async def _pg_execute(
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
        return await _pg_batch(cur, step, clock=clock, opening=opening, pipeline=pipeline)
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


class AsyncPostgresRunner:
    """Runs plans on a psycopg `AsyncConnectionPool`, one transaction per plan.

    The async pool opens on first use, inside the running event loop; the
    sync one at once."""

    dialect: Dialect = POSTGRES

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 4,
        synchronous_commit: bool = True,
        pgbouncer: bool = False,
        dialect: Dialect = POSTGRES,
    ) -> None:
        self.target = url
        self.dialect = dialect
        self.connecting = _Connecting()
        self.clock = clock = DatabaseClock()
        self.session = session = PgSession.build(
            synchronous_commit=synchronous_commit, pgbouncer=pgbouncer
        )

        async def configure(conn: psycopg.AsyncConnection[Any]) -> None:
            if session.setup is not None:
                await conn.execute(session.setup)
            await clock.read_async(conn)
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
        if _ASYNC:
            self._opened = False
        else:
            self.pool.open(wait=False)  # type: ignore[unused-coroutine]  # the sync one

    if _ASYNC:

        async def open(self) -> None:
            if not self._opened:
                self._opened = True
                await self.pool.open(wait=False)

    async def _first_connection(self) -> None:
        if _ASYNC:
            await self.open()
        if not self.connecting.connected:
            if _ASYNC:
                # The pool connects in a task of this loop; a thread waits for its outcome.
                await asyncio.to_thread(self.connecting.attempted.wait, self.pool.timeout)
            else:
                self.connecting.attempted.wait(self.pool.timeout)
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
        steps = self.dialect.route(steps, clock.now)
        result: Any = None
        try:
            while True:
                result = await _pg_execute(
                    cur, steps.send(result), clock=clock, opening=opening, pipeline=pipeline
                )
        except StopIteration as stop:
            return cast(T, stop.value)

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Any]:
        try:
            await self._first_connection()
            async with self.pool.connection() as conn:
                await conn.execute("BEGIN")
                yield conn  # the pool's context commits, or rolls back on an error
        except PoolTimeout as exc:
            raise self.connecting.unavailable(exc) from exc
        except psycopg.Error as exc:
            raise wrap_postgres(exc) from exc

    async def close(self) -> None:
        await self.pool.close()
