"""Notices on SQLite: another connection's commits, seen by polling the file."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncGenerator, Sequence

from ....backoff import backoff
from ...errors import JobvisorError
from ...notices import MISSED, SQLITE_MAX_POLL, SQLITE_MIN_POLL, Notice, NoticeKind, _pause
from .errors import wrap_sqlite
from .runner import SqliteRunner


async def poll_sqlite(path: str, queues: Sequence[str] | None) -> AsyncGenerator[Notice, None]:
    """A `job` notice (queue None) whenever another connection committed to
    the file (`PRAGMA data_version`), polled every 5 ms just after a change and
    backing off to 100 ms while nothing happens; a `missed` when polling
    begins, and again after an error."""
    runner = SqliteRunner(path)
    conn: sqlite3.Connection | None = None
    seen: int | None = None
    quiet = 0  # polls in a row that saw no change
    failures = 0
    try:
        while True:
            try:
                if conn is None:
                    conn = await asyncio.to_thread(runner.connect)
                (version,) = conn.execute("PRAGMA data_version").fetchone()
            except (sqlite3.Error, JobvisorError) as exc:
                if conn is not None:
                    conn.close()
                    conn = None
                failures += 1
                error = wrap_sqlite(exc) if isinstance(exc, sqlite3.Error) else exc
                await _pause("queue.poll_failed", error, failures)
                continue
            if failures or seen is None:
                failures = 0
                yield MISSED
            if seen is not None and version != seen:
                quiet = 0
                seen = version
                notice = Notice(NoticeKind.JOB)
                if notice.concerns(queues):
                    yield notice
            else:
                seen = version
                quiet += 1
            # Doubled per quiet poll, from the shortest again after a change.
            await asyncio.sleep(
                backoff(quiet + 1, base=SQLITE_MIN_POLL, cap=SQLITE_MAX_POLL, jitter=0.0)
            )
    finally:
        if conn is not None:
            conn.close()
