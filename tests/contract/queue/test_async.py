"""The AsyncQueue face: the same operations as coroutines, on both engines."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

import psycopg
import pytest

import jobvisor
from jobvisor import AsyncQueue, JobNotFound, JobStatus, LeaseLost
from jobvisor.queue import TypeRequeue
from tests.support.aio import run_with
from tests.support.invariants import assert_invariants, status_counts
from tests.support.queue import Clock


def test_async_round_trip(aqueue: AsyncQueue, url: str) -> None:
    async def body(q: AsyncQueue) -> None:
        assert await q.schema_version() >= 1
        assert await q.migrate() == []
        ok = await q.enqueue("email", {"to": "x"}, priority=2)
        bad = await q.enqueue("email", {"to": "y"}, max_attempts=1)
        more = await q.enqueue_many([{"job_type": "bulk"}] * 3)
        assert len(more) == 3
        first, second = await q.claim("aw", job_types=["email"], limit=5)
        assert (first.id, second.id) == (ok, bad)
        await q.renew(first)
        await q.complete(first)
        assert await q.fail(second, "nope") is JobStatus.DEAD
        with pytest.raises(LeaseLost):
            await q.complete(first)
        batch = await q.claim("aw", limit=5)
        assert await q.complete_many(batch[:1]) == []
        assert await q.renew_many(batch[1:]) == []
        await q.release(batch[1])
        await q.snooze(batch[2], 3600)
        s = await q.summary()
        assert s.count(JobStatus.COMPLETED) == 2 and s.count(JobStatus.DEAD) == 1
        assert "total" in str(s)
        assert await q.dead.count() == 1
        assert [j.id for j in await q.dead.list()] == [bad]
        assert (await q.dead.get(bad)).last_error == "nope"
        await q.dead.requeue(bad)
        assert (await q.get(bad)).status is JobStatus.PENDING
        assert await q.dead.requeue_type("email") == TypeRequeue(requeued=0)
        await q.cancel(bad)
        with pytest.raises(JobNotFound):
            await q.dead.discard(bad)
        assert await q.reap_expired() == 0
        assert await q.requeue_crashed("nobody") == 0
        assert await q.cleanup(3600) == 0

    run_with(aqueue, body)
    assert status_counts(url) == {"completed": 2, "cancelled": 1, "pending": 2}
    assert_invariants(url)


def test_async_claimers_share_nothing(aqueue: AsyncQueue, url: str) -> None:
    async def body(q: AsyncQueue) -> None:
        await q.enqueue_many([{"job_type": "t"}] * 60)

        async def claimer(name: str) -> list[str]:
            got = []
            while jobs := await q.claim(name, limit=4):
                got += [str(j.id) for j in jobs]
                assert await q.complete_many(jobs) == []
            return got

        results = await asyncio.gather(*(claimer(f"c{i}") for i in range(4)))
        every = [i for r in results for i in r]
        assert len(every) == len(set(every)) == 60

    run_with(aqueue, body)
    assert status_counts(url) == {"completed": 60}


def test_async_with_clock_and_dead_path(url: str) -> None:
    clock = Clock()
    with jobvisor.connect(url) as m:
        m.migrate()

    async def body(q: AsyncQueue) -> None:
        jid = await q.enqueue("t", max_attempts=2, delay=30)
        assert await q.claim("w") == []
        clock.advance(30)
        (job,) = await q.claim("w", lease=5)
        clock.advance(6)
        assert await q.reap_expired() == 1
        clock.advance(3600)
        (job,) = await q.claim("w")
        assert job.attempts == 2
        assert await q.fail(job, RuntimeError("x")) is JobStatus.DEAD
        assert (await q.dead.get(jid)).last_error == "RuntimeError: x"

    run_with(jobvisor.connect_async(url, clock=clock), body)
    assert_invariants(url)


def test_async_enqueue_in_the_callers_transaction(aqueue: AsyncQueue, url: str) -> None:
    async def body(q: AsyncQueue) -> None:
        if url.startswith("postgres"):
            conn: Any = await psycopg.AsyncConnection.connect(url)
            kept = await q.enqueue("kept", conn=conn)
            await conn.commit()
            await q.enqueue("dropped", conn=conn)
            await conn.rollback()
            await conn.close()
        else:
            lite = sqlite3.connect(url.removeprefix("sqlite:///"), timeout=30)
            kept = await q.enqueue("kept", conn=lite)
            lite.commit()
            await q.enqueue("dropped", conn=lite)
            lite.rollback()
            lite.close()
        (job,) = await q.claim("w", limit=5)
        assert job.id == kept

    run_with(aqueue, body)
    assert_invariants(url)


def test_async_require_correlation_id(url: str) -> None:
    with jobvisor.connect(url) as m:
        m.migrate()

    async def body(q: AsyncQueue) -> None:
        with pytest.raises(jobvisor.MissingCorrelationId):
            await q.enqueue("t")
        with jobvisor.correlation_scope("async-cid"):
            jid = await q.enqueue("t")
        assert (await q.get(jid)).correlation_id == "async-cid"

    run_with(jobvisor.connect_async(url, require_correlation_id=True), body)
