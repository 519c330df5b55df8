"""Schedules fired by real supervisors: every tick once, from the jobs table."""

from __future__ import annotations

import datetime as dt
import json
import random
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import jobvisor
from jobvisor.exitcodes import ExitCode
from tests.support.invariants import query_all
from tests.support.service import Service, http_get, services
from tests.support.wait import wait_until

APP = {"JOBVISOR_APP": "tests.service.schedules.app:registry", "JOBVISOR_WORKERS": "1"}


@pytest.fixture
def start_service() -> Iterator[Callable[..., Service]]:
    with services() as make:
        yield make


def ticks(url: str) -> list[dt.datetime]:
    """The tick of every job a schedule enqueued, from the table."""
    (rows,) = query_all(url, ["SELECT meta FROM jobvisor_jobs"])
    out = []
    for (meta,) in rows:
        value: Any = json.loads(meta) if isinstance(meta, str) else meta
        if value and value.get("schedule") == "every_second":
            out.append(dt.datetime.fromisoformat(value["tick"]))
    return out


def assert_one_job_per_tick(url: str) -> list[dt.datetime]:
    got = ticks(url)
    doubled = [tick for tick, n in Counter(got).items() if n > 1]
    assert not doubled, f"ticks enqueued twice: {doubled}"
    got.sort()
    expected = [got[0] + dt.timedelta(seconds=i) for i in range(len(got))]
    missing = sorted(set(expected) - set(got))
    assert got == expected, f"ticks missing: {missing[:10]}"
    return got


def test_a_supervisor_enqueues_each_tick_once(
    url: str, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    service = start_service(url, tmp_path, {**APP, "JOBVISOR_HTTP_ADDR": "127.0.0.1:0"})
    service.wait_event("schedules.synced")
    wait_until(lambda: len(ticks(url)) >= 4, what="four ticks enqueued")
    port = int(service.wait_event("http.listening")[0]["port"])
    metrics = http_get(port, "/metrics")[1]
    fired = re.search(
        r'^jobvisor_schedule_fired_total\{schedule="every_second"\} (\S+)$', metrics, re.M
    )
    lags = re.search(r"^jobvisor_schedule_lag_seconds_count (\S+)$", metrics, re.M)
    assert fired is not None and lags is not None, metrics
    assert float(fired.group(1)) >= 4 and float(lags.group(1)) == float(fired.group(1))
    assert service.stop() == 0
    assert_one_job_per_tick(url)
    with jobvisor.connect(url) as q:
        (row,) = q.schedules()
    assert (row.name, row.spec, row.timezone, row.enabled) == (
        "every_second",
        "every 1s",
        "UTC",
        True,
    )
    assert row.last_run_at == max(ticks(url))


def test_an_invalid_schedule_stops_the_service_with_exit_78(
    url: str, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    settings = {**APP, "JOBVISOR_APP": "tests.service.schedules.bad_app:registry"}
    service = start_service(url, tmp_path, settings)
    assert service.wait_exit(90) == ExitCode.CONFIG
    assert any("cron='61 * * * *'" in line for line in service.lines())


@pytest.mark.long
@pytest.mark.timeout(600)
def test_three_supervisors_with_the_leader_killed_ten_times_enqueue_each_tick_once(
    pg_url: str, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    """The leader SIGKILLed (with its workers) at a random moment within a
    tick, ten times; a new supervisor takes each one's place, so three run
    throughout. Each takeover waits for the dead leader's lease (15 s)."""
    live = [start_service(pg_url, tmp_path, APP, name=f"s{i}") for i in range(3)]
    started = 3
    began = time.monotonic()
    for _ in range(10):
        wait_until(lambda: [s for s in live if s.events("schedule.fired")], what="a leader firing")
        time.sleep(random.uniform(0.0, 1.0))  # a random moment within a tick
        # The leader is the one that fired last: an earlier leader is dead.
        leader = max(
            (s for s in live if s.events("schedule.fired")),
            key=lambda s: s.events("schedule.fired")[-1]["ts"],
        )
        before = len(ticks(pg_url))
        leader.kill_everything()
        live.remove(leader)
        live.append(start_service(pg_url, tmp_path, APP, name=f"s{started}"))
        started += 1

        def firing_again(n: int = before) -> bool:
            return len(ticks(pg_url)) > n + 1

        wait_until(firing_again, timeout=120, what="firing again")
    took = time.monotonic() - began
    for service in live:
        assert service.stop() == 0
    got = assert_one_job_per_tick(pg_url)  # none missing, none doubled
    assert took >= 100 and len(got) >= 100  # ten takeovers, about two minutes of ticks
