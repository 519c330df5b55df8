"""A schedule that starts a workflow, fired by a real `jobvisor run` on both
engines: each tick starts exactly one workflow, built for that tick, and
every workflow runs to the end, though a worker is killed with SIGKILL in
the middle of one."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import jobvisor
from jobvisor import JobStatus, Queue
from jobvisor.worker.workflow_ticks import WORKFLOW_TICK
from tests.support.invariants import assert_invariants, query_all
from tests.support.service import Service, services
from tests.support.wait import wait_until

APP = {"JOBVISOR_APP": "tests.service.schedules.workflow_app:registry", "JOBVISOR_WORKERS": "2"}


@pytest.fixture
def start_service() -> Iterator[Callable[..., Service]]:
    with services() as make:
        yield make


def _meta(value: Any) -> dict[str, Any]:
    found = json.loads(value) if isinstance(value, str) else value
    return found or {}


def _tick_jobs(url: str) -> list[dict[str, Any]]:
    """The meta of every tick's job, oldest tick first."""
    (rows,) = query_all(url, [f"SELECT meta FROM jobvisor_jobs WHERE job_type = '{WORKFLOW_TICK}'"])
    return sorted((_meta(meta) for (meta,) in rows), key=lambda m: m["tick"])


def _finished_workflows(queue: Queue, url: str) -> int:
    """How many of the workflows the ticks started have finished."""
    started = [m["workflow"] for m in _tick_jobs(url) if "workflow" in m]
    return sum(1 for wid in started if queue.workflow(wid).finished)


def _workflow_ids(url: str) -> list[uuid.UUID]:
    (rows,) = query_all(url, ["SELECT id FROM jobvisor_workflows"])
    return sorted(uuid.UUID(str(wid)) for (wid,) in rows)


@pytest.mark.timeout(300)
def test_each_tick_starts_one_workflow_built_for_it(
    queue: Queue, url: str, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    settings = {**APP, "JOBVISOR_TEST_DIE_ONCE": str(tmp_path / "died")}
    service = start_service(url, tmp_path, settings)
    service.wait_event("schedules.synced")
    wait_until(
        lambda: _finished_workflows(queue, url) >= 4, timeout=120, what="four workflows done"
    )
    assert (tmp_path / "died").exists()  # a worker was killed mid-workflow
    assert service.stop() == 0

    ticks = _tick_jobs(url)
    doubled = [t for t, n in Counter(m["tick"] for m in ticks).items() if n > 1]
    assert not doubled, f"ticks fired twice: {doubled}"
    started = [uuid.UUID(m["workflow"]) for m in ticks if "workflow" in m]
    assert len(started) >= 4 and len(set(started)) == len(started)
    assert _workflow_ids(url) == sorted(started)  # one workflow per tick, no other
    for meta in ticks:
        if "workflow" not in meta:
            continue  # the service stopped before this tick's job ran
        status = queue.workflow(meta["workflow"])
        day = meta["tick"]
        for job in status.jobs:
            full = queue.get(job.id)
            assert full.meta is not None and full.meta["tick"] == day
        child = status.job("summarise")
        if child.status is JobStatus.COMPLETED:
            assert child.result == f"{day}: 2 orders, 1 refunds"
    # Every workflow ran to the end, each child once, but for the one whose
    # child was killed: it ran again after its worker's crash.
    done = [queue.workflow(w) for w in started]
    completed = [s for s in done if s.finished]
    assert len(completed) >= 4
    assert all(s.counts == {JobStatus.COMPLETED: 3} for s in completed)
    attempts = sorted(s.job("summarise").attempts for s in completed)
    assert attempts[-1] <= 2 and attempts.count(2) <= 1
    assert all(dt.datetime.fromisoformat(m["tick"]).microsecond == 0 for m in ticks)
    assert_invariants(url)


def test_a_workflow_schedule_is_listed_with_its_ticks_job_type(
    queue: Queue, url: str, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    service = start_service(url, tmp_path, APP)
    service.wait_event("schedules.synced")
    with jobvisor.connect(url) as q:
        (row,) = q.schedules()
    assert (row.name, row.spec, row.job_type, row.enabled) == (
        "report",
        "every 1s",
        WORKFLOW_TICK,
        True,
    )
    assert service.stop() == 0
