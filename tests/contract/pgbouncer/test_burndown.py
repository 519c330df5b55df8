"""`jobvisor run` through PgBouncer in transaction pooling: several workers
burn down jobs enqueued one by one and in bulk while jobs are awaited and
cancelled; everything ends completed or cancelled, nothing is lost or stuck.
Once with LISTEN over a direct connection (`JOBVISOR_LISTEN_URL`), once
polling."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

import jobvisor
from jobvisor import JobStatus, Queue
from tests.support.aio import run_async
from tests.support.invariants import assert_invariants
from tests.support.service import services
from tests.support.wait import wait_until

BULK = 300
SINGLE = 40
RUNNING_CANCELLED = 4
PENDING_CANCELLED = 6


def _enqueue(q: Queue) -> tuple[list[uuid.UUID], list[uuid.UUID], list[uuid.UUID]]:
    """(answering jobs, long jobs to cancel once running, delayed jobs to cancel)."""
    bulk = q.enqueue_many(
        [{"job_type": "answer", "payload": {"value": i}, "priority": i % 3} for i in range(BULK)]
    )
    single = [
        q.enqueue("sync_answer", {"value": BULK + i}, queue="other" if i % 2 else "default")
        for i in range(SINGLE)
    ]
    long = [q.enqueue("sleep", {"seconds": 600}) for _ in range(RUNNING_CANCELLED)]
    delayed = [q.enqueue("noop", delay=3600) for _ in range(PENDING_CANCELLED)]
    return [*bulk, *single], long, delayed


async def _await_some(url: str, listen_url: str | None, ids: list[uuid.UUID]) -> list[object]:
    async with jobvisor.connect_async(url, pgbouncer=True, listen_url=listen_url) as aq:
        jobs = [await aq.wait(job_id, timeout=120) for job_id in ids]
    return [job.result for job in jobs]


@pytest.mark.parametrize("listen", ["direct", "polling"])
def test_burn_down_through_pgbouncer(
    bounced_url: str, pg_url: str, tmp_path: Path, listen: str
) -> None:
    listen_url = pg_url if listen == "direct" else None
    settings = {
        "JOBVISOR_PGBOUNCER": "1",
        "JOBVISOR_WORKERS": "3",
        "JOBVISOR_CONCURRENCY": "4",
        "JOBVISOR_POOL_SIZE": "3",
        # Polling, a running job hears of its cancel with its next renewal.
        "JOBVISOR_LEASE": "6",
        "JOBVISOR_LISTEN_URL": listen_url or "",
    }
    with (
        jobvisor.connect(bounced_url, pgbouncer=True, listen_url=listen_url) as q,
        services() as start,
    ):
        q.migrate()
        service = start(bounced_url, tmp_path, settings)
        service.wait_ready()
        answering, long, delayed = _enqueue(q)
        wait_until(
            lambda: all(q.get(i).status is JobStatus.RUNNING for i in long),
            what="the long jobs running",
        )
        for job_id in [*long, *delayed]:
            q.cancel(job_id)
        results = run_async(lambda: _await_some(bounced_url, listen_url, answering[-10:]))
        assert results == list(range(BULK + SINGLE - 10, BULK + SINGLE))
        last = [q.wait(job_id, timeout=120) for job_id in [*answering, *long]]
        assert service.stop() == 0
        summary = q.summary()
    assert [job.result for job in last[: len(answering)]] == list(range(BULK + SINGLE))
    assert {s.value: n for s, n in summary.by_status().items() if n} == {
        "completed": BULK + SINGLE,
        "cancelled": RUNNING_CANCELLED + PENDING_CANCELLED,
    }
    assert_invariants(pg_url)
    assert not service.events("worker.listen_lost")
