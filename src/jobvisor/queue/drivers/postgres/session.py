"""A PostgreSQL session as jobvisor sets it up, and what one step asks of a
cursor (shared by the sync and the async runner)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import (
    Sequence,
)
from typing import Any, Final, LiteralString

import psycopg

from ...plan import Fetch, Plan, Query, Script, Stmt, with_time
from .clock import DatabaseClock

# --- PostgreSQL ---------------------------------------------------------------

# The pool logs each failed connection attempt; the runners raise what it
# says (`_Connecting`). Where the program configured no logging (the command
# line), this keeps those attempts from reaching stderr through logging's
# last-resort handler on top of the one error line; where it did (the worker,
# the supervisor), they are logged as before.
logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())


@dataclasses.dataclass(frozen=True, slots=True)
class _PgStep:
    """What one step asks of a PostgreSQL cursor, for either face to carry out:
    `commit` first, then `begin` again, then run `query` (as a COPY when
    `copy`), then read back `fetch`."""

    commit: bool = False
    begin: Query | None = None
    query: Query | None = None
    params: dict[str, Any] | None = None
    copy: Sequence[Sequence[Any]] | None = None
    types: Sequence[str] = ()
    fetch: Fetch | None = None


def _pg_step(
    step: Stmt | Script, *, opening: LiteralString | None, clock: DatabaseClock
) -> _PgStep:
    """The one dispatch of a step on PostgreSQL. `opening`: the plan runs in
    a transaction of our own on an autocommit connection, begun with that
    statement, so a `commit` step opens the next one with it (behind
    PgBouncer the planner settings are set again, see `PgSession`). A `now`
    left None is the database's time (`clock`)."""
    if isinstance(step, Script):
        # Migration scripts are package data, not literals: passed as bytes,
        # psycopg runs them as they are (several statements, no parameters).
        return _PgStep(query=step.text.encode())
    fetch = step.fetch
    if fetch == "commit":
        return _PgStep(commit=True, begin=opening)
    if fetch == "begin":
        return _PgStep(begin=None if opening else "BEGIN")
    if fetch == "copy":
        return _PgStep(query=step.sql, copy=step.rows, types=step.types)
    return _PgStep(query=step.sql, params=with_time(step.params, clock.now), fetch=fetch)


class _JsonTextBinaryDumper(psycopg.adapt.Dumper):
    """JSON text, already encoded and checked, in jsonb's binary form: a
    version byte, then the text (the stock jsonb dumper would encode it again)."""

    oid = psycopg.adapters.types["jsonb"].oid
    format = psycopg.pq.Format.BINARY

    def dump(self, obj: Any) -> bytes:
        text: str = obj
        return b"\x01" + text.encode()


def _copy_types(cur: Any, copy: Any, types: Sequence[str]) -> None:
    """Make a COPY binary with these column types; jsonb columns take text.
    (The dumper is the cursor's own: a plan's cursor lives for one plan.)"""
    if types:
        cur.adapters.register_dumper(None, _JsonTextBinaryDumper)
        copy.set_types(types)


def _pipelined(stmts: Sequence[Stmt]) -> bool:
    """Whether a batch can go in a pipeline: statements with parameters, and
    plain BEGIN and COMMIT (a batch in a plan's own transaction, or behind
    PgBouncer, runs one by one)."""
    return all(st.fetch in ("all", "one", "rowcount", "begin", "commit") for st in stmts)


def _pipeline_query(st: Stmt) -> Query:
    if st.fetch == "begin":
        return "BEGIN"
    if st.fetch == "commit":
        return "COMMIT"
    return st.sql


# The claim walks the claim index in order and stops at `limit` rows. On a
# table whose statistics are cold (a fresh database right after a bulk
# enqueue) the planner prefers a bitmap scan and a sort of every due row
# instead: 50 ms a claim instead of 1, and psycopg's prepared statements keep
# that plan. The claim's order is the claim index's own, so sorts are priced
# out (a statement with no other way, such as the dead-job list, still sorts);
# and 1.1 is the usual random_page_cost for SSD storage. Both apply only to
# jobvisor's own connections (bench/queue_throughput.py --cold-statistics:
# 2,800 -> 10,700 jobs/s, and the prepared plans keep pickup latency low).
# The JIT is off too: on a big table the claim's estimate (a walk of the whole
# index, its filter on paused queues and limits judged to keep one row) passes
# jit_above_cost, and compiling it took 250 ms where running it takes 2 ms
# (10 million pending jobs, bench/backlog.py). No statement of the queue runs
# long enough for the JIT to pay.
PG_SESSION_SETUP: Final[LiteralString] = (
    "SET random_page_cost = 1.1; SET enable_sort = off; SET jit = off"
)

# For a queue opened with `synchronous_commit=False` (the worker's own): its
# commits do not wait for the WAL flush. See `connect`.
PG_ASYNC_COMMIT: Final[LiteralString] = "SET synchronous_commit = off"

# Behind PgBouncer in transaction pooling, the next transaction may run on
# another client's server connection: the planner settings are set for the
# transaction of a `Plan.planner` plan only, in the round trip of its BEGIN.
PG_BEGIN_PLANNER: Final[LiteralString] = (
    "BEGIN; SET LOCAL random_page_cost = 1.1; SET LOCAL enable_sort = off; SET LOCAL jit = off"
)
PG_BEGIN_PLANNER_ASYNC_COMMIT: Final[LiteralString] = (
    PG_BEGIN_PLANNER + "; SET LOCAL synchronous_commit = off"
)

# The pools' connections are in autocommit mode: a plan that wants a
# transaction opens one with BEGIN (and the pool's context commits it, or rolls
# it back on an error); a plan without one runs each statement on its own.
PG_POOL_KWARGS: dict[str, Any] = {"autocommit": True}

# Behind PgBouncer (before 1.21, or without max_prepared_statements) a
# server-side prepared statement may be looked up on a server connection that
# never prepared it: psycopg prepares none.
PG_BOUNCER_KWARGS: dict[str, Any] = {**PG_POOL_KWARGS, "prepare_threshold": None}


@dataclasses.dataclass(frozen=True, slots=True)
class PgSession:
    """How a runner's connections are set up: `setup`, run once per new
    connection (None: nothing outlives a transaction), the connection
    arguments, and how a `Plan.planner` plan begins (None: as any other)."""

    setup: LiteralString | None
    kwargs: dict[str, Any]
    begin_planner: LiteralString | None

    @classmethod
    def build(cls, *, synchronous_commit: bool, pgbouncer: bool) -> PgSession:
        if pgbouncer:
            begin = PG_BEGIN_PLANNER if synchronous_commit else PG_BEGIN_PLANNER_ASYNC_COMMIT
            return cls(None, PG_BOUNCER_KWARGS, begin)
        setup = PG_SESSION_SETUP
        if not synchronous_commit:
            setup += "; " + PG_ASYNC_COMMIT
        return cls(setup, PG_POOL_KWARGS, None)

    def opening(self, plan: Plan[Any]) -> LiteralString | None:
        """The statement a plan's transaction begins with; None: it runs
        each statement on its own."""
        if plan.planner and self.begin_planner is not None:
            return self.begin_planner
        return "BEGIN" if plan.transaction else None
