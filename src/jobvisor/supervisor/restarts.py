"""What the supervisor does after a worker exits unexpectedly: stop on a
deploy that cannot boot, retry a slot whose replacement cannot boot, charge
a crash to the restart budget (or to the jobs it held), and schedule the
slot's restart with backoff. Functions of the `Supervisor`, which carries
them out from its loop; the rules themselves are `decisions`."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from ..exitcodes import ExitCode
from ..log import get_logger
from . import decisions
from .children import Slot, WorkerProcess
from .decisions import Charge, ExitKind, StopMode

if TYPE_CHECKING:
    from .arbiter import Supervisor

log = get_logger("supervisor")


def after_exit(
    sup: Supervisor,
    worker: WorkerProcess,
    slot: Slot,
    kind: ExitKind,
    requeue: asyncio.Task[int | None],
) -> None:
    """Carry out what an unexpected exit means (`decisions.classify_exit`)."""
    if kind is ExitKind.BOOT_FAILED:
        assert worker.exit_code is not None
        log.error(
            "supervisor.worker_cannot_boot",
            worker_id=worker.worker_id,
            exit_code=worker.exit_code,
            error=worker.fatal_error,
            note="stopping instead of restarting it",
        )
        sup.stop(StopMode.FAST, exit_code=ExitCode(worker.exit_code))
        return
    if kind is ExitKind.CANNOT_BOOT:
        cannot_boot(sup, worker, slot)
        return
    if decisions.resets_backoff(ready_at=worker.ready_at, now=time.monotonic()):
        slot.failures = 0
    if kind is ExitKind.UNAVAILABLE:
        log.warning(
            "worker.database_unavailable",
            worker_id=worker.worker_id,
            note="restarting it with backoff until the database answers",
        )
        schedule_restart(slot, unavailable=True)
    elif kind is ExitKind.CRASH:
        crashed(sup, slot)
    else:
        # Booted, then died: charged to the service only if it held no job
        # (known once requeue_crashed has answered; a failed requeue counts).
        schedule_restart(slot)
        requeue.add_done_callback(lambda task: charge_unless_jobs(sup, worker, task))


def cannot_boot(sup: Supervisor, worker: WorkerProcess, slot: Slot) -> None:
    """A replacement cannot boot after a good start: retry the slot with
    backoff, charge nothing, keep every other worker."""
    assert worker.exit_code is not None
    if slot.cannot_boot_since is None:
        slot.cannot_boot_since = time.monotonic()
    slot.cannot_boot = decisions.describe_exit(worker.exit_code)
    log.error(
        "supervisor.worker_cannot_boot",
        worker_id=worker.worker_id,
        slot=slot.index,
        exit_code=worker.exit_code,
        error=worker.fatal_error,
        note="keeping the running workers; retrying this slot with backoff",
    )
    schedule_restart(slot)


def booted(sup: Supervisor, worker: WorkerProcess) -> None:
    """A worker is ready: its slot, if it could not boot, is healthy again
    (a reload's candidate for the slot counts: the app boots now)."""
    slot = next((s for s in sup.slots if s.index == worker.slot), None)
    if slot is None or slot.cannot_boot is None:
        return
    log.info("supervisor.slot_recovered", slot=slot.index, worker_id=worker.worker_id)
    slot.cannot_boot = slot.cannot_boot_since = None


def charge_unless_jobs(
    sup: Supervisor, worker: WorkerProcess, task: asyncio.Task[int | None]
) -> None:
    held = None if task.cancelled() or task.exception() else task.result()
    if decisions.charge_after_requeue(held) is Charge.JOBS:
        log.info(
            "worker.crash_charged_to_jobs",
            worker_id=worker.worker_id,
            jobs=held,
            note="their attempts are counted; max_restarts is not",
        )
        return
    if sup.running:
        charge_crash(sup)


def crashed(sup: Supervisor, slot: Slot) -> None:
    """Count an unexpected exit (or failed spawn) and plan the slot's restart,
    unless there have been too many."""
    if charge_crash(sup):
        schedule_restart(slot)


def charge_crash(sup: Supervisor) -> bool:
    """Count one crash against `max_restarts`; False (and a fast stop with
    `ExitCode.CRASH_LOOP`) when that makes too many within the window."""
    if sup._budget.charge(time.monotonic()):
        return True
    log.error(
        "supervisor.crash_loop",
        crashes=len(sup._budget),
        window=sup.config.restart_window,
        max_restarts=sup.config.max_restarts,
    )
    sup.stop(StopMode.FAST, exit_code=ExitCode.CRASH_LOOP)
    return False


def schedule_restart(slot: Slot, *, unavailable: bool = False) -> None:
    """Respawn the slot after its backoff (`decisions.restart_delay`)."""
    slot.failures += 1
    delay = decisions.restart_delay(slot.failures, unavailable=unavailable)
    slot.respawn_at = time.monotonic() + delay
    log.info("worker.restart_scheduled", slot=slot.index, delay=round(delay, 3))
