"""The supervisor's row in the fleet table (`jobvisor_supervisors`), which the
dashboard reads to show every supervisor on the database, not only its own.

`Heartbeat` is a small service like those of `maintenance`: every
`HEARTBEAT_INTERVAL` seconds `run_once()` writes this supervisor's row
(host, pid, version, whether it leads, its workers), and, on the leader
only, deletes the rows silent for `PRUNE_AFTER` seconds (a host that died
without its clean stop). A clean stop deletes its own row (`forget`). One
small write every few seconds per supervisor: the dashboard itself reads
only when someone looks."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable, Sequence
from typing import Any, Final

from ..log import get_logger
from ..queue.api import AsyncQueue
from ..queue.fleet import SupervisorBeat
from ..queue.internal import dashboard_ops, service_ops
from ..version import __version__
from .children import Slot

HEARTBEAT_INTERVAL: Final = 5.0
PRUNE_AFTER: Final = 300.0  # a row silent this long is deleted by the leader
FORGET_WAIT: Final = 5.0

log = get_logger("supervisor")


def workers_of(slots: Sequence[Slot]) -> list[dict[str, Any]]:
    """The fleet table's view of a supervisor's workers: one per live slot."""
    return [
        {
            "id": slot.worker.worker_id,
            "pid": slot.worker.pid,
            "slot": slot.index,
            "restarts": max(0, slot.starts - 1),
        }
        for slot in slots
        if slot.worker is not None and slot.worker.alive
    ]


class Heartbeat:
    """Writes this supervisor's fleet row; prunes the silent ones while leading."""

    name = "heartbeat"

    def __init__(
        self,
        queue: AsyncQueue,
        *,
        supervisor_id: str,
        leader: Callable[[], bool],
        slots: Callable[[], Sequence[Slot]],
        interval: float = HEARTBEAT_INTERVAL,
    ) -> None:
        self.queue, self.supervisor_id, self.leader, self.slots = (
            queue,
            supervisor_id,
            leader,
            slots,
        )
        self._interval = interval
        self.host = socket.gethostname()

    @property
    def interval(self) -> float:
        return self._interval

    def beat(self) -> SupervisorBeat:
        return SupervisorBeat(
            id=self.supervisor_id,
            host=self.host,
            pid=os.getpid(),
            version=__version__,
            leader=self.leader(),
            workers=workers_of(self.slots()),
        )

    async def run_once(self) -> int:
        """Write the row; while leading, delete the silent rows (how many)."""
        beat = self.beat()
        await service_ops(self.queue).supervisor_heartbeat(beat)
        if not beat.leader:
            return 0
        pruned = await service_ops(self.queue).supervisor_prune(PRUNE_AFTER)
        if pruned:
            log.info("fleet.pruned", count=pruned, silent_for=PRUNE_AFTER)
        return pruned

    async def forget(self) -> None:
        """Delete this supervisor's row (its clean stop); an error is logged."""
        try:
            async with asyncio.timeout(FORGET_WAIT):
                await dashboard_ops(self.queue).supervisor_forget(self.supervisor_id)
        except Exception as exc:
            log.warning("fleet.forget_failed", error=f"{type(exc).__name__}: {exc}")
