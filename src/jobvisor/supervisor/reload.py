"""SIGHUP: read the configuration again and replace the workers one at a time;
SIGTTIN / SIGTTOU: one worker more / fewer.

For each slot a fresh worker (a *candidate*) is started beside the old one;
only once it is ready does it take the slot, and the old worker retires
(drains and exits, not replaced). A candidate that does not become ready
abandons the reload with the running workers kept, and an invalid
configuration is logged with the old one kept: a bad deploy never takes
down a working service.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable
from typing import TYPE_CHECKING

from .. import systemd
from ..config import Config
from ..log import get_logger
from ..settings import SETTINGS, ConfigError
from .children import Slot, WorkerProcess
from .decisions import ABORT_GRACE, BOOT_GRACE, RestartReason

if TYPE_CHECKING:
    from .arbiter import Supervisor

log = get_logger("supervisor")


class Verdict(enum.StrEnum):
    """What to do with a candidate once it is ready, exited, or late."""

    ADOPT = "adopt"  # it takes the slot; the old worker retires
    SURPLUS = "surplus"  # ready, but its slot is gone: it retires
    ABANDON = "abandon"  # not ready: stop the reload, keep the running workers


def judge_candidate(*, ready: bool, alive: bool, running: bool, slot_kept: bool) -> Verdict:
    if not (ready and alive):
        return Verdict.ABANDON
    if not (running and slot_kept):
        return Verdict.SURPLUS
    return Verdict.ADOPT


def reload_with_same_flags(config: Config) -> Callable[[], Config]:
    """What SIGHUP reads by default: the environment again, with the values that
    came from command-line flags (`config.sources`) still winning over it."""
    values = config.to_env()
    flags = {s.field: values[s.env] for s in SETTINGS if config.sources.get(s.field) == "flag"}
    return lambda: Config.load(overrides=flags)


async def wait_ready(worker: WorkerProcess, *, worker_timeout: float, tick: float) -> bool:
    """Until the worker is ready or has exited (or could not be, in time)."""
    ready = asyncio.create_task(worker.ready_event.wait())
    exited = asyncio.create_task(worker.exited_event.wait())
    timeout = max(worker_timeout, BOOT_GRACE) + ABORT_GRACE + tick * 4
    try:
        await asyncio.wait({ready, exited}, timeout=timeout, return_when="FIRST_COMPLETED")
    finally:
        ready.cancel()
        exited.cancel()
    return worker.ready and worker.alive


async def reload(supervisor: Supervisor, load_config: Callable[[], Config]) -> None:
    """Apply a new configuration to a running supervisor (see the module's note)."""
    try:
        config = load_config()
    except ConfigError as exc:
        log.error("supervisor.reload_failed", error=str(exc), note="keeping the old settings")
        return
    systemd.reloading()
    log.info("supervisor.reloading", workers=config.workers)
    supervisor.apply_config(config)
    if await _replace_workers(supervisor):
        scale(supervisor, config.workers)
        log.info("supervisor.reloaded", workers=len(supervisor.slots))
    if supervisor.running:
        systemd.ready()


async def _replace_workers(supervisor: Supervisor) -> bool:
    """One slot at a time; False if the reload stopped short."""
    for slot in list(supervisor.slots):
        if not supervisor.running:
            return False
        if slot not in supervisor.slots or slot.worker is None:
            continue  # gone, or refilled by manage_workers() with the new settings
        fresh = supervisor.spawn(slot.index)
        if fresh is None:
            log.error("supervisor.reload_failed", error="could not start a worker")
            return False
        supervisor.candidates.add(fresh)
        ready = await wait_ready(
            fresh, worker_timeout=supervisor.config.worker_timeout, tick=supervisor.tick
        )
        supervisor.candidates.discard(fresh)
        verdict = judge_candidate(
            ready=ready,
            alive=fresh.alive,
            running=supervisor.running,
            slot_kept=slot in supervisor.slots,
        )
        if verdict is Verdict.ABANDON:
            if fresh.alive:
                supervisor.retire(fresh, "reload abandoned")
            log.error(
                "supervisor.reload_failed",
                worker_id=fresh.worker_id,
                error=fresh.fatal_error or "the new worker did not become ready",
                note="keeping the running workers",
            )
            return False
        if verdict is Verdict.SURPLUS:
            supervisor.retire(fresh, "no longer needed")
            continue
        old, slot.worker = slot.worker, fresh
        slot.failures = 0
        if old is not None and old.alive:
            supervisor.retire(old, "reload")
            supervisor.metrics.record_restart(RestartReason.RELOAD)
    return True


def scale(supervisor: Supervisor, count: int) -> None:
    """Run `count` workers (at least 1): add empty slots (filled by the main
    loop), or retire the workers of the last ones."""
    count = max(1, count)
    if count == len(supervisor.slots):
        return
    while len(supervisor.slots) < count:
        supervisor.slots.append(Slot(supervisor.next_slot))
        supervisor.next_slot += 1
    while len(supervisor.slots) > count:
        slot = supervisor.slots.pop()
        if slot.worker is not None:
            supervisor.retire(slot.worker, "scaled down")
            slot.worker = None
    log.info("supervisor.scaled", workers=len(supervisor.slots))
    supervisor.wake()
