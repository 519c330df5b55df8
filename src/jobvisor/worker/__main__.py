"""`python -m jobvisor.worker`: one worker process.

The supervisor starts it (see `protocol`), but it also runs standalone:

    JOBVISOR_DATABASE_URL=postgresql://… JOBVISOR_APP=myapp.jobs:registry \\
        python -m jobvisor.worker

Exit codes (`ExitCode`): 0 after a clean stop; 78 for an invalid setting, a
database that refuses the connection (wrong password, unknown database) or
has no current schema; 69 when the database cannot be reached at boot; 3 when
the app cannot be imported or the boot fails otherwise; 1 when the database
stayed unreachable at the end and outcomes were left unwritten (the reaper
takes those jobs back when their leases expire), or when one of its loops
met an error that will not pass (see `loop`).

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
import time

import uvloop

from ..backoff import backoff
from ..config import Config, load_or_exit
from ..exitcodes import ExitCode
from ..log import get_logger, setup_logging
from ..queue.api import AsyncQueue, connect_async
from ..queue.errors import DatabaseRefused, DatabaseUnavailable, InvalidArgument, JobvisorError
from ..queue.internal import service_ops
from ..schedules import InvalidSchedule
from .loop import Worker, auto_concurrency
from .protocol import (
    EXIT_BOOT_FAILED,
    EXIT_OK,
    WORKER_ID_ENV,
    ControlChannel,
    new_worker_id,
)
from .registry import AppError, InvalidLimit, Registry, load_app

log = get_logger("worker")

BOOT_TIMEOUT = 15.0  # seconds to reach the database before giving up at boot
EXIT_UNCLEAN = 1


async def boot(queue: AsyncQueue) -> tuple[ExitCode, str] | None:
    """Wait for the database (up to `BOOT_TIMEOUT`) and check its schema.
    None when the worker can start, else its exit code and why not."""
    deadline = time.monotonic() + BOOT_TIMEOUT
    failures = 0
    while True:
        try:
            async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                state = await queue.check()
            break
        except (DatabaseRefused, InvalidArgument) as exc:
            return ExitCode.CONFIG, f"cannot use the database: {exc}"
        except (DatabaseUnavailable, TimeoutError) as exc:
            failures += 1
            delay = backoff(failures, base=0.1, cap=2.0)
            if time.monotonic() + delay >= deadline:
                why = str(exc) or f"no answer within {BOOT_TIMEOUT:g}s"
                return ExitCode.UNAVAILABLE, f"cannot reach the database: {why}"
            await asyncio.sleep(delay)
        except JobvisorError as exc:
            return ExitCode.BOOT_FAILED, f"cannot use the database: {exc}"
    if not state.migrated:
        return ExitCode.CONFIG, (
            f"the database schema is at version {state.schema_version}, this code needs "
            f"{state.latest_version}: run `jobvisor migrate`"
        )
    return None


async def serve(config: Config, registry: Registry, channel: ControlChannel, worker_id: str) -> int:
    """Open this process's own queue, say ready, run until stopped."""
    try:
        # The worker's commits do not wait for their WAL flush: each of its
        # writes is a step of an at-least-once delivery (see `connect`).
        queue = connect_async(
            config.database_url,
            pool_size=config.pool_size,
            lease=config.lease,
            retry=registry.retry_policies(),
            max_result_bytes=config.result_max_bytes,
            synchronous_commit=False,
            **config.connection(),
        )
    except InvalidArgument as exc:
        return _boot_failed(channel, worker_id, ExitCode.CONFIG, f"cannot use the database: {exc}")
    try:
        refused = await boot(queue)
        if refused is not None:
            return _boot_failed(channel, worker_id, *refused)
        try:
            await _write_limits(queue, registry, worker_id)
        except DatabaseUnavailable as exc:
            return _boot_failed(channel, worker_id, ExitCode.UNAVAILABLE, f"limits: {exc}")
        except JobvisorError as exc:
            return _boot_failed(channel, worker_id, ExitCode.BOOT_FAILED, f"limits: {exc}")
        worker = Worker(
            queue,
            registry,
            worker_id=worker_id,
            concurrency=config.concurrency or auto_concurrency(registry),
            queues=config.queues,
            lease=config.lease,
            poll_interval=config.poll_interval,
            shutdown_timeout=config.shutdown_timeout,
            cancel_grace=config.cancel_grace,
            channel=channel,
        )
        loop = asyncio.get_running_loop()
        drains = 0

        def on_drain_signal() -> None:
            nonlocal drains
            drains += 1
            worker.stop(fast=drains > 1)

        loop.add_signal_handler(signal.SIGTERM, on_drain_signal)
        loop.add_signal_handler(signal.SIGINT, on_drain_signal)
        loop.add_signal_handler(signal.SIGQUIT, lambda: worker.stop(fast=True))
        channel.send({"t": "ready", "schedules": [s.message() for s in registry.schedules]})
        await worker.run()
        if worker.threads_busy:
            log.warning(
                "worker.abandoned_threads", worker_id=worker_id, threads=worker.threads_busy
            )
        return EXIT_OK if worker.clean else EXIT_UNCLEAN
    finally:
        await queue.close()


async def _write_limits(queue: AsyncQueue, registry: Registry, worker_id: str) -> None:
    """Write the registry's declared limits (the code is their source of
    truth), before the first claim: every host then obeys the same numbers."""
    changed = await service_ops(queue).limits_sync(registry.limits, job_types=registry.job_types)
    if changed:
        log.info(
            "worker.limits_written",
            worker_id=worker_id,
            changed=changed,
            limits=",".join(f"{lim.name}: {lim.describe()}" for lim in registry.limits),
        )


def _boot_failed(channel: ControlChannel, worker_id: str, code: ExitCode, text: str) -> int:
    log.error("worker.boot_failed", worker_id=worker_id, error=text, exit_code=int(code))
    channel.send({"t": "fatal", "error": text})
    return int(code)


def main() -> int:
    config = load_or_exit("jobvisor worker")
    setup_logging(config.log_format, config.log_level)
    faulthandler.enable()
    channel = ControlChannel.from_env()
    worker_id = os.environ.get(WORKER_ID_ENV) or new_worker_id()
    try:
        registry = load_app(config.app)
    except AppError as exc:
        # A refused schedule or limit is a configuration error: `jobvisor run` exits 78.
        refused = isinstance(exc.__cause__, InvalidSchedule | InvalidLimit)
        failed = ExitCode.CONFIG if refused else EXIT_BOOT_FAILED
        log.error("worker.boot_failed", worker_id=worker_id, error=str(exc), exit_code=int(failed))
        channel.send({"t": "fatal", "error": str(exc)})
        return int(failed)
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
