"""The public faces of the queue: `Queue` (blocking) and `AsyncQueue`.

Both are thin: each method is an operation from `ops`, bound to a runner.
The signatures, docstrings and checks come from `ops`, so the two faces cannot
drift apart."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import time
import urllib.parse
import uuid
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping
from typing import Any

from ..redact import redact_text, redact_url, remember_secrets
from . import batches, notices, ops, twins, validate, workflows
from .batch_scope import AsyncOpenBatch, OpenBatch
from .bound import AsyncBound, SyncBound, bind_async, bind_sync
from .dead import AsyncDeadJobs, DeadJobs
from .drivers.borrowed import BorrowedRunner
from .drivers.citus.dialect import CitusDialect, citus_mode
from .drivers.postgres.dialect import POSTGRES
from .drivers.postgres.errors import check_conninfo
from .drivers.postgres.notify import listen_postgres
from .drivers.postgres.runner import PostgresRunner
from .drivers.postgres.runner_async import AsyncPostgresRunner
from .drivers.sqlite.dialect import SQLITE
from .drivers.sqlite.notify import poll_sqlite
from .drivers.sqlite.runner import AsyncSqliteRunner, SqliteRunner
from .errors import InvalidArgument
from .model import DEFAULT_RETRY, Job, RetryPolicy
from .notices import Notice
from .plan import AsyncRunner, SyncRunner
from .waiters import Waiters


class Queue(SyncBound):
    """A durable job queue on PostgreSQL or SQLite, for blocking code.

    Thread-safe: PostgreSQL calls take a connection from the pool; SQLite
    calls are serialised on one connection. Close it (or use `with`) when done.
    """

    def __init__(self, runner: SyncRunner, ctx: ops.Ctx, url: str) -> None:
        self._runner, self._ctx, self.url = runner, ctx, url
        self.dead = DeadJobs(runner, ctx)

    @property
    def engine(self) -> str:
        return self._ctx.dialect.name

    @property
    def max_result_bytes(self) -> int:
        """The largest result, in bytes of JSON, a completion stores."""
        return self._ctx.max_result_bytes

    check = bind_sync(ops.check)
    migrate = bind_sync(ops.migrate)
    schema_version = bind_sync(ops.schema_version)
    enqueue = bind_sync(ops.enqueue)
    enqueue_many = bind_sync(ops.enqueue_many)
    claim = bind_sync(ops.claim)
    renew = bind_sync(ops.renew)
    renew_many = bind_sync(ops.renew_many)
    complete = bind_sync(ops.complete)
    complete_many = bind_sync(ops.complete_many)
    fail = bind_sync(ops.fail)
    snooze = bind_sync(ops.snooze)
    release = bind_sync(ops.release)
    release_many = bind_sync(ops.release_many)
    cancel_held = bind_sync(ops.cancel_held)
    reap_expired = bind_sync(ops.reap_expired)
    reap_expired_by_type = bind_sync(ops.reap_expired_by_type)
    requeue_crashed = bind_sync(ops.requeue_crashed)
    release_worker = requeue_crashed  # the former name of requeue_crashed, deprecated
    cleanup = bind_sync(ops.cleanup)
    summary = bind_sync(ops.summary)
    oldest_xmin = bind_sync(ops.oldest_xmin)
    get = bind_sync(ops.get)
    cancel = bind_sync(ops.cancel)
    pause = bind_sync(ops.pause)
    resume = bind_sync(ops.resume)
    paused = bind_sync(ops.paused)
    set_limit = bind_sync(ops.set_limit)
    clear_limit = bind_sync(ops.clear_limit)
    limits = bind_sync(ops.limits)
    cancel_many = bind_sync(ops.cancel_many)
    schedules = bind_sync(ops.schedules)
    schedule_run = bind_sync(ops.schedule_run)
    batch_add = bind_sync(batches.batch_add)
    batch_add_many = bind_sync(batches.batch_add_many)
    batch_close = bind_sync(batches.batch_close)
    get_batch = bind_sync(batches.get_batch)
    batch_results = bind_sync(batches.batch_results)

    enqueue_workflow = bind_sync(workflows.enqueue_workflow)
    workflow = bind_sync(workflows.workflow)
    cancel_workflow = bind_sync(workflows.cancel_workflow)
    retry_workflow = bind_sync(workflows.retry_workflow)
    signal = bind_sync(ops.signal)
    get_event = bind_sync(ops.get_event)

    def batch(
        self,
        *,
        on_success: Any = None,
        on_failure: Any = None,
        on_finish: Any = None,
        meta: Mapping[str, Any] | None = None,
    ) -> OpenBatch:
        """A batch for a `with` block: opened as the block starts, closed as
        it ends (also when it raises); `b.enqueue(...)` adds members. See
        `batches.batch_open` for the callbacks; they are checked here."""
        opening = batches.batch_open(
            self._ctx, on_success=on_success, on_failure=on_failure, on_finish=on_finish, meta=meta
        )
        return OpenBatch(self._runner, self._ctx, opening)

    def wait(self, job_id: uuid.UUID | str, timeout: float | dt.timedelta | None = None) -> Job:
        """Block until the job is terminal (completed, dead or cancelled) and
        return it, as `get` reads it; `TimeoutError` if it is not after
        `timeout` seconds (None: wait for as long as it takes), `JobNotFound`
        if there is no such job. It reads the job every few milliseconds at
        first, backing off to every half second."""
        waiting = ops.Waiting(job_id, timeout)
        while True:
            job = self.get(waiting.job_id)
            delay = waiting.after(job)
            if delay is None:
                return job
            time.sleep(delay)

    def wait_event(
        self, job_id: uuid.UUID | str, key: str, timeout: float | dt.timedelta | None = None
    ) -> Any:
        """Block until the job has published `key` (`job.set_event`) and
        return its latest value; `TimeoutError` after `timeout` seconds (None:
        no limit), `EventNotSet` if the job ends without it, `JobNotFound`
        if there is no such job. It reads as `wait` does, backing off to
        every half second."""
        waiting = ops.EventWaiting(job_id, key, timeout)
        while True:
            read = self._runner.run(ops.event_read(self._ctx, waiting.job_id, waiting.key))
            delay = waiting.after(read)
            if delay is None:
                return read.value
            time.sleep(delay)

    def transaction(self) -> contextlib.AbstractContextManager[Any]:
        """A transaction on a connection of the queue's engine, for work that
        must commit together: pass the connection as `conn=` to the operations
        that take one. It commits when the block ends and rolls back when it
        raises; driver errors come out as `JobvisorError`s.

        On SQLite the connection is a new one, holding the write lock for the
        whole block: other writers (this queue's other calls too) wait for it."""
        return self._runner.transaction()

    def close(self) -> None:
        self._runner.close()

    def __enter__(self) -> Queue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Queue({redact_url(self.url)!r})"


class AsyncQueue(AsyncBound):
    """The same queue for asyncio code: every method is a coroutine.

    On PostgreSQL it uses an `AsyncConnectionPool`, opened on first use; on
    SQLite each call runs in a thread. Close it (or `async with`) when done.
    """

    def __init__(
        self, runner: AsyncRunner, ctx: ops.Ctx, url: str, *, listen: str | None = None
    ) -> None:
        self._runner, self._ctx, self.url = runner, ctx, url
        self._listen = listen
        self.dead = AsyncDeadJobs(runner, ctx)
        self._waiters = Waiters(self.notifications)

    @property
    def listens(self) -> bool:
        """Whether notices are heard as they are sent (PostgreSQL's LISTEN);
        False on SQLite, and behind PgBouncer without a `listen_url`, where
        `notifications()`, `wait` and the worker poll instead."""
        return self._listen is not None

    @property
    def engine(self) -> str:
        return self._ctx.dialect.name

    @property
    def max_result_bytes(self) -> int:
        """The largest result, in bytes of JSON, a completion stores."""
        return self._ctx.max_result_bytes

    check = bind_async(ops.check)
    migrate = bind_async(ops.migrate)
    schema_version = bind_async(ops.schema_version)
    enqueue = bind_async(ops.enqueue)
    enqueue_many = bind_async(ops.enqueue_many)
    claim = bind_async(ops.claim)
    renew = bind_async(ops.renew)
    renew_many = bind_async(ops.renew_many)
    complete = bind_async(ops.complete)
    complete_many = bind_async(ops.complete_many)
    fail = bind_async(ops.fail)
    snooze = bind_async(ops.snooze)
    release = bind_async(ops.release)
    release_many = bind_async(ops.release_many)
    cancel_held = bind_async(ops.cancel_held)
    reap_expired = bind_async(ops.reap_expired)
    reap_expired_by_type = bind_async(ops.reap_expired_by_type)
    requeue_crashed = bind_async(ops.requeue_crashed)
    release_worker = requeue_crashed  # the former name of requeue_crashed, deprecated
    cleanup = bind_async(ops.cleanup)
    summary = bind_async(ops.summary)
    oldest_xmin = bind_async(ops.oldest_xmin)
    get = bind_async(ops.get)
    cancel = bind_async(ops.cancel)
    pause = bind_async(ops.pause)
    resume = bind_async(ops.resume)
    paused = bind_async(ops.paused)
    set_limit = bind_async(ops.set_limit)
    clear_limit = bind_async(ops.clear_limit)
    limits = bind_async(ops.limits)
    cancel_many = bind_async(ops.cancel_many)
    schedules = bind_async(ops.schedules)
    schedule_run = bind_async(ops.schedule_run)
    batch_add = bind_async(batches.batch_add)
    batch_add_many = bind_async(batches.batch_add_many)
    batch_close = bind_async(batches.batch_close)
    get_batch = bind_async(batches.get_batch)
    batch_results = bind_async(batches.batch_results)

    enqueue_workflow = bind_async(workflows.enqueue_workflow)
    workflow = bind_async(workflows.workflow)
    cancel_workflow = bind_async(workflows.cancel_workflow)
    retry_workflow = bind_async(workflows.retry_workflow)
    signal = bind_async(ops.signal)
    get_event = bind_async(ops.get_event)

    def batch(
        self,
        *,
        on_success: Any = None,
        on_failure: Any = None,
        on_finish: Any = None,
        meta: Mapping[str, Any] | None = None,
    ) -> AsyncOpenBatch:
        """`Queue.batch` for asyncio code: `async with queue.batch(...) as b`."""
        opening = batches.batch_open(
            self._ctx, on_success=on_success, on_failure=on_failure, on_finish=on_finish, meta=meta
        )
        return AsyncOpenBatch(self._runner, self._ctx, opening)

    async def wait(
        self,
        job_id: uuid.UUID | str,
        timeout: float | dt.timedelta | None = None,  # noqa: ASYNC109 (the twin of Queue.wait)
    ) -> Job:
        """`Queue.wait` for asyncio code: await the job until it is terminal.

        On PostgreSQL it is woken by the notice the job's completion (or
        death) sends at its commit, all the waits of this queue sharing one
        listening connection; it still reads the job once a second, for the
        ends that send no notice (a reaped lease, a crash, a cancel). On
        SQLite (and without LISTEN, see `listens`) it polls as `Queue.wait` does."""
        if not self.listens:
            waiting = ops.Waiting(job_id, timeout)
            while True:
                job = await self.get(waiting.job_id)
                delay = waiting.after(job)
                if delay is None:
                    return job
                await asyncio.sleep(delay)
        waiting = ops.Waiting(job_id, timeout, notices=True)
        wake = self._waiters.watch(waiting.job_id)
        try:
            await self._waiters.listening(ops.WAIT_NOTICE_POLL)
            await self._runner.run(ops.wait_mark(self._ctx, waiting.job_id))
            while True:
                wake.clear()
                job = await self.get(waiting.job_id)
                delay = waiting.after(job)
                if delay is None:
                    return job
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), delay)
        finally:
            self._waiters.unwatch(waiting.job_id, wake)

    async def wait_event(
        self,
        job_id: uuid.UUID | str,
        key: str,
        timeout: float | dt.timedelta | None = None,  # noqa: ASYNC109 (the twin of Queue's)
    ) -> Any:
        """`Queue.wait_event` for asyncio code."""
        waiting = ops.EventWaiting(job_id, key, timeout)
        while True:
            read = await self._runner.run(ops.event_read(self._ctx, waiting.job_id, waiting.key))
            delay = waiting.after(read)
            if delay is None:
                return read.value
            await asyncio.sleep(delay)

    def transaction(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """`Queue.transaction` for asyncio code: `async with queue.transaction() as conn`."""
        return self._runner.transaction()

    def notifications(self, queues: Iterable[str] | None = None) -> AsyncGenerator[Notice, None]:
        """Wake-ups as they happen: an async iterator of `Notice`s, for the
        jobs of `queues` (every queue when None).

        A notice of kind `job` says a job became due on `notice.queue` (None:
        on some queue, look at all of yours); `missed` says notices may have
        been lost (the connection broke and came back), so look again. A
        notice is a hint, never a promise: poll now and then as well.

        PostgreSQL: LISTEN on a connection of its own (to `listen_url` when
        given), reconnecting with backoff. Behind PgBouncer without a
        `listen_url`, nothing can be heard: a `missed` at once, then a `job`
        notice for every queue each second. SQLite: a poll of the file's
        change counter, quick after a change and slower while nothing
        happens. Stop by leaving the loop (or `aclose()`); the connection
        closes with it."""
        names = ops.queue_names("queues", queues)
        if not self._ctx.dialect.notifies:
            return poll_sqlite(self._runner.target, names)
        if self._listen is None:
            return notices.poll_unheard(notices.UNHEARD_POLL)
        return listen_postgres(self._listen, names)

    async def close(self) -> None:
        await self._waiters.close()
        if twins.has_twin(self._runner):
            await asyncio.to_thread(twins.close_twin, self._runner)
        await self._runner.close()

    async def __aenter__(self) -> AsyncQueue:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncQueue({redact_url(self.url)!r})"


def parse_url(url: str) -> tuple[str, str]:
    """("postgres", conninfo) or ("sqlite", path) for a database URL.

    A PostgreSQL URL libpq cannot parse (an unknown option, a bad port) is
    refused here, before any connection is tried."""
    if not isinstance(url, str) or not url:
        raise InvalidArgument(f"url={url!r}: expected postgresql://… or sqlite:///path")
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme in ("postgresql", "postgres"):
        remember_secrets(url)
        check_conninfo(url)
        return "postgres", url
    if scheme == "sqlite":
        if not url.startswith("sqlite:///") or len(url) == len("sqlite:///"):
            raise InvalidArgument(
                f"url={url!r}: expected sqlite:///relative/path.db or sqlite:////absolute/path.db"
            )
        return "sqlite", urllib.parse.unquote(url[len("sqlite:///") :])
    raise InvalidArgument(
        f"url={redact_url(url)!r}: unknown scheme {redact_text(scheme)!r}; "
        "expected postgresql://… or sqlite:///path"
    )


def _listen_target(
    engine: str, target: str, *, pgbouncer: bool, listen_url: str | None
) -> str | None:
    """Where a queue LISTENs: `listen_url`, else its own database unless it
    is reached through PgBouncer (None: nothing to listen on, poll)."""
    if not isinstance(pgbouncer, bool):
        raise InvalidArgument(f"pgbouncer={pgbouncer!r}: expected True or False")
    if engine != "postgres":
        if pgbouncer:
            raise InvalidArgument("pgbouncer=True: expected a postgresql:// database URL")
        if listen_url is not None:
            raise InvalidArgument("listen_url: expected only with a postgresql:// database URL")
        return None
    if listen_url is not None:
        try:
            listen_engine, listen_target = parse_url(listen_url)
        except InvalidArgument as exc:
            raise InvalidArgument(f"listen_url: {exc}") from None
        if listen_engine != "postgres":
            raise InvalidArgument(
                f"listen_url={redact_url(listen_url)!r}: expected a postgresql:// URL"
            )
        return listen_target
    return None if pgbouncer else target


def _ctx(
    engine: str,
    *,
    clock: Callable[[], Any] | None,
    require_correlation_id: bool,
    retry: Mapping[str, RetryPolicy] | None,
    default_retry: RetryPolicy,
    lease: float,
    pool_size: int,
    busy_timeout: float,
    max_payload_bytes: int | None,
    max_result_bytes: int | None,
    citus: bool = False,
) -> ops.Ctx:
    validate.count("pool_size", pool_size, high=validate.MAX_POOL_SIZE)
    validate.seconds("busy_timeout", busy_timeout, high=validate.MAX_BUSY_TIMEOUT)
    return ops.Ctx(
        dialect=CitusDialect() if citus else POSTGRES if engine == "postgres" else SQLITE,
        clock=clock,
        require_correlation_id=require_correlation_id,
        retry=dict(retry or {}),
        default_retry=default_retry,
        lease=validate.seconds("lease", lease, positive=True, high=validate.MAX_LEASE),
        max_payload_bytes=validate.max_payload_bytes(max_payload_bytes),
        max_result_bytes=validate.max_result_bytes(max_result_bytes),
    )


def connect(
    url: str,
    *,
    pool_size: int = validate.DEFAULT_POOL_SIZE,
    clock: Callable[[], Any] | None = None,
    require_correlation_id: bool = False,
    retry: Mapping[str, RetryPolicy] | None = None,
    default_retry: RetryPolicy = DEFAULT_RETRY,
    lease: float = ops.DEFAULT_LEASE,
    busy_timeout: float = validate.DEFAULT_BUSY_TIMEOUT,
    max_payload_bytes: int | None = None,
    max_result_bytes: int | None = None,
    synchronous_commit: bool = True,
    pgbouncer: bool = False,
    listen_url: str | None = None,
    citus: bool | None = None,
) -> Queue:
    """Open a queue on `postgresql://…` or `sqlite:///path.db`.

    `clock` replaces the database clock (tests move time with it); `retry` maps
    job types to their backoff; `lease` is the default claim lease in seconds.
    `max_payload_bytes` caps a payload's JSON (default: `JOBVISOR_MAX_PAYLOAD_BYTES`,
    else 1 MiB), `max_result_bytes` a stored result's (default:
    `JOBVISOR_RESULT_MAX_BYTES`, else 1 MiB). A value out of its bounds (see
    `jobvisor.queue.validate`) raises `InvalidArgument`.
    `synchronous_commit=False` (PostgreSQL; the worker's own queue) lets this
    queue's commits return before their WAL flush: a server crash may then
    forget its last few hundred milliseconds of claims and completions, which
    at-least-once delivery turns into a job run again, never a lost one.
    `pgbouncer=True` (PostgreSQL) says `url` leads through PgBouncer in
    transaction pooling: no setting outlives a transaction, no statement is
    prepared on the server, and LISTEN goes to `listen_url` (a direct
    connection to the server; the async queue and its workers poll when it is
    None). `listen_url` may also be given without `pgbouncer`.
    `citus=True` (PostgreSQL; default: `JOBVISOR_CITUS`, else off) says `url`
    is a Citus coordinator whose jobs table `migrate()` spreads over the
    cluster by bucket (docs/design.md, "Scale-out").
    Call `migrate()` once before first use; `check()` says whether it is needed.

    A URL libpq cannot parse raises `InvalidArgument` here; a server that
    refuses the connection raises `DatabaseRefused` on the first call."""
    engine, target = parse_url(url)
    ctx = _ctx(
        engine,
        clock=clock,
        require_correlation_id=require_correlation_id,
        retry=retry,
        default_retry=default_retry,
        lease=lease,
        pool_size=pool_size,
        busy_timeout=busy_timeout,
        max_payload_bytes=max_payload_bytes,
        max_result_bytes=max_result_bytes,
        citus=citus_mode(engine, citus),
    )
    _listen_target(engine, target, pgbouncer=pgbouncer, listen_url=listen_url)
    runner: SyncRunner
    if engine == "postgres":
        runner = PostgresRunner(
            target,
            min_size=1,
            max_size=pool_size,
            synchronous_commit=synchronous_commit,
            pgbouncer=pgbouncer,
            dialect=ctx.dialect,
        )
    else:
        runner = SqliteRunner(target, busy_timeout=busy_timeout)
    return Queue(runner, ctx, url)


def borrow(
    lend: Callable[[], Any],
    *,
    engine: str,
    max_payload_bytes: int | None = None,
    max_result_bytes: int | None = None,
) -> Queue:
    """A queue on connections another library owns: `lend()` returns the
    driver connection to use for each call (a psycopg 3 connection for
    `engine="postgres"`, a `sqlite3` connection for `"sqlite"`), and every
    call runs inside that connection's current transaction, beginning and
    committing nothing, so what it enqueues commits or rolls back with the
    owner's work. For integrations (`jobvisor.contrib.django`); the schema is
    migrated through a queue of its own (`jobvisor migrate`). `InvalidArgument`
    for an unknown engine."""
    if engine not in ("postgres", "sqlite"):
        raise InvalidArgument(f"engine={engine!r}: expected 'postgres' or 'sqlite'")
    ctx = _ctx(
        engine,
        clock=None,
        require_correlation_id=False,
        retry=None,
        default_retry=DEFAULT_RETRY,
        lease=ops.DEFAULT_LEASE,
        pool_size=1,
        busy_timeout=validate.DEFAULT_BUSY_TIMEOUT,
        max_payload_bytes=max_payload_bytes,
        max_result_bytes=max_result_bytes,
    )
    runner = BorrowedRunner(ctx.dialect, lend)
    return Queue(runner, ctx, f"{engine}:(borrowed)")


def connect_async(
    url: str,
    *,
    pool_size: int = validate.DEFAULT_POOL_SIZE,
    clock: Callable[[], Any] | None = None,
    require_correlation_id: bool = False,
    retry: Mapping[str, RetryPolicy] | None = None,
    default_retry: RetryPolicy = DEFAULT_RETRY,
    lease: float = ops.DEFAULT_LEASE,
    busy_timeout: float = validate.DEFAULT_BUSY_TIMEOUT,
    max_payload_bytes: int | None = None,
    max_result_bytes: int | None = None,
    synchronous_commit: bool = True,
    pgbouncer: bool = False,
    listen_url: str | None = None,
    citus: bool | None = None,
) -> AsyncQueue:
    """`connect` for asyncio code; see `connect` for the options."""
    engine, target = parse_url(url)
    ctx = _ctx(
        engine,
        clock=clock,
        require_correlation_id=require_correlation_id,
        retry=retry,
        default_retry=default_retry,
        lease=lease,
        pool_size=pool_size,
        busy_timeout=busy_timeout,
        max_payload_bytes=max_payload_bytes,
        max_result_bytes=max_result_bytes,
        citus=citus_mode(engine, citus),
    )
    listen = _listen_target(engine, target, pgbouncer=pgbouncer, listen_url=listen_url)
    runner: AsyncRunner
    if engine == "postgres":
        runner = AsyncPostgresRunner(
            target,
            min_size=1,
            max_size=pool_size,
            synchronous_commit=synchronous_commit,
            pgbouncer=pgbouncer,
            dialect=ctx.dialect,
        )
    else:
        runner = AsyncSqliteRunner(target, busy_timeout=busy_timeout)
    return AsyncQueue(runner, ctx, url, listen=listen)
