"""Statements, plans and the driver protocol.

An operation (see `ops`) is written once, as a generator that yields `Stmt`s
and receives their results. A runner (see `drivers`) drives that generator
inside one transaction: the PostgreSQL runners on a psycopg pool (sync or
async), the SQLite runner on one serialised `sqlite3` connection (its async
face runs the same plan in a thread). A `Dialect` converts values to and
from each engine's column types. So every operation exists once, and sync
and async callers share it; only the drivers' loops know whether they await."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import uuid
from collections.abc import (
    Callable,
    Generator,
    Mapping,
    Sequence,
)
from typing import Any, Generic, Literal, LiteralString, Protocol, TypeAlias, TypeVar

from .model import Job

T = TypeVar("T")

Fetch = Literal["rowcount", "all", "one", "copy", "commit", "begin"]
Query: TypeAlias = LiteralString | bytes


@dataclasses.dataclass(frozen=True, slots=True)
class Stmt:
    """One step of an operation: a statement and what to hand back from it.

    `rowcount` returns the affected row count, `all` the rows, `one` the first
    row or None, `copy` bulk-inserts `rows`, and `commit` makes what came
    before durable: it ends the transaction and starts another (in a plan
    without a transaction of its own, where each statement commits by itself,
    it has nothing left to do). `begin` opens a transaction in such a plan,
    for the statements up to the next `commit` (a plan that has one already,
    and SQLite, where every plan has one, go on in theirs).

    A `copy` with `types` (the columns' PostgreSQL types) goes in binary
    format; a `jsonb` column then takes JSON text as it is.

    `sql` is a `LiteralString`: a statement of the engine's SQL module, never
    one built at run time (values go in `params`; tests/contract/queue/test_engine.py
    checks every statement handed to a `Stmt` is such a constant).
    """

    sql: LiteralString = ""
    params: dict[str, Any] | None = None
    fetch: Fetch = "rowcount"
    rows: Sequence[Sequence[Any]] = ()
    types: Sequence[str] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class Script:
    """A migration file's statements, run as they are (no parameters, no
    result). The one path for SQL that is not a literal: the files are the
    package's own data (see `ops.migration_files`)."""

    text: str


COMMIT = Stmt(fetch="commit")
BEGIN = Stmt(fetch="begin")


@dataclasses.dataclass(frozen=True, slots=True)
class Batch:
    """Statements whose parameters are all known before the first runs, sent
    together: the step's result is the list of their results, in order.

    On PostgreSQL they go in one pipeline, one round trip however many there
    are (a transaction begun in a batch and committed in it holds its locks
    for the server's work only, never for a round trip); elsewhere they run
    one by one. Every statement of a batch whose `now` is None gets the same
    reading of the clock, taken when the batch is sent."""

    stmts: tuple[Stmt, ...]


Step: TypeAlias = Stmt | Script | Batch
Steps = Generator[Step, Any, T]


@dataclasses.dataclass(slots=True)
class Plan(Generic[T]):
    """An operation ready to run: its steps, and the caller's own connection
    when the work belongs in the caller's transaction.

    `transaction=False` says the plan needs no transaction around its steps:
    it is one statement (atomic by itself), or statements whose effects stand
    alone, each read seeing what committed before it (as every statement does
    under READ COMMITTED anyway). PostgreSQL then runs each statement on its
    own, sparing the BEGIN and COMMIT round trips: the claim, the completion
    flush and the lease renewal are one round trip each. SQLite, where a
    transaction costs no round trip, always runs a plan in one.

    `planner=True` says the plan's statements want jobvisor's planner
    settings (`PG_PLANNER`: the claim). A PostgreSQL session has them from
    its start; behind PgBouncer's transaction pooling, where nothing set on
    a session may outlive a transaction, such a plan runs in a transaction
    that sets them with SET LOCAL."""

    steps: Steps[T]
    conn: Any = None
    write: bool = True
    transaction: bool = True
    planner: bool = False


class SqlSet(Protocol):
    """The statements each engine module defines, under the same names."""

    MIGRATION_LOCK: LiteralString
    MIGRATIONS_TABLE_CREATE: LiteralString
    MIGRATIONS_APPLIED: LiteralString
    MIGRATION_RECORD: LiteralString
    MIGRATIONS_TABLE_EXISTS: LiteralString
    CLOCK_SAMPLE: LiteralString
    CLOCK_NOW: LiteralString
    JOB_COLUMNS_COPY: LiteralString
    JOB_INSERT: LiteralString
    JOB_GET_LIVE_BY_DEDUPE_KEY: LiteralString
    JOB_INSERT_KEYED_MANY: LiteralString
    JOB_GET_LIVE_BY_DEDUPE_KEYS: LiteralString
    JOB_INSERT_UNIQUE: LiteralString
    JOB_INSERT_UNIQUE_REPLACE: LiteralString
    JOB_GET_BY_UNIQUE_KEY: LiteralString
    JOB_NOTIFY: LiteralString
    JOB_CLAIM: LiteralString
    JOB_CLAIM_AFTER: LiteralString
    JOB_CLAIM_ABOVE: LiteralString
    LIMIT_LOCK: LiteralString
    JOB_CLAIM_LIMITED: LiteralString
    LIMIT_TAKE_TOKENS: LiteralString
    KEY_BUCKET_TAKE: LiteralString
    KEY_BUCKET_PRUNE: LiteralString
    LIMIT_TABLE_LOCK: LiteralString
    LIMIT_SET: LiteralString
    LIMIT_CLEAR: LiteralString
    LIMIT_LIST: LiteralString
    JOB_RENEW_MANY: LiteralString
    JOB_COMPLETE_MANY: LiteralString
    JOB_FAIL: LiteralString
    JOB_SNOOZE: LiteralString
    JOB_RELEASE_MANY: LiteralString
    JOB_CANCEL_HELD: LiteralString
    JOB_REAP_EXPIRED: LiteralString
    JOB_HELD_BY_WORKER: LiteralString
    JOB_REQUEUE_CRASHED: LiteralString
    JOB_DELETE_FINISHED: LiteralString
    JOB_COUNT_BY_QUEUE_STATUS: LiteralString
    JOB_OLDEST_DUE_AGE: LiteralString
    JOB_GET: LiteralString
    JOB_LIST_BY_STATUS: LiteralString
    JOB_COUNT_BY_STATUS: LiteralString
    JOB_REQUEUE_DEAD: LiteralString
    JOB_REQUEUE_DEAD_OF_TYPE: LiteralString
    JOB_DEAD_WITH_DEDUPE_KEY_OF_TYPE: LiteralString
    JOB_DELETE_DEAD: LiteralString
    JOB_DELETE_DEAD_OF_TYPE: LiteralString
    JOB_CANCEL: LiteralString
    JOB_CANCEL_MANY: LiteralString
    JOB_STATUS: LiteralString
    QUEUE_PAUSE_LOCK_TIMEOUT: LiteralString
    QUEUE_PAUSE_LOCK: LiteralString
    QUEUE_PAUSE: LiteralString
    QUEUE_RESUME: LiteralString
    QUEUE_PAUSED_LIST: LiteralString
    JOB_WAIT_MARK: LiteralString
    LEADER_ATTEMPT_ELECT: LiteralString
    LEADER_RESIGN: LiteralString
    SCHEDULE_UPSERT: LiteralString
    SCHEDULE_DISABLE_UNDECLARED: LiteralString
    SCHEDULE_LIST: LiteralString
    SCHEDULE_GET: LiteralString
    SCHEDULE_ENABLED: LiteralString
    SCHEDULE_ADVANCE: LiteralString
    DB_OLDEST_XMIN: LiteralString
    JOB_PAGE_NEWEST: LiteralString
    JOB_PAGE_FINISHED: LiteralString
    JOB_PAGE_RUNNING: LiteralString
    JOB_PAGE_OF_CORRELATION: LiteralString
    JOB_PAGE_DUE: LiteralString
    JOB_COUNT_WAITING_CAPPED: LiteralString
    JOB_COUNT_RUNNING_CAPPED: LiteralString
    JOB_COUNT_FINISHED_CAPPED: LiteralString
    JOB_COUNT_SAMPLED: LiteralString
    JOB_ROWS_ESTIMATE: LiteralString
    JOB_OLDEST_DUE_OF_QUEUES: LiteralString
    JOB_FINISHED_PER_MINUTE: LiteralString
    SUPERVISOR_HEARTBEAT: LiteralString
    SUPERVISOR_LIST: LiteralString
    SUPERVISOR_DELETE: LiteralString
    SUPERVISOR_PRUNE: LiteralString
    JOB_RUNNING_BY_WORKER: LiteralString
    WEB_SESSION_START: LiteralString
    WEB_SESSION_ALIVE: LiteralString
    WEB_SESSION_END: LiteralString
    WEB_SESSION_PRUNE: LiteralString


class Dialect(Protocol):
    """How one engine takes and gives back values: its statements (`sql`),
    whether it has notifications, and the conversions between Python values
    and its column types. `PostgresDialect` and `SqliteDialect` implement it."""

    name: str
    sql: SqlSet
    notifies: bool
    copy_types: tuple[str, ...]
    """The column types of JOB_COLUMNS_COPY for a binary COPY (empty: the
    engine's bulk insert needs none)."""
    clock_slack: float
    """Seconds a claim looks ahead of its own reading of the clock: how far
    two processes' readings of the database's clock may disagree (`CLOCK_SLACK`
    on PostgreSQL; none on SQLite, whose clock is the host's own)."""
    bounded_claim: bool
    """Whether claims start past the last job claimed (JOB_CLAIM_AFTER, see
    `ops.ClaimBounds`): on PostgreSQL, whose claim index keeps the entries of
    claimed jobs until vacuum may remove them; not on SQLite, which updates
    its index in place."""

    bucket_count: int
    """How many buckets the jobs table is spread over (0: one table; Citus
    mode, see `drivers.citus`: a claim takes from one bucket at a time)."""

    def id(self, value: uuid.UUID) -> Any: ...

    def keyed_id(self, job_id: uuid.UUID, key: str | None) -> uuid.UUID:
        """The id a new job with this dedupe or concurrency key takes (the
        same but in Citus mode, where it puts the job in its key's bucket)."""
        ...

    def batch_ids(self, ids: list[uuid.UUID]) -> list[uuid.UUID]:
        """The ids the jobs of one bulk enqueue without a key take (the same
        but in Citus mode, where runs of them share a bucket)."""
        ...

    def distribute(self) -> Steps[None]:
        """`migrate`'s last steps in Citus mode: spread the jobs table over
        the cluster, once."""
        ...

    def route(self, steps: Steps[Any], now: Callable[[], Any]) -> Steps[Any]:
        """An operation's steps as this engine runs them (the same but in
        Citus mode, where each statement names its jobs' buckets)."""
        ...

    def time(self, value: dt.datetime | None) -> Any: ...

    def names(self, values: Sequence[str] | None) -> Any: ...

    def held(self, jobs: Sequence[Job]) -> dict[str, Any]:
        """The ids and claim tokens of held jobs, as the guarded statements take them."""
        ...

    def token(self, job: Job) -> Any: ...

    def claim_token(self, value: uuid.UUID) -> Any:
        """A new claim token as the claim statement takes it."""
        ...

    def results(self, jobs: Sequence[Job], results: Mapping[uuid.UUID, str] | None) -> Any:
        """These jobs' entries of a JSON-text-by-id map, as a batch statement
        takes them (a completion's results, a renewal's progress)."""
        ...

    def policies(self, rows: Sequence[tuple[str | None, float, float, float]]) -> dict[str, Any]:
        """(job_type or None for the default, base, cap, jitter) rows for the reaper."""
        ...

    def keyed_rows(self, rows: Sequence[Sequence[Any]]) -> dict[str, Any]:
        """Bulk rows (`queue.bulk`'s, times set) as JOB_INSERT_KEYED_MANY takes them."""
        ...

    def id_out(self, value: Any) -> uuid.UUID: ...

    def meta(self, value: dict[str, Any] | None) -> str | None: ...

    def add_seconds(self, when: Any, seconds: float) -> Any: ...

    def job(self, row: Sequence[Any]) -> Job: ...


def drive(steps: Steps[T], execute: Callable[[Step], Any]) -> T:
    """Run an operation's steps to the end through `execute`."""
    result: Any = None
    try:
        while True:
            result = execute(steps.send(result))
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


class SyncRunner(Protocol):
    dialect: Dialect

    def run(self, plan: Plan[T]) -> T: ...

    def transaction(self) -> contextlib.AbstractContextManager[Any]: ...

    def close(self) -> None: ...


class AsyncRunner(Protocol):
    dialect: Dialect
    target: str

    async def run(self, plan: Plan[T]) -> T: ...

    def transaction(self) -> contextlib.AbstractAsyncContextManager[Any]: ...

    async def close(self) -> None: ...


def with_time(params: dict[str, Any] | None, now: Callable[[], Any]) -> dict[str, Any] | None:
    """The parameters of a statement, its `now` filled in when the plan left
    it None (no injected clock): the engine's time at this very statement."""
    if params is None or params.get("now", False) is not None:
        return params
    return {**params, "now": now()}


def _at_one_time(batch: Batch, now: Any) -> list[Stmt]:
    """A batch's statements, each `now` left None set to `now`."""
    return [dataclasses.replace(st, params=with_time(st.params, lambda: now)) for st in batch.stmts]
