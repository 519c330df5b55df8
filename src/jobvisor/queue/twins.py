"""A blocking runner on an async queue's database, for the code of a worker
that runs in threads (a thread handler's transactional steps,
`JobContext.transaction_sync`), whose driver calls cannot go through the
event loop's connections.

SQLite's async runner already drives a blocking one, which is returned. On
PostgreSQL a pool of its own is opened at the first call, with the async
pool's size and PgBouncer mode (its commits wait for their WAL flush), kept
for the async runner's life and closed with its queue (`close_twin`).
"""

from __future__ import annotations

import threading
import weakref

from .drivers.postgres.runner import PostgresRunner
from .drivers.postgres.runner_async import AsyncPostgresRunner
from .drivers.sqlite.runner import AsyncSqliteRunner
from .errors import InvalidArgument
from .plan import AsyncRunner, SyncRunner

# Keyed by the runner itself, weakly: an id() could be reused by a later
# runner once this one is gone, and would hand it a pool on another database.
_TWINS: weakref.WeakKeyDictionary[AsyncRunner, PostgresRunner] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def sync_twin(runner: AsyncRunner) -> SyncRunner:
    """A blocking runner on the database `runner` uses."""
    if isinstance(runner, AsyncSqliteRunner):
        return runner.sync
    if not isinstance(runner, AsyncPostgresRunner):
        raise InvalidArgument(f"{runner.target}: no blocking twin for this runner")
    with _LOCK:
        twin = _TWINS.get(runner)
        if twin is None:
            twin = PostgresRunner(
                runner.target,
                min_size=1,
                max_size=runner.pool.max_size,
                # A session without setup is one behind PgBouncer (see `PgSession`).
                pgbouncer=runner.session.setup is None,
            )
            _TWINS[runner] = twin
        return twin


def has_twin(runner: AsyncRunner) -> bool:
    return runner in _TWINS


def close_twin(runner: AsyncRunner) -> None:
    """Close the twin of `runner`, if one was opened."""
    with _LOCK:
        twin = _TWINS.pop(runner, None)
    if twin is not None:
        twin.close()
