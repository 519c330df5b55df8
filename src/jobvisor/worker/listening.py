"""Listening: the loop that turns the database's notices into wake-ups.

On PostgreSQL with LISTEN, a notice of a new job wakes the claim loop (and
may start an express claim, `claiming.jump`), and a notice of a cancel
request stops that job's handler (`running.request_cancel`). SQLite, and
PostgreSQL behind a transaction pooler, have no such loop: the claim loop
polls.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Final

from ..queue.internal import service_ops
from ..queue.notices import NoticeKind
from .claiming import jump
from .running import request_cancel
from .supervision import Loop

if TYPE_CHECKING:
    from .loop import Worker

LISTEN_RETRY_BASE: Final = 0.1
LISTEN_RETRY_CAP: Final = 5.0


async def listen_loop(worker: Worker) -> None:
    """Wake the claim loop on every notice of a new job; a `missed` notice
    (listening began, or began again after the connection broke) is
    followed by a claim too, since notices sent meanwhile are lost. The
    queue reconnects by itself while the database is unreachable; any
    other error reaches this loop's supervision."""
    while True:
        try:
            async for notice in worker.queue.notifications(worker.queues or None):
                if notice.kind == NoticeKind.CANCEL:
                    if notice.id is not None:
                        request_cancel(worker, notice.id)
                    continue
                if notice.kind == NoticeKind.MISSED:
                    worker._recovered(Loop.LISTEN)
                elif notice.kind == NoticeKind.DONE:
                    continue  # a job ended: no new work
                elif notice.priority is not None:
                    jump(worker, notice.priority)
                if notice.bucket is not None:  # Citus mode: claim where the job is
                    service_ops(worker.queue).heard_bucket(notice.bucket)
                worker._wake.set()
        except Exception as exc:
            delay = worker._retry_in(Loop.LISTEN, exc, base=LISTEN_RETRY_BASE, cap=LISTEN_RETRY_CAP)
            worker._wake.set()  # poll at once: the claim retries on its own
            await asyncio.sleep(delay)
