"""How the supervisor starts: the first log lines, the HTTP endpoints, and
the wait for the database.

The endpoints come first, so an orchestrator sees a live process whose
`/readyz` answers 503 while the database is away; the workers start only
once the database answers (and is migrated), since a worker that cannot
reach it at boot could only exit and be restarted."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

from .. import systemd
from ..backoff import backoff
from ..config import Config, admin_token
from ..errortext import one_line
from ..exitcodes import ExitCode
from ..http import HttpServer, start_http_server
from ..log import get_logger
from ..metrics import Metrics
from ..queue.api import AsyncQueue
from ..queue.errors import DatabaseRefused, InvalidArgument
from ..redact import redact_url
from .services import DatabaseWatch, may_pass

MIGRATE_TIMEOUT: Final = 60.0
WAIT_BASE: Final = 0.2  # waiting for the database: first pause, doubled per try
WAIT_CAP: Final = 5.0
EXTEND_MARGIN: Final = 60.0  # systemd's start timeout, pushed this far past each pause

T = TypeVar("T")

log = get_logger("supervisor")


def log_start(config: Config, *, supervisor_id: str, subreaper: bool) -> None:
    log.info(
        "supervisor.starting",
        supervisor_id=supervisor_id,
        pid=os.getpid(),
        workers=config.workers,
        app=config.app,
        database=redact_url(config.database_url),
        subreaper=subreaper,
    )
    if config.sources.get("app", "default") == "default":
        log.info(
            "supervisor.example_app",
            app=config.app,
            detail="JOBVISOR_APP is not set: running the bundled example app",
        )


async def serve_http(
    config: Config,
    *,
    health: Callable[[], tuple[bool, str]],
    ready: Callable[[], tuple[bool, str]],
    metrics: Metrics,
    dashboard_queue: AsyncQueue | None = None,
) -> HttpServer | None:
    """The endpoints on `config.http_addr` (and the dashboard over
    `dashboard_queue`, when given); None if the address cannot be bound."""
    dashboard = None
    if dashboard_queue is not None:
        from ..web import serve  # noqa: PLC0415 - the templates load only when it is on

        dashboard = serve.dashboard(dashboard_queue, config)
    try:
        server = await start_http_server(
            config.http_addr,
            health=health,
            ready=ready,
            metrics=metrics.exposition,
            dashboard=dashboard,
        )
    except (OSError, ValueError) as exc:
        log.error("http.failed", addr=config.http_addr, error=one_line(exc))
        return None
    if dashboard_queue is not None:
        serve.warn_if_exposed(*server.address, read_only=admin_token() is None)
    return server


async def _migrated(queue: AsyncQueue) -> bool:
    async with asyncio.timeout(MIGRATE_TIMEOUT):
        applied = await queue.migrate()
    if applied:
        log.info("database.migrated", versions=",".join(map(str, applied)))
    return True


async def wait_for_database(
    queue: AsyncQueue,
    watch: DatabaseWatch,
    *,
    run_migrations: bool,
    database_url: str,
    on_wait: Callable[[], None],
) -> ExitCode:
    """Until the database answers (and is migrated, with `run_migrations`),
    retrying with backoff: `ExitCode.OK` then. On an error a retry cannot fix,
    the code to exit with: `ExitCode.CONFIG` when the server refused us (a
    wrong password, an unknown role or database: the configuration is wrong),
    `ExitCode.BOOT_FAILED` otherwise. `on_wait` is called before each pause
    (the supervisor counts it as a turn of its loop)."""
    attempt = 0
    while True:
        try:
            # A ping first: it gives up within seconds, where a migration
            # would wait for the pool's whole connect timeout.
            if await watch.ping() and (not run_migrations or await _migrated(queue)):
                return ExitCode.OK
            error = "the database did not answer"
        except Exception as exc:
            if not may_pass(exc):
                log.error(
                    "supervisor.database_failed",
                    database=redact_url(database_url),
                    error=one_line(exc),
                )
                refused = isinstance(exc, DatabaseRefused | InvalidArgument)
                return ExitCode.CONFIG if refused else ExitCode.BOOT_FAILED
            error = one_line(exc)
        attempt += 1
        if attempt == 1:
            log.warning(
                "supervisor.waiting_for_database",
                error=error,
                note="the workers start once it answers",
            )
        on_wait()
        pause = backoff(attempt, base=WAIT_BASE, cap=WAIT_CAP)
        systemd.extend_start(pause + EXTEND_MARGIN)  # still starting, not stuck
        await asyncio.sleep(pause)


async def until_stopped(
    wakeup: asyncio.Event, stop_requested: Callable[[], bool], coro: Awaitable[T]
) -> T | None:
    """Await `coro` unless a stop comes first (then None): `stop_requested()`
    is asked each time `wakeup` is set."""
    task = asyncio.ensure_future(coro)
    while not task.done():
        waiter = asyncio.create_task(wakeup.wait())
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        wakeup.clear()
        if stop_requested():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
            return None
    return task.result()
