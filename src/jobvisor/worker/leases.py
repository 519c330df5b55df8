"""Leases and the parent: the renew loop and the heartbeat loop.

The renew loop extends every held lease (running, or finished but not yet
written) in one `renew_many` per half lease, writing the progress handlers
reported since. A job whose lease was lost is cancelled, and whatever its
handler returns is dropped: the job belongs to someone else now. A cancel
request comes back with every renewal, on either engine.

The heartbeat loop tells the parent the loop is turning and which loops are
failing, reports metrics, and stops the worker when the parent is gone.
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING

from ..log import get_logger
from ..queue.internal import service_ops
from .protocol import HEARTBEAT_INTERVAL
from .running import lose, request_cancel
from .supervision import RETRY_BASE, Loop

if TYPE_CHECKING:
    from .loop import Worker

log = get_logger("worker")


async def renew_loop(worker: Worker) -> None:
    interval = worker.lease / 2
    cap = max(RETRY_BASE, interval / 4)
    delay = interval
    while True:
        await asyncio.sleep(delay)
        held = list(worker._held.values())
        delay = interval
        if not held:
            if worker._failing:  # nothing left to renew: nothing failing either
                worker._recovered(Loop.RENEW)
            continue
        progress = None
        if worker._progress:
            progress, worker._progress = worker._progress, {}
        try:
            renewal = await service_ops(worker.queue).renew_held(
                held, lease=worker.lease, progress=progress
            )
        except Exception as exc:
            if progress:  # written next time, unless newer progress came in since
                worker._progress = {**progress, **worker._progress}
            delay = worker._retry_in(Loop.RENEW, exc, cap=cap, jobs=len(held))
            continue
        if worker._failing:
            worker._recovered(Loop.RENEW)
        for job in renewal.lost:
            lose(worker, job)
        for job_id in renewal.cancel_requested:
            request_cancel(worker, job_id)


async def heartbeat_loop(worker: Worker) -> None:
    watching = worker.channel.fd is not None
    while True:
        unhealthy = worker.unhealthy
        worker.channel.send({"t": "hb", "unhealthy": unhealthy} if unhealthy else {"t": "hb"})
        for message in worker.metrics.drain():
            worker.channel.send(message)
        parent_gone = worker._parent_pid is not None and os.getppid() != worker._parent_pid
        if (parent_gone or (watching and worker.channel.fd is None)) and not worker.stopping:
            log.warning(
                "worker.parent_gone", worker_id=worker.worker_id, parent_pid=worker._parent_pid
            )
            worker.stop()
        await asyncio.sleep(HEARTBEAT_INTERVAL)
