"""Schedules that start a workflow, on both engines: a tick fires once (its
job, in the transaction that moves the schedule on), the tick's job run by a
real worker starts the workflow its builder returns for that tick, and the
same tick started again, or by two callers at once, still makes one
workflow. A builder that raises fails the tick's job and writes nothing."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
import uuid
from typing import Any

import pytest

import jobvisor
from jobvisor import InvalidArgument, JobStatus, Queue, Registry, testing
from jobvisor.queue.errors import JobNotFound
from jobvisor.queue.internal import service_ops
from jobvisor.worker.loop import Worker
from jobvisor.worker.workflow_ticks import WORKFLOW_TICK
from tests.support.invariants import query_all

UTC = dt.UTC
NOW = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
DEADLINE = 30.0


def nightly(tick: dt.datetime) -> jobvisor.Workflow:
    """A workflow of its tick: two parents and a child that takes both."""
    wf = jobvisor.Workflow("nightly")
    day = tick.isoformat()
    a = wf.add("fetch", {"day": day})
    b = wf.add("fetch", {"day": day, "kind": "refunds"})
    wf.add("report", {"orders": a.result, "refunds": b.result, "day": day})
    return wf


def _registry(**builders: Any) -> Registry:
    registry = Registry()
    for name, builder in builders.items():
        registry.schedule(name, every=10, workflow=builder, queue="ticks")
    return registry


@pytest.fixture
def q(url: str) -> Queue:
    queue = jobvisor.connect(url)
    queue.migrate()
    return queue


def _fire(q: Queue, registry: Registry) -> tuple[Any, int, int]:
    """Sync the registry's schedules, fire the first one's next tick twice;
    (the tick, the jobs each call enqueued)."""
    service_ops(q).schedule_sync([spec.row(NOW) for spec in registry.schedules])
    row = q.schedules()[0]
    tick = row.next_run_at
    fire = service_ops(q).schedule_fire
    following = tick + dt.timedelta(seconds=10)
    return (
        tick,
        fire(row, ticks=[tick], next_run_at=following),
        fire(row, ticks=[tick], next_run_at=following),
    )


def _tick_job(url: str) -> uuid.UUID:
    """The id of the one tick's job."""
    ((row,),) = query_all(url, [f"SELECT id FROM jobvisor_jobs WHERE job_type = '{WORKFLOW_TICK}'"])
    return uuid.UUID(str(row[0]))


def _ended(job: jobvisor.Job) -> bool:
    return job.status in (JobStatus.COMPLETED, JobStatus.DEAD, JobStatus.CANCELLED)


def _run_worker(url: str, registry: Registry, job_id: uuid.UUID, until: Any = _ended) -> None:
    """A real worker (in this process) on `registry` until `job_id` ended
    (or `until(job)`)."""

    async def main() -> None:
        queue = jobvisor.connect_async(url)
        worker = Worker(queue, registry, worker_id="w-ticks", queues=["ticks"],
                        poll_interval=0.05, watch_parent=False)  # fmt: skip
        running = asyncio.create_task(worker.run())
        try:
            for _ in range(int(DEADLINE / 0.05)):
                if until(await queue.get(job_id)):
                    return
                await asyncio.sleep(0.05)
            raise AssertionError(f"tick job {job_id} did not end in {DEADLINE}s")
        finally:
            worker.stop()
            await asyncio.wait_for(running, DEADLINE)
            await queue.close()

    asyncio.run(main())


def _workflows(url: str) -> list[str]:
    ((rows),) = query_all(url, ["SELECT name FROM jobvisor_workflows"])
    return [row[0] for row in rows]


def test_a_tick_starts_one_workflow_built_for_it(q: Queue, url: str) -> None:
    registry = _registry(nightly=nightly)
    tick, first, second = _fire(q, registry)
    assert (first, second) == (1, 0)  # the tick fired once
    tick_job = q.get(_tick_job(url))
    assert tick_job.job_type == WORKFLOW_TICK
    assert tick_job.meta == {"schedule": "nightly", "tick": tick.isoformat()}

    _run_worker(url, registry, tick_job.id)
    done = q.get(tick_job.id)
    assert done.status is JobStatus.COMPLETED, done.last_error
    wid = uuid.UUID(done.result)
    assert done.meta is not None and done.meta["workflow"] == str(wid)
    status = q.workflow(wid)
    assert status.name == "nightly" and len(status.jobs) == 3
    assert status.job("report").parents == ("fetch", "fetch-2")
    for job in status.jobs:
        full = q.get(job.id)
        assert full.meta == {"schedule": "nightly", "tick": tick.isoformat()}
        assert full.payload["day"] == tick.isoformat()  # built for this tick
        assert full.correlation_id == tick_job.correlation_id  # one trail from the tick
    assert _workflows(url) == ["nightly"]

    # The same tick started again (its job run again after a crash): the
    # workflow it started already, and nothing written.
    again = service_ops(q).enqueue_workflow_once(
        tick_job.id, nightly(tick), meta={"schedule": "nightly"}
    )
    assert again == wid
    assert _workflows(url) == ["nightly"]
    assert q.summary().total == 4  # the tick's job and the workflow's three


def test_two_callers_starting_one_tick_make_one_workflow(q: Queue, url: str) -> None:
    registry = _registry(nightly=nightly)
    _fire(q, registry)
    (tick_job,) = q.claim("w", queues=["ticks"])
    started: list[uuid.UUID] = []
    barrier = threading.Barrier(4)

    def start() -> None:
        with jobvisor.connect(url) as mine:
            barrier.wait()
            started.append(
                service_ops(mine).enqueue_workflow_once(tick_job.id, nightly(NOW), meta={})
            )

    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE)
    assert len(started) == 4 and len(set(started)) == 1
    assert _workflows(url) == ["nightly"]
    assert q.summary().total == 4


def test_a_builder_that_raises_fails_the_tick_and_writes_nothing(q: Queue, url: str) -> None:
    def broken(tick: dt.datetime) -> jobvisor.Workflow:
        raise RuntimeError(f"no data for {tick:%Y-%m-%d}")

    registry = _registry(broken=broken)
    _fire(q, registry)
    tick_job = _tick_job(url)
    _run_worker(url, registry, tick_job, until=lambda job: job.status is JobStatus.RETRYABLE)
    failed = q.get(tick_job)
    assert failed.attempts == 1  # retried later, as any job
    assert "RuntimeError: no data for" in (failed.last_error or "")
    assert _workflows(url) == []
    assert failed.meta is not None and "workflow" not in failed.meta


def test_a_tick_of_a_schedule_the_app_no_longer_declares_is_cancelled(q: Queue, url: str) -> None:
    _fire(q, _registry(gone=nightly))
    tick_job = _tick_job(url)
    _run_worker(url, _registry(other=nightly), tick_job)
    cancelled = q.get(tick_job)
    assert cancelled.status is JobStatus.CANCELLED
    assert "schedule 'gone'" in (cancelled.last_error or "")
    assert _workflows(url) == []


def test_a_manual_run_starts_a_workflow_too(q: Queue, url: str) -> None:
    registry = _registry(nightly=nightly)
    service_ops(q).schedule_sync([spec.row(NOW) for spec in registry.schedules])
    job_id = q.schedule_run("nightly")
    _run_worker(url, registry, job_id)
    done = q.get(job_id)
    assert done.status is JobStatus.COMPLETED, done.last_error
    status = q.workflow(done.result)
    created = q.get(job_id).created_at
    assert q.get(status.jobs[0].id).payload["day"] == created.isoformat()
    assert q.get(status.jobs[0].id).meta == {"schedule": "nightly", "manual": True}


def test_starting_a_workflow_for_no_job_or_a_bad_workflow_writes_nothing(
    q: Queue, url: str
) -> None:
    missing = uuid.UUID("01a242d1-0bb6-7111-9ca2-e4bcb145433b")
    with pytest.raises(JobNotFound, match=str(missing)):
        service_ops(q).enqueue_workflow_once(missing, nightly(NOW), meta={})
    tick_job = q.enqueue("t")
    with pytest.raises(InvalidArgument, match="expected at least one job"):
        service_ops(q).enqueue_workflow_once(tick_job, jobvisor.Workflow("empty"), meta={})
    assert _workflows(url) == [] and q.summary().total == 1
    assert q.get(tick_job).meta is None


def test_a_tick_drained_outside_a_worker_says_where_it_runs(q: Queue, url: str) -> None:
    registry = _registry(nightly=nightly)
    service_ops(q).schedule_sync([spec.row(NOW) for spec in registry.schedules])
    job_id = q.schedule_run("nightly")
    testing.drain(q, registry=registry, queues=["ticks"])
    failed = q.get(job_id)
    assert failed.status is JobStatus.RETRYABLE
    assert "runs in a jobvisor worker" in (failed.last_error or "")
    assert _workflows(url) == []
