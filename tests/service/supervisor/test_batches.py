"""Batches through real `jobvisor run` processes, on both engines: typed
tasks in a batch whose callback reads their results; a member that adds to
its own batch; a worker SIGKILLed mid-batch, after which the callback still
fires exactly once. And the maintenance services that look after batches."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import jobvisor
from jobvisor import JobStatus, Queue
from jobvisor.supervisor.maintenance import (
    BatchSweeper,
    BatchSweeperConfig,
    Cleaner,
    CleanerConfig,
)
from tests.contract.queue.test_batches import types_count
from tests.service.supervisor.batch_app import fan_out, report, square
from tests.support.aio import run_async
from tests.support.invariants import assert_invariants
from tests.support.queue import Clock, row_count
from tests.support.service import Service
from tests.support.wait import wait_until

SETTINGS = {
    "JOBVISOR_APP": "tests.service.supervisor.batch_app:registry",
    "JOBVISOR_QUEUES": "default,reports",
}


def finished(queue: Queue, batch_id: Any) -> jobvisor.Job:
    """The batch's `on_finish` callback once it completed."""

    def done() -> jobvisor.Job | None:
        callbacks = queue.get_batch(batch_id).callbacks
        if "finish" not in callbacks:
            return None
        job = queue.get(callbacks["finish"])
        return job if job.status is JobStatus.COMPLETED else None

    found = wait_until(done, timeout=120, what="the batch's callback to complete")
    assert found is not None
    return found


def test_a_batch_of_tasks_whose_callback_reads_the_results(
    queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    with queue.batch(on_finish=report, on_success=report, meta={"run": "nightly"}) as b:
        b.enqueue_many([square.args(n=i) for i in range(10)])
        b.enqueue(fan_out.args(first=10, count=2))
    service = start_service(queue.url, tmp_path, SETTINGS)
    service.wait_ready()
    callback = finished(queue, b.id)
    expected = sum(i * i for i in range(12))
    assert callback.result == {
        "sum": expected,
        "members": 13,
        "pages": 5,
        "meta": {"run": "nightly"},
    }
    assert callback.queue == "reports"
    status = queue.get_batch(b.id)
    assert status.counts == {"completed": 13} and status.total == 13
    assert set(status.callbacks) == {"success", "finish"}
    assert queue.get(status.callbacks["success"]).payload == {
        "batch_id": str(b.id),
        "meta": {"run": "nightly"},
    }
    assert service.stop() == 0


def test_a_worker_killed_mid_batch_still_fires_the_callback_once(
    queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    marker = str(tmp_path / "died")
    with queue.batch(on_finish=report) as b:
        b.enqueue_many([square.args(n=i) for i in range(6)])
        b.enqueue(square.args(n=6, die_once=marker))
    service = start_service(queue.url, tmp_path, SETTINGS)
    service.wait_ready()
    service.wait_event("worker.jobs_requeued", timeout=120)  # its worker's SIGKILL
    callback = finished(queue, b.id)
    assert callback.result["sum"] == sum(i * i for i in range(7))
    assert service.stop() == 0
    assert types_count(queue.url)["report"] == 1
    status = queue.get_batch(b.id)
    assert status.counts == {"completed": 7}
    assert list(status.callbacks) == ["finish"]
    assert_invariants(queue.url)


def test_the_sweeper_service_finishes_a_stalled_batch(queue: Queue) -> None:
    with queue.batch(on_finish="done") as b:
        b.enqueue("member")
    with queue.transaction() as conn:
        conn.execute("UPDATE jobvisor_batches SET unfinished = 3")
    (job,) = queue.claim("w")
    queue.complete(job)
    assert queue.get_batch(b.id).callbacks == {}

    async def body() -> int:
        async with jobvisor.connect_async(queue.url) as aq:
            return await BatchSweeper(aq, BatchSweeperConfig(interval=1.0)).run_once()

    assert run_async(body) == 1
    assert set(queue.get_batch(b.id).callbacks) == {"finish"}


def test_the_cleaner_removes_a_finished_batch_whole(queue: Queue) -> None:
    clock = Clock()
    with jobvisor.connect(queue.url, clock=clock) as timed:
        with timed.batch(on_finish="done") as b:
            b.enqueue("member")
        while jobs := timed.claim("w"):
            for job in jobs:
                timed.complete(job)
        clock.advance(120)
    retention: dict[JobStatus | str, float | None] = {"completed": 60.0, "dead": 60.0}

    async def body() -> int:
        async with jobvisor.connect_async(queue.url, clock=clock) as aq:
            return await Cleaner(aq, CleanerConfig(interval=1.0, retention=retention)).run_once()

    assert run_async(body) == 0  # no job outside the batch
    assert row_count(queue.url) == 0
    with pytest.raises(jobvisor.BatchNotFound):
        queue.get_batch(b.id)
