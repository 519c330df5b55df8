"""A schedule's declaration and its ticks: pure functions, no database."""

from __future__ import annotations

import datetime as dt
import itertools
from zoneinfo import ZoneInfo

import pytest

from jobvisor.schedules import (
    COUNT_CAP,
    MAX_CATCH_UP,
    MISSED_AFTER,
    InvalidSchedule,
    ScheduleSpec,
    due_ticks,
)
from jobvisor.worker import Registry

UTC = dt.UTC
BERLIN = ZoneInfo("Europe/Berlin")


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"cron": "61 * * * *"}, "cron='61 * * * *'"),
        ({"cron": "* * * *"}, "expected five fields"),
        ({"cron": "* * * * *", "every": 5}, "expected exactly one"),
        ({}, "expected exactly one"),
        ({"every": 0.5}, "every=0.5"),
        ({"every": "5"}, "every='5'"),
        ({"every": 5, "timezone": "Mars/Olympus"}, "timezone='Mars/Olympus'"),
        ({"every": 5, "catch_up": "some"}, "catch_up='some'"),
        ({"every": 5, "payload": {1j}}, "payload"),
        ({"every": 5, "queue": ""}, "queue"),
    ],
)
def test_a_bad_declaration_is_refused_naming_the_value(
    options: dict[str, object], words: str
) -> None:
    registry = Registry()
    with pytest.raises(InvalidSchedule, match=words.replace("*", r"\*").replace("(", r"\(")):
        registry.schedule("s", job_type="t", **options)  # type: ignore[arg-type]
    assert registry.schedules == []


def test_the_same_name_twice_is_refused() -> None:
    registry = Registry()
    registry.schedule("s", every=5, job_type="t")
    with pytest.raises(InvalidSchedule, match="'s': a schedule of that name is already declared"):
        registry.schedule("s", cron="* * * * *", job_type="t")
    assert [s.spec for s in registry.schedules] == ["every 5s"]


def test_every_ticks_on_multiples_of_its_period() -> None:
    spec = ScheduleSpec.build("s", every=60, job_type="t")
    at = dt.datetime(2026, 1, 1, 12, 0, 30, tzinfo=UTC)
    assert spec.after(at) == dt.datetime(2026, 1, 1, 12, 1, tzinfo=UTC)
    assert spec.after(spec.after(at)) == dt.datetime(2026, 1, 1, 12, 2, tzinfo=UTC)


def test_an_odd_period_never_gives_the_same_tick_twice() -> None:
    spec = ScheduleSpec.build("s", every=1.7, job_type="t")
    tick = dt.datetime(2026, 1, 1, tzinfo=UTC)
    for _ in range(1000):
        following = spec.after(tick)
        assert following > tick
        tick = following.replace(microsecond=following.microsecond)  # as stored


def ticks(spec: ScheduleSpec, start: dt.datetime, count: int) -> list[dt.datetime]:
    out, tick = [], start
    for _ in range(count):
        tick = spec.after(tick)
        out.append(tick)
    return out


def test_a_daily_0230_in_berlin_on_spring_forward_fires_once_at_0300() -> None:
    spec = ScheduleSpec.build("s", cron="30 2 * * *", timezone="Europe/Berlin", job_type="t")
    got = ticks(spec, dt.datetime(2026, 3, 28, 12, tzinfo=BERLIN), 3)
    local = [t.astimezone(BERLIN) for t in got]
    assert [(t.day, t.hour, t.minute) for t in local] == [(29, 3, 0), (30, 2, 30), (31, 2, 30)]
    assert got[0] == dt.datetime(2026, 3, 29, 1, 0, tzinfo=UTC)


def test_a_daily_0230_in_berlin_on_fall_back_fires_once_in_summer_time() -> None:
    spec = ScheduleSpec.build("s", cron="30 2 * * *", timezone="Europe/Berlin", job_type="t")
    got = ticks(spec, dt.datetime(2026, 10, 24, 12, tzinfo=BERLIN), 3)
    assert got == [
        dt.datetime(2026, 10, 25, 0, 30, tzinfo=UTC),  # 02:30 CEST; 02:30 CET does not fire
        dt.datetime(2026, 10, 26, 1, 30, tzinfo=UTC),
        dt.datetime(2026, 10, 27, 1, 30, tzinfo=UTC),
    ]


def test_a_half_hourly_cron_keeps_its_period_through_fall_back() -> None:
    spec = ScheduleSpec.build("s", cron="*/30 * * * *", timezone="Europe/Berlin", job_type="t")
    got = ticks(spec, dt.datetime(2026, 10, 24, 23, 0, tzinfo=UTC), 6)
    gaps = {(b - a).total_seconds() for a, b in itertools.pairwise(got)}
    assert gaps == {1800.0}


NOW = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def spec_every(catch_up: str) -> ScheduleSpec:
    return ScheduleSpec.build("s", every=10, job_type="t", catch_up=catch_up)


@pytest.mark.parametrize("catch_up", ["skip", "latest", "all"])
def test_a_tick_not_yet_come_is_not_due(catch_up: str) -> None:
    assert due_ticks(spec_every(catch_up), NOW + dt.timedelta(seconds=1), NOW) is None


@pytest.mark.parametrize("catch_up", ["skip", "latest", "all"])
def test_ticks_late_but_not_missed_all_fire(catch_up: str) -> None:
    due = due_ticks(spec_every(catch_up), NOW - dt.timedelta(seconds=20), NOW)
    assert due is not None
    assert due.ticks == tuple(NOW - dt.timedelta(seconds=s) for s in (20, 10, 0))
    assert due.next_run_at == NOW + dt.timedelta(seconds=10)


def test_catch_up_modes_after_an_hour_down() -> None:
    start = NOW - dt.timedelta(hours=1)
    skip = due_ticks(spec_every("skip"), start, NOW)
    latest = due_ticks(spec_every("latest"), start, NOW)
    every = due_ticks(spec_every("all"), start, NOW)
    assert skip is not None and latest is not None and every is not None
    on_time = int(MISSED_AFTER // 10)
    assert skip.ticks == tuple(NOW - dt.timedelta(seconds=10 * i) for i in range(on_time, -1, -1))
    assert latest.ticks == (NOW,)
    assert len(every.ticks) == 361 and every.ticks[0] == start and every.dropped == 0
    for due in (skip, latest, every):
        assert due.next_run_at == NOW + dt.timedelta(seconds=10)


def test_catch_up_all_keeps_the_latest_thousand() -> None:
    start = NOW - dt.timedelta(days=1)
    due = due_ticks(spec_every("all"), start, NOW)
    assert due is not None
    assert len(due.ticks) == MAX_CATCH_UP
    assert due.ticks[-1] == NOW
    assert due.dropped == 8641 - MAX_CATCH_UP


def test_a_declaration_survives_its_message() -> None:
    spec = ScheduleSpec.build(
        "s", cron="0 * * * *", job_type="t", payload={"a": 1}, timezone="Europe/Berlin"
    )
    assert ScheduleSpec.from_message(spec.message()) == spec


def test_a_minutely_cron_down_for_a_month_catches_up_its_latest_thousand() -> None:
    spec = ScheduleSpec.build("s", cron="* * * * *", job_type="t", catch_up="all")
    due = due_ticks(spec, NOW - dt.timedelta(days=30), NOW)
    assert due is not None
    assert len(due.ticks) == MAX_CATCH_UP
    assert due.ticks[-1] == NOW and due.ticks[0] == NOW - dt.timedelta(minutes=MAX_CATCH_UP - 1)
    assert due.dropped == COUNT_CAP - MAX_CATCH_UP  # 42,201 in truth: counted up to the cap
    assert due.next_run_at == NOW + dt.timedelta(minutes=1)
