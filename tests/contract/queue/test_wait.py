"""`wait(id, timeout)`: the job once it is terminal, on both engines and both
faces; on PostgreSQL a `done` notice for the jobs someone waits on only, and
one listening connection for every wait of a queue."""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import psycopg
import pytest

import jobvisor
from jobvisor import AsyncQueue, InvalidArgument, Job, JobNotFound, JobStatus, Queue
from jobvisor.queue.notices import Notice
from tests.support.aio import run_with

DEADLINE = 30.0


def test_wait_returns_a_terminal_job_at_once(queue: Queue) -> None:
    jid = queue.enqueue("t")
    queue.cancel(jid)
    assert queue.wait(jid).status is JobStatus.CANCELLED
    assert queue.wait(str(jid), timeout=0).status is JobStatus.CANCELLED


def test_wait_times_out_naming_the_job_and_its_status(queue: Queue) -> None:
    jid = queue.enqueue("t")
    with pytest.raises(TimeoutError, match=f"job {jid} is still pending after 0.05s"):
        queue.wait(jid, timeout=0.05)
    queue.claim("w")
    with pytest.raises(TimeoutError, match="is still running after 0s"):
        queue.wait(jid, timeout=0)


def test_wait_refuses_bad_arguments(queue: Queue) -> None:
    with pytest.raises(InvalidArgument, match="timeout=-1"):
        queue.wait(uuid.uuid4(), timeout=-1)
    with pytest.raises(InvalidArgument, match="job id 'nope': expected a UUID"):
        queue.wait("nope")
    with pytest.raises(JobNotFound):
        queue.wait(uuid.uuid4(), timeout=1)


def test_wait_returns_once_another_thread_completes_the_job(queue: Queue) -> None:
    jid = queue.enqueue("t")
    (job,) = queue.claim("w")
    done = threading.Event()

    def finish() -> None:
        done.wait(DEADLINE)
        queue.complete(job, [1, 2])

    thread = threading.Thread(target=finish)
    thread.start()
    try:
        done.set()
        result = queue.wait(jid, timeout=DEADLINE)
    finally:
        thread.join()
    assert (result.status, result.result) == (JobStatus.COMPLETED, [1, 2])


def test_async_waits_see_completions_and_deaths(aqueue: AsyncQueue) -> None:
    async def body(q: AsyncQueue) -> None:
        ok, bad = await q.enqueue("t"), await q.enqueue("t", max_attempts=1)
        waits = [asyncio.ensure_future(q.wait(j, timeout=DEADLINE)) for j in (ok, bad)]
        await asyncio.sleep(0)
        # A wait marks its job as waited on while the claim runs: the claim
        # skips a row locked that instant, as it skips any, and takes it next time.
        jobs: dict[uuid.UUID, Job] = {}
        for _ in range(1000):
            jobs.update((j.id, j) for j in await q.claim("w", limit=2))
            if len(jobs) == 2:
                break
        await q.complete(jobs[ok], "fine")
        await q.fail(jobs[bad], "boom")
        done_ok, done_bad = await asyncio.gather(*waits)
        assert (done_ok.status, done_ok.result) == (JobStatus.COMPLETED, "fine")
        assert (done_bad.status, done_bad.last_error) == (JobStatus.DEAD, "boom")
        with pytest.raises(TimeoutError):
            await q.wait(await q.enqueue("t"), timeout=0.05)

    run_with(aqueue, body)


# --- PostgreSQL: notices ---------------------------------------------------------


def _done_notices(conn: psycopg.Connection[Any]) -> list[Notice]:
    return [
        Notice.parse(n.payload)
        for n in conn.notifies(timeout=0.5, stop_after=None)
        if Notice.parse(n.payload).kind == "done"
    ]


def test_only_a_job_someone_waits_on_sends_a_notice(pg_url: str) -> None:
    with jobvisor.connect(pg_url) as q, psycopg.connect(pg_url, autocommit=True) as listener:
        q.migrate()
        listener.execute("LISTEN jobvisor")
        waited, other, dying, retried = (q.enqueue("t", max_attempts=1) for _ in range(4))
        for jid in (waited, dying, retried):
            q._runner.run(jobvisor.queue.ops.wait_mark(q._ctx, jid))
        jobs = {j.id: j for j in q.claim("w", limit=4)}
        q.complete_many([jobs[waited], jobs[other]])
        q.fail(jobs[dying], "boom")
        q.release(jobs[retried])  # back to pending: not an end
        notices = _done_notices(listener)
        assert sorted(str(n.id) for n in notices) == sorted([str(waited), str(dying)])
        assert {n.queue for n in notices} == {"default"}


def test_many_waits_share_one_listening_connection(pg_url: str) -> None:
    with jobvisor.connect(pg_url) as q:
        q.migrate()
        ids = [q.enqueue("t") for _ in range(20)]

    def listening(conn: psycopg.Connection[Any]) -> int:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND query = 'LISTEN jobvisor'"
        ).fetchone()
        assert row is not None
        return int(row[0])

    async def main() -> None:
        async with jobvisor.connect_async(pg_url) as aq:
            waits = [asyncio.ensure_future(aq.wait(j, timeout=DEADLINE)) for j in ids]
            with psycopg.connect(pg_url, autocommit=True) as admin:
                for _ in range(int(DEADLINE / 0.05)):
                    if listening(admin):
                        break
                    await asyncio.sleep(0.05)
                assert listening(admin) == 1
                # A claim skips a job whose wait is marking it that instant
                # (as it skips any locked row): it takes it next time.
                jobs: dict[uuid.UUID, Job] = {}
                for _ in range(1000):
                    jobs.update((j.id, j) for j in await aq.claim("w", limit=20))
                    if len(jobs) == len(ids):
                        break
                await aq.complete_many(list(jobs.values()))
                done = await asyncio.gather(*waits)
                assert {j.status for j in done} == {JobStatus.COMPLETED}
            assert not aq._waiters._waiting

    asyncio.run(main())
