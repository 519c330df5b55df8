"""What the supervisor's `/healthz` and `/readyz` answer, read from its state.

The rules themselves are the pure functions `decisions.health` and
`decisions.readiness`; this module gathers their inputs from a running
`Supervisor`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from . import decisions, startup

if TYPE_CHECKING:
    from .arbiter import Supervisor


def health(supervisor: Supervisor, *, tick: float) -> tuple[bool, str]:
    """Liveness: the main loop turns (at least every `tick` seconds), workers
    live and none reports a failing loop (or start-up waits for the database)."""
    waiting = supervisor.waiting_for_database
    slots = supervisor.slots
    alive = [s.worker for s in slots if s.worker is not None and s.worker.alive]
    now = time.monotonic()
    cannot_boot = [
        f"slot {s.index} ({s.cannot_boot}, for {now - (s.cannot_boot_since or now):.0f}s)"
        for s in slots
        if s.cannot_boot is not None
    ]
    return decisions.health(
        state=supervisor.state.value,
        lag=time.monotonic() - supervisor.last_tick,
        max_lag=tick * 10 + (startup.WAIT_CAP if waiting else 0.0),
        alive=len(alive),
        slots=len(slots),
        waiting=waiting,
        failing=[f"{w.worker_id} {','.join(w.unhealthy)}" for w in alive if w.unhealthy],
        cannot_boot=cannot_boot,
    )


def readiness(supervisor: Supervisor) -> tuple[bool, str]:
    """Readiness: the database answers within seconds (`services.DatabaseWatch`)
    and a worker is ready; a transaction holding back the oldest xmin
    (`services.XminWatch`) is reported, not counted against it."""
    database, xmin = supervisor.database, supervisor.xmin
    return decisions.readiness(
        running=supervisor.running,
        database_up=database is not None and database.up,
        ready=sum(1 for s in supervisor.slots if s.worker is not None and s.worker.ready),
        warning=xmin.warning if xmin is not None else None,
    )
