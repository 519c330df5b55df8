"""The schedules table through the queue, on both engines."""

from __future__ import annotations

import datetime as dt

import pytest

import jobvisor
from jobvisor import Queue
from jobvisor.queue.errors import InvalidArgument
from jobvisor.queue.internal import service_ops
from jobvisor.schedules import ScheduleSpec

UTC = dt.UTC
NOW = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


@pytest.fixture
def q(url: str) -> Queue:
    queue = jobvisor.connect(url)
    queue.migrate()
    return queue


def spec(name: str = "s", **options: object) -> ScheduleSpec:
    if "cron" not in options:
        options.setdefault("every", 10)
    return ScheduleSpec.build(name, job_type="t", payload={"n": 1}, **options)  # type: ignore[arg-type]


def test_sync_writes_declared_schedules_and_disables_the_rest(q: Queue) -> None:
    service_ops(q).schedule_sync([spec("a").row(NOW), spec("b", cron="*/5 * * * *").row(NOW)])
    shown = {s.name: s for s in q.schedules()}
    assert shown["a"].spec == "every 10s" and shown["b"].spec == "*/5 * * * *"
    assert shown["a"].next_run_at == NOW + dt.timedelta(seconds=10)
    assert all(s.enabled for s in shown.values())
    service_ops(q).schedule_sync([spec("b", cron="*/5 * * * *").row(NOW + dt.timedelta(hours=1))])
    shown = {s.name: s for s in q.schedules()}
    assert not shown["a"].enabled and shown["b"].enabled
    assert shown["b"].next_run_at == NOW + dt.timedelta(minutes=5), (
        "an unchanged spec keeps its tick"
    )
    assert [name for name, _ in service_ops(q).schedule_next_ticks()[0]] == ["b"]


def test_a_tick_is_fired_once_by_two_racing_callers(q: Queue) -> None:
    service_ops(q).schedule_sync([spec().row(NOW)])
    (row,) = q.schedules()
    tick = row.next_run_at
    following = tick + dt.timedelta(seconds=10)
    assert service_ops(q).schedule_fire(row, ticks=[tick], next_run_at=following) == 1
    assert service_ops(q).schedule_fire(row, ticks=[tick], next_run_at=following) == 0
    (moved,) = q.schedules()
    assert moved.next_run_at == following and moved.last_run_at == tick
    summary = q.summary()
    assert summary.total == 1


def test_a_fired_job_carries_its_schedule_and_tick(q: Queue) -> None:
    service_ops(q).schedule_sync([spec().row(NOW)])
    (row,) = q.schedules()
    service_ops(q).schedule_fire(
        row, ticks=[row.next_run_at], next_run_at=row.next_run_at + dt.timedelta(seconds=10)
    )
    (job,) = q.claim("w", queues=["default"])
    assert job.payload == {"n": 1} and job.job_type == "t"
    assert job.meta == {"schedule": "s", "tick": row.next_run_at.isoformat()}


def test_run_now_enqueues_without_moving_the_schedule(q: Queue) -> None:
    service_ops(q).schedule_sync([spec().row(NOW)])
    before = q.schedules()
    job_id = q.schedule_run("s")
    assert q.get(job_id).meta == {"schedule": "s", "manual": True}
    assert q.schedules() == before


def test_run_now_of_an_unknown_schedule_is_refused(q: Queue) -> None:
    with pytest.raises(InvalidArgument, match="schedule 'nope': no such schedule"):
        q.schedule_run("nope")
    assert q.summary().total == 0
