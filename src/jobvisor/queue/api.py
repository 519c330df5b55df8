"""The public faces of the queue: `Queue` (blocking) and `AsyncQueue`.

Both are thin: each method is an operation from `ops`, bound to a runner.
The signatures, docstrings and checks come from `ops`, so the two faces cannot
drift apart."""

from __future__ import annotations

import functools
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Concatenate, ParamSpec, TypeVar

from . import ops
from .engine import (
    POSTGRES,
    SQLITE,
    AsyncPostgresRunner,
    AsyncRunner,
    AsyncSqliteRunner,
    Plan,
    PostgresRunner,
    SqliteRunner,
    SyncRunner,
)
from .errors import InvalidArgument
from .model import DEFAULT_RETRY, RetryPolicy
from .redact import redact_text, remember_secrets
from .redact import redact_url as redact_url  # noqa: PLC0414 - re-exported, callers import it here

P = ParamSpec("P")
T = TypeVar("T")


class _SyncBound:
    _runner: SyncRunner
    _ctx: ops.Ctx


class _AsyncBound:
    _runner: AsyncRunner
    _ctx: ops.Ctx


def _sync(
    op: Callable[Concatenate[ops.Ctx, P], Plan[T]],
) -> Callable[Concatenate[_SyncBound, P], T]:
    @functools.wraps(op)
    def method(self: _SyncBound, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._runner.run(op(self._ctx, *args, **kwargs))

    return method


def _async(
    op: Callable[Concatenate[ops.Ctx, P], Plan[T]],
) -> Callable[Concatenate[_AsyncBound, P], Awaitable[T]]:
    @functools.wraps(op)
    async def method(self: _AsyncBound, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._runner.run(op(self._ctx, *args, **kwargs))

    return method


class DeadJobs(_SyncBound):
    """`queue.dead`: jobs that ran out of attempts."""

    def __init__(self, runner: SyncRunner, ctx: ops.Ctx) -> None:
        self._runner, self._ctx = runner, ctx

    list = _sync(ops.dead_list)
    count = _sync(ops.dead_count)
    get = _sync(ops.dead_get)
    requeue = _sync(ops.dead_requeue)
    requeue_type = _sync(ops.dead_requeue_type)
    discard = _sync(ops.dead_discard)
    discard_type = _sync(ops.dead_discard_type)


class AsyncDeadJobs(_AsyncBound):
    """`queue.dead` of an `AsyncQueue`."""

    def __init__(self, runner: AsyncRunner, ctx: ops.Ctx) -> None:
        self._runner, self._ctx = runner, ctx

    list = _async(ops.dead_list)
    count = _async(ops.dead_count)
    get = _async(ops.dead_get)
    requeue = _async(ops.dead_requeue)
    requeue_type = _async(ops.dead_requeue_type)
    discard = _async(ops.dead_discard)
    discard_type = _async(ops.dead_discard_type)


class Queue(_SyncBound):
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

    migrate = _sync(ops.migrate)
    schema_version = _sync(ops.schema_version)
    enqueue = _sync(ops.enqueue)
    enqueue_many = _sync(ops.enqueue_many)
    claim = _sync(ops.claim)
    renew = _sync(ops.renew)
    renew_many = _sync(ops.renew_many)
    complete = _sync(ops.complete)
    complete_many = _sync(ops.complete_many)
    fail = _sync(ops.fail)
    snooze = _sync(ops.snooze)
    release = _sync(ops.release)
    release_many = _sync(ops.release_many)
    cancel_held = _sync(ops.cancel_held)
    reap_expired = _sync(ops.reap_expired)
    reap_expired_by_type = _sync(ops.reap_expired_by_type)
    release_worker = _sync(ops.release_worker)
    cleanup = _sync(ops.cleanup)
    summary = _sync(ops.summary)
    get = _sync(ops.get)
    cancel = _sync(ops.cancel)
    leader_attempt_elect = _sync(ops.leader_attempt_elect)
    leader_resign = _sync(ops.leader_resign)

    def close(self) -> None:
        self._runner.close()

    def __enter__(self) -> Queue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Queue({redact_url(self.url)!r})"


class AsyncQueue(_AsyncBound):
    """The same queue for asyncio code: every method is a coroutine.

    On PostgreSQL it uses an `AsyncConnectionPool`, opened on first use; on
    SQLite each call runs in a thread. Close it (or `async with`) when done.
    """

    def __init__(self, runner: AsyncRunner, ctx: ops.Ctx, url: str) -> None:
        self._runner, self._ctx, self.url = runner, ctx, url
        self.dead = AsyncDeadJobs(runner, ctx)

    @property
    def engine(self) -> str:
        return self._ctx.dialect.name

    migrate = _async(ops.migrate)
    schema_version = _async(ops.schema_version)
    enqueue = _async(ops.enqueue)
    enqueue_many = _async(ops.enqueue_many)
    claim = _async(ops.claim)
    renew = _async(ops.renew)
    renew_many = _async(ops.renew_many)
    complete = _async(ops.complete)
    complete_many = _async(ops.complete_many)
    fail = _async(ops.fail)
    snooze = _async(ops.snooze)
    release = _async(ops.release)
    release_many = _async(ops.release_many)
    cancel_held = _async(ops.cancel_held)
    reap_expired = _async(ops.reap_expired)
    reap_expired_by_type = _async(ops.reap_expired_by_type)
    release_worker = _async(ops.release_worker)
    cleanup = _async(ops.cleanup)
    summary = _async(ops.summary)
    get = _async(ops.get)
    cancel = _async(ops.cancel)
    leader_attempt_elect = _async(ops.leader_attempt_elect)
    leader_resign = _async(ops.leader_resign)

    async def close(self) -> None:
        await self._runner.close()

    async def __aenter__(self) -> AsyncQueue:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncQueue({redact_url(self.url)!r})"


def parse_url(url: str) -> tuple[str, str]:
    """("postgres", conninfo) or ("sqlite", path) for a database URL."""
    if not isinstance(url, str) or not url:
        raise InvalidArgument(f"url={url!r}: expected postgresql://… or sqlite:///path")
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme in ("postgresql", "postgres"):
        remember_secrets(url)
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


def _ctx(
    engine: str,
    *,
    clock: Callable[[], Any] | None,
    require_correlation_id: bool,
    retry: Mapping[str, RetryPolicy] | None,
    default_retry: RetryPolicy,
    lease: float,
) -> ops.Ctx:
    if not (isinstance(lease, int | float) and lease > 0):
        raise InvalidArgument(f"lease={lease!r}: expected positive seconds")
    return ops.Ctx(
        dialect=POSTGRES if engine == "postgres" else SQLITE,
        clock=clock,
        require_correlation_id=require_correlation_id,
        retry=dict(retry or {}),
        default_retry=default_retry,
        lease=float(lease),
    )


def connect(
    url: str,
    *,
    pool_size: int = 4,
    clock: Callable[[], Any] | None = None,
    require_correlation_id: bool = False,
    retry: Mapping[str, RetryPolicy] | None = None,
    default_retry: RetryPolicy = DEFAULT_RETRY,
    lease: float = ops.DEFAULT_LEASE,
    busy_timeout: float = 10.0,
) -> Queue:
    """Open a queue on `postgresql://…` or `sqlite:///path.db`.

    `clock` replaces the database clock (tests move time with it); `retry` maps
    job types to their backoff; `lease` is the default claim lease in seconds.
    Call `migrate()` once before first use."""
    engine, target = parse_url(url)
    ctx = _ctx(engine, clock=clock, require_correlation_id=require_correlation_id,
               retry=retry, default_retry=default_retry, lease=lease)  # fmt: skip
    runner: SyncRunner
    if engine == "postgres":
        runner = PostgresRunner(target, min_size=1, max_size=pool_size)
    else:
        runner = SqliteRunner(target, busy_timeout=busy_timeout)
    return Queue(runner, ctx, url)


def connect_async(
    url: str,
    *,
    pool_size: int = 4,
    clock: Callable[[], Any] | None = None,
    require_correlation_id: bool = False,
    retry: Mapping[str, RetryPolicy] | None = None,
    default_retry: RetryPolicy = DEFAULT_RETRY,
    lease: float = ops.DEFAULT_LEASE,
    busy_timeout: float = 10.0,
) -> AsyncQueue:
    """`connect` for asyncio code; see `connect` for the options."""
    engine, target = parse_url(url)
    ctx = _ctx(engine, clock=clock, require_correlation_id=require_correlation_id,
               retry=retry, default_retry=default_retry, lease=lease)  # fmt: skip
    runner: AsyncRunner
    if engine == "postgres":
        runner = AsyncPostgresRunner(target, min_size=1, max_size=pool_size)
    else:
        runner = AsyncSqliteRunner(target, busy_timeout=busy_timeout)
    return AsyncQueue(runner, ctx, url)
