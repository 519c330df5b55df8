"""The leader's scheduler service against a real database whose time is an
injected clock: catch-up after downtime, disabling, and racing leaders."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

import jobvisor
from jobvisor.queue.internal import service_ops
from jobvisor.schedules import MISSED_AFTER, ScheduleSpec
from jobvisor.supervisor.maintenance import Scheduler
from tests.support.aio import run_async
from tests.support.queue import Clock

START = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
HOUR = 3600.0


def declared(catch_up: str = "latest") -> list[dict[str, Any]]:
    return [ScheduleSpec.build("s", every=10, job_type="t", catch_up=catch_up).message()]


def run_scheduler(
    url: str, clock: Clock, rounds: Sequence[tuple[float, list[dict[str, Any]]]]
) -> tuple[list[int], list[tuple[str, list[float]]]]:
    """One `run_once` per round, after moving the clock by the round's
    seconds, with the round's declarations; the counts and the fired calls."""
    fired: list[tuple[str, list[float]]] = []

    async def main() -> list[int]:
        async with jobvisor.connect_async(url, clock=clock) as q:
            await q.migrate()
            current: Sequence[Mapping[str, Any]] = []

            def on_fired(name: str, lags: Sequence[float]) -> None:
                fired.append((name, list(lags)))

            scheduler = Scheduler(q, lambda: current, on_fired=on_fired)
            counts = []
            for seconds, declarations in rounds:
                clock.advance(seconds)
                current = declarations
                counts.append(await scheduler.run_once())
            return counts

    return run_async(main), fired


@pytest.mark.parametrize(
    ("catch_up", "after_an_hour"),
    [("all", 360), ("latest", 1), ("skip", int(MISSED_AFTER // 10) + 1)],
)
def test_catch_up_after_an_hour_without_a_leader(
    url: str, catch_up: str, after_an_hour: int
) -> None:
    decl = declared(catch_up)
    counts, fired = run_scheduler(
        url, Clock(START), [(0, decl), (HOUR, decl), (0, decl), (10, decl)]
    )
    assert counts == [0, after_an_hour, 0, 1]
    assert [name for name, _ in fired] == ["s", "s"]
    with jobvisor.connect(url) as q:
        (row,) = q.schedules()
        assert row.last_run_at == START + dt.timedelta(seconds=HOUR + 10)
        assert row.next_run_at == START + dt.timedelta(seconds=HOUR + 20)
        assert q.summary().total == after_an_hour + 1


def test_a_schedule_no_longer_declared_stops_firing_and_is_kept_disabled(url: str) -> None:
    decl = declared()
    counts, _ = run_scheduler(url, Clock(START), [(0, decl), (10, decl), (0, []), (60, [])])
    assert counts == [0, 1, 0, 0]
    with jobvisor.connect(url) as q:
        (row,) = q.schedules()
        assert not row.enabled
        assert q.summary().total == 1


def test_two_leaders_firing_the_same_tick_enqueue_it_once(url: str) -> None:
    spec = ScheduleSpec.build("s", every=10, job_type="t")

    async def main() -> list[list[int]]:
        queues = [jobvisor.connect_async(url) for _ in range(2)]
        try:
            await queues[0].migrate()
            await service_ops(queues[0]).schedule_sync([spec.row(START)])
            results = []
            for _ in range(10):
                (row,) = await queues[0].schedules()
                following = spec.after(row.next_run_at)
                fire = [
                    service_ops(q).schedule_fire(
                        row, ticks=[row.next_run_at], next_run_at=following
                    )
                    for q in queues
                ]
                results.append(sorted(await asyncio.gather(*fire)))
            return results
        finally:
            for q in queues:
                await q.close()

    assert run_async(main) == [[0, 1]] * 10
    with jobvisor.connect(url) as q:
        assert q.summary().total == 10


def utc(year: int, month: int, day: int, hour: int, minute: int = 0) -> dt.datetime:
    return dt.datetime(year, month, day, hour, minute, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("start", "fires_at", "then"),
    [
        # spring forward: 02:30 does not exist on 29 March; it fires at 03:00 CEST
        (utc(2026, 3, 28, 12), utc(2026, 3, 29, 1, 0), utc(2026, 3, 30, 0, 30)),
        # fall back: 02:30 exists twice on 25 October; it fires at the first (CEST) only
        (utc(2026, 10, 24, 12), utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)),
    ],
)
def test_a_daily_0230_in_berlin_fires_once_on_the_transition_day(
    url: str, start: dt.datetime, fires_at: dt.datetime, then: dt.datetime
) -> None:
    spec = ScheduleSpec.build("nightly", cron="30 2 * * *", timezone="Europe/Berlin", job_type="t")
    decl = [spec.message()]
    to_fire = (fires_at - start).total_seconds()
    # the day before, just after the tick, and an hour later (02:30 CET on fall-back day)
    counts, _ = run_scheduler(url, Clock(start), [(0, decl), (to_fire + 1, decl), (HOUR, decl)])
    assert counts == [0, 1, 0]
    with jobvisor.connect(url) as q:
        (row,) = q.schedules()
        assert (row.last_run_at, row.next_run_at) == (fires_at, then)
