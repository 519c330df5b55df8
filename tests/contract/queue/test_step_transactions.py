"""Transactional steps (`JobContext.transaction`, `transaction_sync`) on both
engines: what the step writes through its connection commits with the
step's checkpoint or not at all; an exception rolls both back; a worker whose
claim token was fenced out writes nothing; a committed step never runs again."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import jobvisor
from jobvisor import AsyncQueue, InvalidArgument, Job, LeaseLost, RetryPolicy, StepMismatch
from jobvisor.durable import Durable
from jobvisor.queue import internal, ops
from tests.support.aio import run_with
from tests.support.invariants import query_all

LEDGER = "CREATE TABLE ledger (job_id TEXT NOT NULL, step TEXT NOT NULL, amount INTEGER)"


@pytest.fixture
def ledger(queue: jobvisor.Queue, url: str) -> str:
    """The application's own table, in the (migrated) queue's database."""
    with queue.transaction() as conn:
        conn.execute(LEDGER)
    return url


def _rows(url: str) -> list[tuple[Any, ...]]:
    (rows,) = query_all(url, ["SELECT job_id, step, amount FROM ledger ORDER BY amount"])
    return [tuple(r) for r in rows]


def _insert_sql(conn: Any) -> str:
    marker = "?" if isinstance(conn, sqlite3.Connection) else "%s"
    return f"INSERT INTO ledger VALUES ({marker}, {marker}, {marker})"


async def debit(conn: Any, job_id: uuid.UUID, step: str, amount: int) -> dict[str, int]:
    """A step's writes through the transaction's connection (either engine)."""
    value = conn.execute(_insert_sql(conn), (str(job_id), step, amount))
    if isinstance(value, Awaitable):
        await value
    return {"debited": amount}


def debit_sync(conn: Any, job_id: uuid.UUID, step: str, amount: int) -> dict[str, int]:
    conn.execute(_insert_sql(conn), (str(job_id), step, amount))
    return {"debited": amount}


async def _claimed(q: AsyncQueue) -> Job:
    await q.enqueue("t")
    (job,) = await q.claim("w")
    return job


def _durable(q: AsyncQueue, job: Job) -> Durable:
    """A fresh attempt's view of `job`'s steps (it reads the log anew)."""
    return Durable(job, internal.service_ops(q), asyncio.get_running_loop(), q.max_result_bytes)


async def _run(durable: Durable, sync: bool, name: str, fn: Any, *args: Any) -> Any:
    if sync:
        return await asyncio.to_thread(durable.transaction_sync, name, fn, args, {})
    return await durable.transaction(name, fn, args, {})


def _both(body: Callable[[AsyncQueue], Awaitable[Any]], url: str) -> Any:
    return run_with(jobvisor.connect_async(url), body)


@pytest.mark.parametrize("sync", [False, True], ids=["async", "thread"])
def test_writes_commit_with_the_checkpoint(ledger: str, sync: bool) -> None:
    fn = debit_sync if sync else debit

    async def body(q: AsyncQueue) -> None:
        job = await _claimed(q)
        result = await _run(_durable(q, job), sync, "debit", fn, job.id, "debit", 5)
        assert result == {"debited": 5}
        assert _rows(ledger) == [(str(job.id), "debit", 5)]
        (entry,) = await internal.service_ops(q).step_log(job.id)
        assert (entry.name, entry.status, entry.result) == (
            "debit",
            ops.StepStatus.COMPLETED,
            {"debited": 5},
        )

    _both(body, ledger)


@pytest.mark.parametrize("sync", [False, True], ids=["async", "thread"])
def test_an_exception_rolls_the_writes_back_and_fails_the_step(ledger: str, sync: bool) -> None:
    async def failing(conn: Any, job_id: uuid.UUID) -> None:
        await debit(conn, job_id, "debit", 5)
        raise RuntimeError("card declined")

    def failing_sync(conn: Any, job_id: uuid.UUID) -> None:
        debit_sync(conn, job_id, "debit", 5)
        raise RuntimeError("card declined")

    async def body(q: AsyncQueue) -> None:
        job = await _claimed(q)
        with pytest.raises(RuntimeError, match="card declined"):
            await _run(_durable(q, job), sync, "debit", failing_sync if sync else failing, job.id)
        assert _rows(ledger) == []
        (entry,) = await internal.service_ops(q).step_log(job.id)
        assert entry.status is ops.StepStatus.FAILED
        assert entry.error is not None and "card declined" in entry.error
        # The next attempt runs it again, and this time it commits.
        fn = debit_sync if sync else debit
        assert await _run(_durable(q, job), sync, "debit", fn, job.id, "debit", 6) == {"debited": 6}
        assert _rows(ledger) == [(str(job.id), "debit", 6)]

    _both(body, ledger)


@pytest.mark.parametrize("sync", [False, True], ids=["async", "thread"])
def test_a_fenced_out_token_writes_nothing(ledger: str, sync: bool) -> None:
    fn = debit_sync if sync else debit

    async def body(q: AsyncQueue) -> None:
        job = await _claimed(q)
        lost = dataclasses.replace(job, claim_token=uuid.uuid4())  # another claim holds it now
        with pytest.raises(LeaseLost):
            await _run(_durable(q, lost), sync, "debit", fn, job.id, "debit", 5)
        assert _rows(ledger) == []
        assert await internal.service_ops(q).step_log(job.id) == []
        await q.complete(job)  # a job that finished is no longer held either
        with pytest.raises(LeaseLost):
            await _run(_durable(q, job), sync, "debit", fn, job.id, "debit", 5)
        assert _rows(ledger) == []

    _both(body, ledger)


@pytest.mark.parametrize("sync", [False, True], ids=["async", "thread"])
def test_a_committed_step_is_not_run_again(ledger: str, sync: bool) -> None:
    fn = debit_sync if sync else debit
    ran: list[int] = []

    def never(conn: Any) -> None:
        ran.append(1)

    async def body(q: AsyncQueue) -> None:
        job = await _claimed(q)
        first = _durable(q, job)
        await _run(first, sync, "debit", fn, job.id, "debit", 1)
        await _run(first, sync, "debit", fn, job.id, "debit#1", 2)  # a repeat is `debit#1`
        later = _durable(q, job)  # a later attempt reads the log again
        assert await _run(later, sync, "debit", never) == {"debited": 1}
        assert await _run(later, sync, "debit", never) == {"debited": 2}
        assert ran == []
        assert _rows(ledger) == [(str(job.id), "debit", 1), (str(job.id), "debit#1", 2)]
        names = [s.name for s in await internal.service_ops(q).step_log(job.id)]
        assert names == ["debit", "debit#1"]
        reordered = _durable(q, job)
        with pytest.raises(StepMismatch, match="debit"):
            await _run(reordered, sync, "refund", never)
        assert ran == []

    _both(body, ledger)


def test_a_bad_name_or_result_writes_nothing(ledger: str) -> None:
    async def unstorable(conn: Any, job_id: uuid.UUID) -> object:
        await debit(conn, job_id, "x", 1)
        return object()

    async def body(q: AsyncQueue) -> None:
        job = await _claimed(q)
        durable = _durable(q, job)
        with pytest.raises(InvalidArgument, match="step name='a#b'"):
            await durable.transaction("a#b", debit, (job.id, "x", 1), {})
        with pytest.raises(InvalidArgument, match="result"):
            await _durable(q, job).transaction("x", unstorable, (job.id,), {})
        assert _rows(ledger) == []

    _both(body, ledger)


def test_a_retry_is_a_new_transaction_and_the_failed_try_leaves_nothing(ledger: str) -> None:
    tries: list[int] = []

    async def flaky(conn: Any, job_id: uuid.UUID) -> int:
        tries.append(1)
        await debit(conn, job_id, "debit", len(tries))
        if len(tries) == 1:
            raise ConnectionError("the bank hung up")
        return len(tries)

    async def body(q: AsyncQueue) -> None:
        job = await _claimed(q)
        durable = _durable(q, job)
        no_wait = RetryPolicy(base=0.0, cap=0.0, jitter=0.0)
        result = await durable.transaction(
            "debit", flaky, (job.id,), {}, retries=1, backoff=no_wait
        )
        assert result == 2 and len(tries) == 2
        assert _rows(ledger) == [(str(job.id), "debit", 2)]  # the first try's row rolled back
        (entry,) = await internal.service_ops(q).step_log(job.id)
        assert (entry.status, entry.result) == (ops.StepStatus.COMPLETED, 2)

    _both(body, ledger)
