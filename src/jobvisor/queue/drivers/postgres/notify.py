"""Notices on PostgreSQL: LISTEN on a connection of its own."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence

import psycopg

from ....errortext import driver_text
from ...errors import DatabaseRefused
from ...faults import Fault, classify
from ...notices import LISTEN_CONNECT_TIMEOUT, MISSED, Notice, _pause, log
from . import sql as sql_postgres
from .errors import refused_by_server, wrap_postgres


async def listen_postgres(
    conninfo: str, queues: Sequence[str] | None
) -> AsyncGenerator[Notice, None]:
    """LISTEN on a connection of its own; a `missed` each time listening
    begins (the first time too: what happened before was not heard).

    While the database cannot be reached (`faults.Fault.UNREACHABLE`) the
    connection is retried with backoff for as long as the caller iterates;
    any other error is raised, wrapped (`DatabaseRefused` when the server
    refused the first connection: a wrong password does not pass with time)."""
    failures = 0
    listened = False
    while True:
        try:
            conn = await psycopg.AsyncConnection.connect(
                conninfo, autocommit=True, connect_timeout=int(LISTEN_CONNECT_TIMEOUT)
            )
        except psycopg.Error as exc:
            if not listened and refused_by_server(exc):
                raise DatabaseRefused(
                    f"the server refused the connection ({driver_text(exc)})"
                ) from exc
            if classify(exc) is not Fault.UNREACHABLE:
                raise wrap_postgres(exc) from exc
            failures += 1
            await _pause("queue.listen_failed", exc, failures)
            continue
        try:
            async with conn:
                await conn.execute(sql_postgres.LISTEN)
                if failures:
                    log.info("queue.listen_restored")
                yield MISSED
                failures, listened = 0, True
                async for notify in conn.notifies():
                    notice = Notice.parse(notify.payload)
                    if notice.concerns(queues):
                        yield notice
        except psycopg.Error as exc:
            if classify(exc) is not Fault.UNREACHABLE:
                raise wrap_postgres(exc) from exc
            failures += 1
            await _pause("queue.listen_lost", exc, failures)
