"""`python -m jobvisor.worker`: one worker process.

The supervisor starts it (see `protocol`), but it also runs standalone:

    JOBVISOR_DATABASE_URL=postgresql://… JOBVISOR_APP=myapp.jobs:registry \\
        python -m jobvisor.worker

Exit codes: 0 after a clean stop; 78 for an invalid setting; 3 when the app
cannot be imported or the database cannot be reached at boot; 1 when the
database stayed unreachable at the end and outcomes were left unwritten (the
reaper takes those jobs back when their leases expire), or when one of its
loops met an error that will not pass (see `loop`).

Signals: SIGTERM or SIGINT drains (a second one cuts the drain short);
SIGQUIT releases running jobs at once. SIGABRT dumps every thread's stack to
stderr (faulthandler) before the process dies.
"""

from __future__ import annotations

import asyncio
import faulthandler
import logging
import os
import signal
import sys
import urllib.parse
import uuid

import uvloop

from ..config import Config, load_or_exit
from ..log import get_logger, setup_logging
from ..queue.api import connect_async, parse_url
from ..queue.errors import JobNotFound
from .loop import DB_ERRORS, Worker
from .protocol import (
    EXIT_BOOT_FAILED,
    EXIT_OK,
    WORKER_ID_ENV,
    ControlChannel,
    new_worker_id,
)
from .registry import AppError, Registry, load_app

log = get_logger("worker")

BOOT_TIMEOUT = 15.0  # seconds to reach the database before giving up at boot
EXIT_UNCLEAN = 1


def worker_database_url(url: str) -> str:
    """The URL the worker's own pool uses. On PostgreSQL its sessions commit
    asynchronously (`synchronous_commit=off`): a claim or a completion then
    does not wait for its WAL flush, which is most of the cost of a claim on a
    busy disk. Durability is not at stake: every write of a worker is a step
    of an at-least-once delivery, so the few hundred milliseconds of them a
    PostgreSQL crash can forget resolve to a job that runs again (its lease
    expires and the reaper takes it back), never to a lost job. Enqueues are
    made by the application's own queue, which keeps its settings."""
    if parse_url(url)[0] != "postgres":
        return url
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    options = [v for k, v in query if k == "options"]
    rest = [(k, v) for k, v in query if k != "options"]
    merged = " ".join([*options, "-c synchronous_commit=off"])
    return urllib.parse.urlunsplit(
        parts._replace(
            query=urllib.parse.urlencode([*rest, ("options", merged)], quote_via=urllib.parse.quote)
        )
    )


async def serve(config: Config, registry: Registry, channel: ControlChannel, worker_id: str) -> int:
    """Open this process's own queue, say ready, run until stopped."""
    queue = connect_async(
        worker_database_url(config.database_url), pool_size=config.pool_size, lease=config.lease,
        retry=registry.retry_policies(),
    )  # fmt: skip
    try:
        try:
            # One cheap read proves the database answers and is migrated.
            async with asyncio.timeout(BOOT_TIMEOUT):
                await queue.get(uuid.UUID(int=0))
        except JobNotFound:
            pass
        except (TimeoutError, *DB_ERRORS) as exc:
            text = f"cannot use the database: {type(exc).__name__}: {exc}".strip()
            log.error("worker.boot_failed", worker_id=worker_id, error=text)
            channel.send({"t": "fatal", "error": text})
            return EXIT_BOOT_FAILED
        except Exception as exc:  # e.g. the schema is missing: not migrated
            text = f"cannot use the database: {type(exc).__name__}: {exc} (run the migrations?)"
            log.error("worker.boot_failed", worker_id=worker_id, error=text)
            channel.send({"t": "fatal", "error": text})
            return EXIT_BOOT_FAILED
        worker = Worker(
            queue, registry, worker_id=worker_id, concurrency=config.concurrency,
            queues=config.queues, lease=config.lease, poll_interval=config.poll_interval,
            shutdown_timeout=config.shutdown_timeout, channel=channel,
        )  # fmt: skip
        loop = asyncio.get_running_loop()
        drains = 0

        def on_drain_signal() -> None:
            nonlocal drains
            drains += 1
            worker.stop(fast=drains > 1)

        loop.add_signal_handler(signal.SIGTERM, on_drain_signal)
        loop.add_signal_handler(signal.SIGINT, on_drain_signal)
        loop.add_signal_handler(signal.SIGQUIT, lambda: worker.stop(fast=True))
        channel.send({"t": "ready"})
        await worker.run()
        if worker.threads_busy:
            log.warning("worker.abandoned_threads", worker_id=worker_id,
                        threads=worker.threads_busy)  # fmt: skip
        return EXIT_OK if worker.clean else EXIT_UNCLEAN
    finally:
        await queue.close()


def main() -> int:
    config = load_or_exit("jobvisor worker")
    setup_logging(config.log_format, config.log_level)
    faulthandler.enable()
    channel = ControlChannel.from_env()
    worker_id = os.environ.get(WORKER_ID_ENV) or new_worker_id()
    try:
        registry = load_app(config.app)
    except AppError as exc:
        log.error("worker.boot_failed", worker_id=worker_id, error=str(exc))
        channel.send({"t": "fatal", "error": str(exc)})
        return EXIT_BOOT_FAILED
    code: int = uvloop.run(serve(config, registry, channel, worker_id))
    return code


if __name__ == "__main__":
    exit_code = main()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    # A handler thread abandoned after its timeout or the drain must not keep
    # the process alive: its job was already settled.
    os._exit(exit_code)
