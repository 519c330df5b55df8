"""`AsyncQueue.notifications()`: wake-ups on both engines, and a `missed`
after the listening connection was cut."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator

import psycopg
import pytest

import jobvisor
from jobvisor.queue.errors import InvalidArgument
from jobvisor.queue.notices import Notice, NoticeKind
from tests.support.aio import run_async

WAIT = 30.0  # bound on every wait below; never reached when things work


async def _next(notices: AsyncGenerator[Notice, None]) -> Notice:
    async with asyncio.timeout(WAIT):
        return await anext(notices)


async def _listening_pids(url: str) -> list[int]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT pid FROM pg_stat_activity"
            " WHERE datname = current_database() AND query = 'LISTEN jobvisor'"
            " AND pid <> pg_backend_pid()"
        )
        return [row[0] for row in await cur.fetchall()]


async def _until_listening(url: str) -> int:
    async with asyncio.timeout(WAIT):
        while True:
            if pids := await _listening_pids(url):
                return pids[0]
            await asyncio.sleep(0.02)


def test_postgres_notices_arrive_and_survive_a_cut_connection(pg_url: str) -> None:
    with jobvisor.connect(pg_url) as q:
        q.migrate()

    async def body() -> list[Notice]:
        got: list[Notice] = []
        async with jobvisor.connect_async(pg_url) as q:
            notices = q.notifications(queues=["mail"])
            got.append(await _next(notices))  # missed: listening begins
            pid = await _until_listening(pg_url)
            first = asyncio.ensure_future(_next(notices))
            await q.enqueue("t", queue="other")  # not one of ours: filtered out
            await q.enqueue("t", queue="mail")
            got.append(await first)

            async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as admin:
                await admin.execute("SELECT pg_terminate_backend(%s)", [pid])
            got.append(await _next(notices))  # missed: the listener reconnected
            await q.enqueue("t", queue="mail")
            got.append(await _next(notices))
            await notices.aclose()
        return got

    began, job, missed, again = run_async(body)
    assert began.kind == NoticeKind.MISSED
    assert job == Notice(NoticeKind.JOB, "mail")
    assert missed.kind == NoticeKind.MISSED
    assert again == Notice(NoticeKind.JOB, "mail")


def test_sqlite_notices_arrive_after_an_enqueue(sqlite_url: str) -> None:
    with jobvisor.connect(sqlite_url) as q:
        q.migrate()

    async def body() -> Notice:
        async with jobvisor.connect_async(sqlite_url) as q:
            notices = q.notifications()
            began = await _next(notices)
            assert began.kind == NoticeKind.MISSED  # polling begins: look once
            waiting = asyncio.ensure_future(_next(notices))
            # The poll notices a commit made after its first look; enqueue
            # until it has had that look.
            while not waiting.done():
                await q.enqueue("t")
                await asyncio.wait([waiting], timeout=0.05)
            notice = await waiting
            await notices.aclose()
            return notice

    notice = run_async(body)
    assert notice.kind == NoticeKind.JOB
    assert notice.queue is None  # SQLite cannot say which queue: look at all


@pytest.mark.parametrize(
    "notice",
    [
        Notice(NoticeKind.JOB, "mail"),
        Notice(NoticeKind.JOB, "{not json"),
        Notice(NoticeKind.MISSED),
        Notice("cancel", "mail", uuid.uuid4()),
        Notice("paused", "{x"),
        Notice(NoticeKind.JOB, "mail", priority=7),
        Notice(NoticeKind.JOB, "mail", priority=-2),
        Notice(NoticeKind.JOB, "mail", bucket=13),
        Notice(NoticeKind.JOB, "mail", priority=3, bucket=-40),
    ],
)
def test_a_notice_travels_as_its_payload(notice: Notice) -> None:
    assert Notice.parse(notice.payload()) == notice


def test_a_new_job_notice_is_the_bare_queue_name() -> None:
    # What enqueue's NOTIFY sends (and what every deployed worker reads).
    assert Notice(NoticeKind.JOB, "mail").payload() == "mail"
    assert Notice.parse("mail") == Notice(NoticeKind.JOB, "mail")


def test_a_new_job_notice_says_a_priority_other_than_0(pg_url: str) -> None:
    """A worker busy with jobs of a lower priority claims such a job at once
    (the express claim), so the notice of every kind of enqueue carries it."""
    with jobvisor.connect(pg_url) as q:
        q.migrate()

    async def body() -> list[Notice]:
        got: list[Notice] = []
        async with jobvisor.connect_async(pg_url) as q:
            notices = q.notifications(queues=["mail"])
            await _next(notices)  # missed: listening begins
            await _until_listening(pg_url)
            await q.enqueue("t", queue="mail", priority=10)
            got.append(await _next(notices))
            await q.enqueue("t", queue="mail", priority=-3, dedupe_key="k")
            got.append(await _next(notices))
            await q.enqueue("t", queue="mail", priority=4, unique=jobvisor.Unique(key="u"))
            got.append(await _next(notices))
            await q.enqueue("t", queue="mail")
            got.append(await _next(notices))
            await notices.aclose()
        return got

    assert run_async(body) == [
        Notice(NoticeKind.JOB, "mail", priority=10),
        Notice(NoticeKind.JOB, "mail", priority=-3),
        Notice(NoticeKind.JOB, "mail", priority=4),
        Notice(NoticeKind.JOB, "mail"),
    ]
    assert Notice(NoticeKind.JOB, "mail", priority=0).payload() == "mail"


def test_notifications_refuse_a_bad_queue_list(sqlite_url: str) -> None:
    q = jobvisor.connect_async(sqlite_url)
    with pytest.raises(InvalidArgument, match="queues"):
        q.notifications(queues="mail")
