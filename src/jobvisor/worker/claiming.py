"""Claiming: the claim loop and express claims.

The claim loop claims as many jobs as there are free slots, in one
statement, and starts them (`running.start_all`). It sleeps when the queue is
empty (until a PostgreSQL NOTIFY, or an adaptive poll from `MIN_POLL` up to
the worker's longest poll) or when every slot is busy.

A job that jumps the queue (a higher priority than the jobs of the last full
claim) does not wait for the next turn of a busy claim loop: its notice
starts an express claim of one job of a higher priority at once, into the
slot the claim loop of a worker with many slots leaves to it
(`EXPRESS_MIN_CONCURRENCY`).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Final

from ..backoff import backoff
from ..errortext import error_text
from ..log import get_logger
from ..queue.faults import Fault, classify
from .running import prepare, run_job, start_all
from .settling import release_unstarted
from .supervision import Loop

if TYPE_CHECKING:
    from .loop import Worker

log = get_logger("worker")

MIN_POLL: Final = 0.005  # the first poll after work was found

# The claim loop of a worker with at least this many slots leaves one of
# them (at most 1%) to express claims, for a job that jumps the queue while
# the worker is busy. A new job's notice says its priority: this needs LISTEN.
EXPRESS_MIN_CONCURRENCY: Final = 100


async def claim_loop(worker: Worker) -> None:
    empty = 0  # claims in a row that found nothing
    queues = list(worker.queues) or None
    if worker.job_types == []:  # no handler: nothing to claim (an empty filter means any)
        log.warning("worker.no_handlers", worker_id=worker.worker_id)
        await worker._stop_requested.wait()
        return
    while not worker.stopping:
        free = worker.concurrency - len(worker._running) - kept_for_express(worker)
        if free <= 0:
            worker._slot_free.clear()
            await worker._slot_free.wait()
            continue
        worker._wake.clear()
        worker._claiming = free
        try:
            jobs = await worker.queue.claim(
                worker.worker_id,
                queues=queues,
                job_types=worker.job_types,
                limit=free,
                lease=worker.lease,
            )
        except Exception as exc:
            await wait_wake(worker, worker._retry_in(Loop.CLAIM, exc))
            continue
        finally:
            worker._claiming = 0
        if worker._failing:
            worker._recovered(Loop.CLAIM)
        worker.metrics.claimed(len(jobs))
        if worker.stopping:  # claimed while the stop arrived: give them back
            release_unstarted(worker, jobs)
            return
        worker._busy_with = min(j.priority for j in jobs) if len(jobs) == free else None
        await start_all(worker, jobs)
        if len(jobs) == free:
            empty = 0
            await asyncio.sleep(0)  # let the loop breathe between full batches
            continue
        empty = 0 if jobs else empty + 1
        # Doubled per empty claim, up to the longest poll.
        idle_wait = (
            backoff(empty + 1, base=MIN_POLL, cap=worker._max_poll, jitter=0.0)
            if empty
            else MIN_POLL
        )
        await wait_wake(worker, idle_wait)


def kept_for_express(worker: Worker) -> int:
    """The slots the claim loop leaves to express claims."""
    return 1 if worker._express_on else 0


def jump(worker: Worker, priority: int) -> None:
    """A job of `priority` is new: claim it at once if it jumps the queue
    of a busy worker."""
    busy_with = worker._busy_with
    if not worker._express_on or busy_with is None or priority <= busy_with or worker.stopping:
        return
    if worker._express is not None and not worker._express.done():
        worker._express_again = True
        return
    worker._express = asyncio.create_task(express_claim(worker, busy_with), name="express")


async def express_claim(worker: Worker, above: int) -> None:
    """Claim jobs of a priority above `above` one at a time while a slot
    is free and notices keep coming. An error only costs the express:
    the claim loop takes the job in its turn (and handles the error)."""
    while not worker.stopping and len(worker._running) + worker._claiming < worker.concurrency:
        worker._express_again = False
        try:
            jobs = await worker.queue.claim(
                worker.worker_id,
                queues=list(worker.queues) or None,
                job_types=worker.job_types,
                limit=1,
                lease=worker.lease,
                above_priority=above,
            )
        except Exception as exc:
            if classify(exc) is Fault.PERMANENT:
                worker._express_on = False
                log.error("worker.express_off", worker_id=worker.worker_id, error=error_text(exc))
            return
        worker.metrics.claimed(len(jobs))
        if worker.stopping:  # claimed while the stop arrived: give them back
            release_unstarted(worker, jobs)
            return
        if not jobs:
            if worker._express_again:
                continue
            return
        # This task runs the job it claimed, at once, and a new one goes
        # on claiming (the next may be just as urgent).
        running = prepare(worker, jobs[0])
        worker._express = asyncio.create_task(express_claim(worker, above), name="express")
        if running is not None:
            running.task = asyncio.current_task()
            await run_job(worker, running)
        return


async def wait_wake(worker: Worker, seconds: float) -> None:
    if worker._wake.is_set():
        return
    try:
        async with asyncio.timeout(seconds):
            await worker._wake.wait()
    except TimeoutError:
        pass
