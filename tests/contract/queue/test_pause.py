"""pause, resume and paused: no claim takes a job of a paused queue, on any
connection, once `pause` has returned; everything else goes on as usual."""

from __future__ import annotations

import asyncio
import threading

import psycopg
import pytest

import jobvisor
from jobvisor import JobStatus, Queue
from jobvisor.queue.errors import DatabaseUnavailable, InvalidArgument, LeaseLost
from jobvisor.queue.notices import Notice, NoticeKind
from tests.support.aio import run_async
from tests.support.invariants import assert_invariants
from tests.support.queue import (
    MakeQueue,
    child_claim_all,
    claimed_after_pause,
    queue_counts,
    run_in_processes,
)
from tests.support.wait import wait_until


def test_a_paused_queue_gives_no_job_to_any_claim(queue: Queue, url: str) -> None:
    queue.enqueue("t", queue="mail", priority=9)
    other = queue.enqueue("t", queue="other")
    queue.pause("mail")
    assert queue.paused() == ["mail"]
    assert [j.id for j in queue.claim("w", limit=10)] == [other]
    assert queue.claim("w", queues=["mail"]) == []
    assert queue.claim("w", job_types=["t"]) == []
    assert queue_counts(url, "mail") == {"pending": 1}
    assert_invariants(url)


def test_resume_makes_the_jobs_claimable_again(queue: Queue, url: str) -> None:
    jid = queue.enqueue("t", queue="mail")
    queue.pause("mail")
    assert queue.claim("w") == []
    queue.resume("mail")
    assert queue.paused() == []
    assert [j.id for j in queue.claim("w")] == [jid]


def test_pause_and_resume_twice_change_nothing_more(queue: Queue) -> None:
    queue.pause("b")
    queue.pause("a")
    queue.pause("b")
    assert queue.paused() == ["a", "b"]
    queue.resume("b")
    queue.resume("b")
    queue.resume("never-paused")
    assert queue.paused() == ["a"]


def test_enqueue_works_on_a_paused_queue(queue: Queue, url: str) -> None:
    queue.pause("mail")
    queue.enqueue("t", queue="mail")
    queue.enqueue_many([{"job_type": "t", "queue": "mail"}] * 3)
    assert queue_counts(url, "mail") == {"pending": 4}
    assert queue.claim("w", limit=10) == []
    queue.resume("mail")
    assert len(queue.claim("w", limit=10)) == 4


def test_a_running_job_of_a_paused_queue_finishes_as_usual(queue: Queue, url: str) -> None:
    queue.enqueue_many([{"job_type": "t", "queue": "mail"}] * 3)
    done, failing, lost = queue.claim("w", limit=3)
    queue.pause("mail")
    queue.renew(done)
    queue.complete(done)
    queue.fail(failing, "boom", retry_in=0)
    queue.release(lost)
    assert queue.get(done.id).status is JobStatus.COMPLETED
    assert queue.get(failing.id).status is JobStatus.RETRYABLE
    # Retried or released, the jobs wait for the resume like the others.
    assert queue.claim("w", limit=10) == []
    with pytest.raises(LeaseLost):
        queue.complete(lost)
    queue.resume("mail")
    assert {j.id for j in queue.claim("w", limit=10)} == {failing.id, lost.id}
    assert_invariants(url)


def test_a_pause_holds_for_every_connection(make_queue: MakeQueue, url: str) -> None:
    a, b = make_queue(), make_queue()
    a.enqueue("t", queue="mail")
    a.pause("mail")
    assert b.paused() == ["mail"]
    assert b.claim("w") == []
    b.resume("mail")
    assert len(a.claim("w")) == 1


@pytest.mark.parametrize(
    "bad",
    ["", "   ", None, 42, ["mail"], "x" * 300, "bad\ud800"],
    ids=["empty", "blank", "none", "int", "list", "long", "surrogate"],
)
def test_a_bad_queue_name_is_refused_and_nothing_written(queue: Queue, bad: object) -> None:
    queue.pause("kept")
    for op in (queue.pause, queue.resume):
        with pytest.raises(InvalidArgument, match="queue="):
            op(bad)  # type: ignore[arg-type]
    assert queue.paused() == ["kept"]


def test_async_queue_pauses_and_resumes(url: str) -> None:
    with jobvisor.connect(url) as q:
        q.migrate()
        jid = q.enqueue("t", queue="mail")

    async def body() -> tuple[list[str], int, list[str], int]:
        async with jobvisor.connect_async(url) as q:
            await q.pause("mail")
            names = await q.paused()
            held = len(await q.claim("w"))
            await q.resume("mail")
            return names, held, await q.paused(), len(await q.claim("w"))

    assert run_async(body) == (["mail"], 0, [], 1)
    with jobvisor.connect(url) as q:
        assert q.get(jid).status is JobStatus.RUNNING


def test_resume_wakes_the_workers_of_the_queue(pg_url: str) -> None:
    with jobvisor.connect(pg_url) as q:
        q.migrate()
        q.pause("mail")

    async def body() -> Notice:
        async with jobvisor.connect_async(pg_url) as q:
            notices = q.notifications(queues=["mail"])
            async with asyncio.timeout(30):
                began = await anext(notices)
                assert began.kind == NoticeKind.MISSED
                waiting = asyncio.ensure_future(anext(notices))
                # The listener may not be listening yet: resume until it hears.
                while not waiting.done():
                    await q.pause("mail")
                    await q.resume("mail")
                    await asyncio.wait([waiting], timeout=0.05)
                notice = await waiting
            await notices.aclose()
            return notice

    assert run_async(body) == Notice(NoticeKind.JOB, "mail")


def test_no_claim_takes_a_job_after_pause_returns_under_racing_claimers(
    queue: Queue, url: str
) -> None:
    """Two processes claim and complete as fast as they can while the queue
    is paused under them; no job of it is claimed after the pause (the claim's
    start against the pause's time, both from the database clock), the other
    queue drains, and after the resume so does the paused one."""
    jobs = [{"job_type": "t", "queue": q} for _ in range(3000) for q in ("paused", "open")]
    queue.enqueue_many(jobs)
    outcome: list[object] = []
    racers = threading.Thread(
        target=lambda: outcome.append(
            run_in_processes(child_claim_all, [(url, "w1", 5), (url, "w2", 5)])
        )
    )
    racers.start()
    try:
        wait_until(
            lambda: queue_counts(url, "open").get("completed", 0) >= 300,
            what="the claimers to get going",
        )
        queue.pause("paused")
    finally:
        racers.join(180)
    assert outcome, "the claimers did not finish"
    assert claimed_after_pause(url) == []
    assert queue_counts(url, "open") == {"completed": 3000}
    waiting = queue_counts(url, "paused")
    if not url.startswith("sqlite"):
        # SQLite's write lock is not granted in turn: a pause may wait until
        # the claimers ran out of jobs, and then holds nothing back.
        assert waiting.get("pending", 0) > 0
    assert set(waiting) <= {"pending", "completed"}
    queue.resume("paused")
    run_in_processes(child_claim_all, [(url, "w3", 50)])
    assert queue_counts(url, "paused") == {"completed": 3000}
    assert_invariants(url)


def test_a_pause_blocked_by_a_long_reader_fails_and_changes_nothing(pg_url: str) -> None:
    """A transaction that read the pause table (pg_dump does) holds the lock a
    pause needs: the pause gives up after its lock timeout instead of holding
    every claim back for as long, and claims go on."""
    with jobvisor.connect(pg_url) as q, psycopg.connect(pg_url) as reader:
        q.migrate()
        q.enqueue("t", queue="mail")
        reader.execute("SELECT count(*) FROM jobvisor_queue_pauses").fetchall()  # tx open
        with pytest.raises(DatabaseUnavailable, match="lock timeout"):
            q.pause("mail")
        assert q.paused() == []
        assert len(q.claim("w")) == 1
        reader.rollback()
        q.pause("mail")
        assert q.paused() == ["mail"]
