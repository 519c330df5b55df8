"""The maintenance services, one `run_once()` at a time, on both engines, with
the clock moved by hand; and the loop that carries on after a failure."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest

import jobvisor
from jobvisor import Queue
from jobvisor.queue.model import JobStatus
from jobvisor.queue.reports import Summary
from jobvisor.supervisor.maintenance import (
    Cleaner,
    CleanerConfig,
    Leadership,
    LeaseReaper,
    ReaperConfig,
    SummaryConfig,
    SummaryLogger,
    run_periodically,
)
from tests.support.aio import run_async
from tests.support.invariants import assert_invariants, query_all
from tests.support.queue import Clock
from tests.support.service import by_status


def test_the_reaper_takes_back_expired_leases(queue: Queue) -> None:
    clock = Clock()
    with jobvisor.connect(queue.url, clock=clock) as timed:
        timed.enqueue("noop")
        [claimed] = timed.claim("w-gone", lease=10)
    reaped: list[Mapping[tuple[str, str], int]] = []

    async def body() -> tuple[int, int]:
        async with jobvisor.connect_async(queue.url, clock=clock) as aq:
            reaper = LeaseReaper(aq, ReaperConfig(interval=1.0), on_reaped=reaped.append)
            early = await reaper.run_once()
            clock.advance(11)
            return early, await reaper.run_once()

    assert run_async(body) == (0, 1)
    assert reaped == [{("default", "noop"): 1}]
    assert queue.get(claimed.id).status is JobStatus.RETRYABLE
    assert_invariants(queue.url)


def test_the_cleaner_keeps_each_status_for_its_retention(queue: Queue) -> None:
    clock = Clock()
    with jobvisor.connect(queue.url, clock=clock) as timed:
        for job_type in ("done", "given_up"):
            timed.enqueue(job_type, max_attempts=1)
        for claimed in timed.claim("w-1", limit=2):
            if claimed.job_type == "done":
                timed.complete(claimed)
            else:
                timed.fail(claimed, "boom")
    retention: dict[JobStatus | str, float | None] = {
        JobStatus.COMPLETED: 60.0,
        JobStatus.DEAD: None,  # kept forever
    }

    async def body() -> list[int]:
        async with jobvisor.connect_async(queue.url, clock=clock) as aq:
            cleaner = Cleaner(aq, CleanerConfig(interval=1.0, retention=retention))
            counts = [await cleaner.run_once()]
            clock.advance(61)
            counts.append(await cleaner.run_once())
            return counts

    assert run_async(body) == [0, 1]
    assert by_status(queue.url) == {"dead": 1}


def test_the_cleaner_prunes_the_key_buckets_that_refilled(queue: Queue) -> None:
    clock = Clock()
    with jobvisor.connect(queue.url, clock=clock) as timed:
        timed.set_limit(job_type="call", key_rate="2/m")
        timed.enqueue_many([{"job_type": "call", "concurrency_key": f"k{n}"} for n in range(3)])
        assert len(timed.claim("w-1", limit=10)) == 3
    retention: dict[JobStatus | str, float | None] = {JobStatus.COMPLETED: 60.0}

    def buckets() -> int:
        return int(query_all(queue.url, ["SELECT COUNT(*) FROM jobvisor_key_buckets"])[0][0][0])

    async def body() -> list[int]:
        async with jobvisor.connect_async(queue.url, clock=clock) as aq:
            cleaner = Cleaner(aq, CleanerConfig(interval=1.0, retention=retention))
            await cleaner.run_once()
            seen = [buckets()]
            clock.advance(31)  # one token back of two: every bucket full again
            await cleaner.run_once()
            return [*seen, buckets()]

    assert run_async(body) == [3, 0]


def test_the_summary_counts_jobs_by_status(queue: Queue) -> None:
    queue.enqueue_many([{"job_type": "noop"}] * 3)
    seen: list[Summary] = []

    async def body() -> Summary:
        async with jobvisor.connect_async(queue.url) as aq:
            return await SummaryLogger(aq, SummaryConfig(1.0), on_summary=seen.append).run_once()

    summary = run_async(body)
    assert summary.count(JobStatus.PENDING) == 3
    assert seen == [summary]


def test_one_leader_at_a_time_and_resigning_hands_over(queue: Queue) -> None:
    async def body() -> list[bool]:
        async with jobvisor.connect_async(queue.url) as aq:
            a, b = Leadership(aq, holder="s-a", ttl=30), Leadership(aq, holder="s-b", ttl=30)
            steps = [await a.run_once(), await b.run_once(), await a.run_once()]
            steps += [a.is_leader, b.is_leader]
            await a.resign()
            steps += [a.is_leader, await b.run_once(), await a.run_once()]
            return steps

    assert run_async(body) == [True, False, True, True, False, False, True, False]


def test_an_expired_leadership_goes_to_the_next_holder(queue: Queue) -> None:
    clock = Clock()

    async def body() -> list[bool]:
        async with jobvisor.connect_async(queue.url, clock=clock) as aq:
            a, b = Leadership(aq, holder="s-a", ttl=15), Leadership(aq, holder="s-b", ttl=15)
            steps = [await a.run_once(), await b.run_once()]
            clock.advance(16)  # a stopped renewing (it hung, or its host died)
            return [*steps, await b.run_once()]

    assert run_async(body) == [True, False, True]


class Flaky:
    """A service whose first run fails."""

    name = "flaky"
    interval = 0.001

    def __init__(self) -> None:
        self.calls = 0
        self.twice = asyncio.Event()

    async def run_once(self) -> None:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("the database went away")
        self.twice.set()


def test_the_loop_logs_a_failure_and_carries_on() -> None:
    async def body() -> int:
        service = Flaky()
        task = asyncio.create_task(run_periodically(service, first_delay=0.0))
        await asyncio.wait_for(service.twice.wait(), 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return service.calls

    assert run_async(body) >= 2


def test_the_loop_skips_its_turn_when_not_the_leader() -> None:
    async def body() -> int:
        service = Flaky()
        service.calls = 1  # would succeed at once
        turns = 0

        def leading() -> bool:
            nonlocal turns
            turns += 1
            return turns > 3

        task = asyncio.create_task(run_periodically(service, when=leading, first_delay=0.0))
        await asyncio.wait_for(service.twice.wait(), 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return turns

    assert run_async(body) >= 4
