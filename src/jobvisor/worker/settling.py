"""Settling: the buffered outcomes of jobs and the flush loop that writes them.

A job task never writes to the database itself: it records its outcome in
the worker's buffers. The flush loop writes them: all completions in one
`complete_many`, all releases in one `release_many`, the rarer fails,
snoozes and cancels each in its own guarded statement, concurrently. What
finishes while a flush is in flight waits for the next flush, so batches
grow with the load and a quiet worker writes at once. A database error puts
the batch back and retries with backoff: an outcome is never dropped. A job
whose lease was lost meanwhile is settled lost: its outcome is dropped.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Literal

from ..errortext import error_text
from ..log import get_logger
from ..outcomes import Outcome
from ..queue.errors import LeaseLost
from ..queue.faults import Fault, classify
from ..queue.model import Job, JobStatus
from .supervision import Loop

if TYPE_CHECKING:
    from .loop import Worker

log = get_logger("worker")

# What a job task hands to the flush: (kind, job, argument); completions and
# releases go to their own buffers, the rest are written one by one.
WriteKind = Literal["complete", "fail", "snooze", "cancel", "park"]
Write = tuple[WriteKind, Job, Any]


def release_unstarted(worker: Worker, jobs: list[Job]) -> None:
    for job in jobs:
        worker._held[job.id] = job
        worker._released.append(job)
    worker._flush_wanted.set()


async def flush_loop(worker: Worker) -> None:
    while True:
        if worker._closing and not (worker._completed or worker._released or worker._writes):
            return
        await worker._flush_wanted.wait()
        worker._flush_wanted.clear()
        await asyncio.sleep(0)  # gather what this turn of the loop finishes
        try:
            await flush(worker)
        except Exception as exc:
            worker._flush_wanted.set()
            await asyncio.sleep(worker._retry_in(Loop.FLUSH, exc))
        else:
            if worker._failing:
                worker._recovered(Loop.FLUSH)


async def flush(worker: Worker) -> None:
    """Write every buffered outcome. On a database error the unwritten
    part goes back to the buffers and the error is raised."""
    if worker._completed:
        batch, worker._completed = worker._completed, []
        try:
            lost = await worker.queue.complete_many(batch, results=worker._results)
        except BaseException:
            worker._completed[:0] = batch
            raise
        settled(worker, batch, lost, Outcome.COMPLETED)
        if not worker._listens:
            # A completion may have made a workflow's child pending. With
            # LISTEN its notice wakes the claim loop; a worker that polls
            # looks at once rather than at its next poll.
            worker._wake.set()
    if worker._released:
        batch, worker._released = worker._released, []
        try:
            lost = await worker.queue.release_many(batch)
        except BaseException:
            worker._released[:0] = batch
            raise
        settled(worker, batch, lost, Outcome.RELEASED)
    if worker._writes:
        await flush_writes(worker)


async def flush_writes(worker: Worker) -> None:
    """Write the buffered single outcomes (fail, snooze, cancel...) at once;
    those that met an error that may pass go back to the buffer."""
    writes, worker._writes = worker._writes, []
    results = await asyncio.gather(*(write_one(worker, *w) for w in writes), return_exceptions=True)
    retry: list[Write] = []
    first: BaseException | None = None
    for write, result in zip(writes, results, strict=True):
        if isinstance(result, Exception) and classify(result) is not Fault.PERMANENT:
            retry.append(write)
            first = first or result
        elif isinstance(result, BaseException):
            # Not the database's state: a bug. Stop holding the job;
            # the reaper takes it back when its lease expires.
            worker._held.pop(write[1].id, None)
            worker._ran.pop(write[1].id, None)
            log.error("job.settle_failed", **worker._fields(write[1]), error=error_text(result))
    worker._writes[:0] = retry
    if first is not None:
        raise first


async def write_one(worker: Worker, kind: str, job: Job, arg: Any) -> None:
    try:
        if kind == "fail":
            status = await worker.queue.fail(job, arg)
            outcome = Outcome.DEAD if status == JobStatus.DEAD else Outcome.FAILED
        elif kind == "snooze":
            await worker.queue.snooze(job, arg)
            outcome = Outcome.SNOOZED
        else:
            await worker.queue.cancel_held(job, arg)
            outcome = Outcome.CANCELLED
    except LeaseLost:
        settle_lost(worker, job)
        return
    worker._held.pop(job.id, None)
    worker.metrics.job_ended(job.queue, job.job_type, outcome, worker._ran.pop(job.id, None))
    fields = worker._fields(job)
    if kind == "fail":
        event = f"job.{outcome}"
        log.warning(event, **fields, error=str(arg).split("\n", 1)[0])
    elif kind == "snooze":
        log.info("job.snoozed", **fields, delay=arg)
    else:
        log.info("job.cancelled", **fields, reason=arg)


def settled(worker: Worker, batch: list[Job], lost: list[Job], outcome: Outcome) -> None:
    lost_ids = {j.id for j in lost} if lost else set()
    job_ended = worker.metrics.job_ended
    held, ran = worker._held, worker._ran
    if worker._results:
        for job in batch:
            worker._results.pop(job.id, None)
    for job in batch:
        if job.id in lost_ids:
            settle_lost(worker, job)
        else:
            held.pop(job.id, None)
            job_ended(job.queue, job.job_type, outcome, ran.pop(job.id, None))
    if outcome is Outcome.RELEASED and len(batch) > len(lost):
        log.info("worker.released", worker_id=worker.worker_id, jobs=len(batch) - len(lost))


def settle_lost(worker: Worker, job: Job) -> None:
    worker._held.pop(job.id, None)
    worker._ran.pop(job.id, None)
    worker.metrics.lease_lost()
    detail = "result dropped: the job is no longer held by this worker"
    log.warning("job.lease_lost", **worker._fields(job), detail=detail)
