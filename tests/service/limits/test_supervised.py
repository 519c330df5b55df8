"""Limits obeyed by three real supervisors racing for the same jobs: how many
ran at once is read from the intervals the handlers recorded, the starts of
a rate from the table."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import jobvisor
from jobvisor.exitcodes import ExitCode
from tests.support.invariants import assert_invariants, query_all
from tests.support.service import Service, services
from tests.support.wait import wait_until

APP = {
    "JOBVISOR_APP": "tests.service.limits.app:registry",
    "JOBVISOR_WORKERS": "2",
    "JOBVISOR_CONCURRENCY": "6",
}


@pytest.fixture
def start_service() -> Iterator[Callable[..., Service]]:
    with services() as make:
        yield make


def three_supervisors(
    url: str, tmp_path: Path, start_service: Callable[..., Service]
) -> list[Service]:
    started = [start_service(url, tmp_path, APP, name=f"s{i}") for i in range(3)]
    for service in started:
        service.wait_event("worker.ready", count=2)
    return started


def results(url: str, job_type: str) -> list[dict[str, Any]]:
    """The recorded intervals of every completed job of a type."""
    (rows,) = query_all(
        url, [f"SELECT result FROM jobvisor_jobs WHERE job_type = '{job_type}'"]
    )  # a test's own literal name
    return [json.loads(r) if isinstance(r, str) else r for (r,) in rows if r is not None]


def most_at_once(intervals: list[dict[str, Any]]) -> int:
    """The largest number of intervals open at one moment (an end before a
    start at the same instant)."""
    edges = sorted([(i["start"], 1) for i in intervals] + [(i["end"], -1) for i in intervals])
    running = most = 0
    for _, step in edges:
        running += step
        most = max(most, running)
    return most


def done(url: str, job_type: str, n: int) -> Callable[[], bool]:
    def check() -> bool:
        (rows,) = query_all(
            url,
            [
                "SELECT COUNT(*) FROM jobvisor_jobs WHERE status = 'completed'"
                f" AND job_type = '{job_type}'"
            ],
        )
        return int(rows[0][0]) >= n

    return check


def stop_all(services_: list[Service], url: str) -> None:
    for service in services_:
        assert service.stop() == 0
    assert_invariants(url)


def capped_and_free(
    url: str, tmp_path: Path, start_service: Callable[..., Service], capped: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Run `capped` jobs of the type limited to 3 and 20 of a free type on
    three supervisors: the intervals of each, checked to hold the limit."""
    live = three_supervisors(url, tmp_path, start_service)
    with jobvisor.connect(url) as q:
        q.enqueue_many([{"job_type": "capped", "payload": {"hold": 0.2}}] * capped)
        q.enqueue_many([{"job_type": "free", "payload": {"hold": 0.5}}] * 20)
    wait_until(done(url, "capped", capped), timeout=120, what="the capped jobs done")
    wait_until(done(url, "free", 20), timeout=60, what="the free jobs done")
    stop_all(live, url)
    intervals = results(url, "capped")
    assert len(intervals) == capped
    assert most_at_once(intervals) == 3
    return intervals, results(url, "free")


def test_a_type_limit_holds_across_three_supervisors_and_uses_every_slot(
    url: str, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    capped, free = capped_and_free(url, tmp_path, start_service, 45)
    span = max(i["end"] for i in capped) - min(i["start"] for i in capped)
    busy = sum(i["end"] - i["start"] for i in capped)
    assert busy / span >= 2.0, f"on average {busy / span:.2f} of 3 slots busy"
    assert most_at_once(free) > 3  # the limit is the type's alone


def per_tenant_runs(
    url: str, tmp_path: Path, start_service: Callable[..., Service]
) -> list[dict[str, Any]]:
    """Run four jobs of each of ten keys of the type limited to one per key
    on three supervisors: their intervals, checked to hold the limit."""
    live = three_supervisors(url, tmp_path, start_service)
    keys = [f"tenant:{n}" for n in range(10)]
    with jobvisor.connect(url) as q:
        q.enqueue_many(
            [
                {"job_type": "per_tenant", "concurrency_key": key, "payload": {"key": key}}
                for key in keys
                for _ in range(4)
            ]
        )
    wait_until(done(url, "per_tenant", 40), timeout=90, what="the keyed jobs done")
    stop_all(live, url)
    got = results(url, "per_tenant")
    assert len(got) == 40
    for key in keys:
        assert most_at_once([i for i in got if i["key"] == key]) == 1, key
    return got


def test_a_key_limit_holds_per_key_across_three_supervisors(
    url: str, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    got = per_tenant_runs(url, tmp_path, start_service)
    assert most_at_once(got) == 10  # every key had its slot at once


def _epoch(value: Any) -> float:
    return value.timestamp() if isinstance(value, dt.datetime) else float(value)


@pytest.mark.long
def test_a_rate_holds_across_three_supervisors(
    url: str, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    live = three_supervisors(url, tmp_path, start_service)
    rate, burst, seconds = 20, 20, 10
    with jobvisor.connect(url) as q:
        q.enqueue_many(
            [{"job_type": "rated", "payload": {"hold": 0.01}}] * (burst + rate * seconds)
        )
    began = time.monotonic()
    wait_until(done(url, "rated", burst + rate * seconds), timeout=90, what="the rated jobs done")
    took = time.monotonic() - began
    stop_all(live, url)
    (rows,) = query_all(url, ["SELECT started_at FROM jobvisor_jobs WHERE job_type = 'rated'"])
    starts = sorted(_epoch(r[0]) for r in rows)
    for i, first in enumerate(starts):
        within = sum(1 for s in starts[i:] if s < first + 1.0)
        assert within <= rate + burst, f"{within} starts in the second from {first}"
    assert starts[-1] - starts[0] >= seconds - 0.5  # no faster than the rate
    assert took < seconds * 2  # and not much slower either


@pytest.mark.long
def test_a_key_rate_holds_per_key_and_every_key_progresses(
    url: str, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    """Five keys at 10/s each (a bucket of 10): the first key's backlog,
    twice the others' and ahead of them in claim order, does not hold them
    back; each key's starts stay within its rate."""
    live = three_supervisors(url, tmp_path, start_service)
    rate, burst, seconds = 10, 10, 5
    keys = [f"tenant:{n}" for n in range(5)]
    sizes = {key: burst + rate * seconds * (2 if key == keys[0] else 1) for key in keys}
    with jobvisor.connect(url) as q:
        for key in keys:  # the first key's jobs are enqueued, and due, first
            job = {"job_type": "rated_per_key", "concurrency_key": key, "payload": {"hold": 0.01}}
            q.enqueue_many([job] * sizes[key])
    total = sum(sizes.values())
    wait_until(done(url, "rated_per_key", total), timeout=120, what="the keyed rated jobs done")
    stop_all(live, url)
    (rows,) = query_all(
        url,
        [
            "SELECT concurrency_key, started_at FROM jobvisor_jobs"
            " WHERE job_type = 'rated_per_key' AND status = 'completed'"
        ],
    )
    starts: dict[str, list[float]] = {key: [] for key in keys}
    for key, started in rows:
        starts[key].append(_epoch(started))
    for key in keys:
        mine = sorted(starts[key])
        assert len(mine) == sizes[key]
        for i, first in enumerate(mine):
            within = sum(1 for s in mine[i:] if s < first + 1.0)
            assert within <= rate + burst, f"{key}: {within} starts in the second from {first}"
        # No faster than the rate: the jobs past the first bucket took their time.
        assert mine[-1] - mine[0] >= (sizes[key] - burst) / rate - 0.5, key
    # Every other key was done before the first key's backlog was: none waited on it.
    busy_last = max(starts[keys[0]])
    for key in keys[1:]:
        assert max(starts[key]) < busy_last, f"{key} finished after the backlogged key"


def test_a_bad_declared_limit_stops_the_service_with_exit_78(
    url: str, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    service = start_service(
        url, tmp_path, {**APP, "JOBVISOR_APP": "tests.service.limits.bad_app:registry"}
    )
    assert service.wait_exit(90) == ExitCode.CONFIG
    assert any("rate='fast'" in line for line in service.lines())
