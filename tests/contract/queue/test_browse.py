"""What the dashboard reads (`queue.browse`), on both engines: pages of jobs
by keyset, counts that say when they are estimates, the finished jobs per
minute, and the fleet's heartbeat rows. The plan tests check every page's
statement walks an index."""

from __future__ import annotations

import datetime as dt
import re
import sqlite3
import time
import uuid
from typing import Any, LiteralString

import psycopg
import pytest

import jobvisor
from jobvisor import AsyncQueue, JobStatus, Queue
from jobvisor.queue import browse
from jobvisor.queue.browse import Count
from jobvisor.queue.drivers.postgres import sql as sql_postgres
from jobvisor.queue.drivers.postgres.session import PG_SESSION_SETUP
from jobvisor.queue.drivers.sqlite import sql as sql_sqlite
from jobvisor.queue.errors import InvalidArgument
from jobvisor.queue.fleet import SupervisorBeat
from jobvisor.queue.internal import dashboard_ops, service_ops
from tests.support.aio import run_with
from tests.support.queue import Clock


def every_page(q: Queue, /, **filters: Any) -> list[list[uuid.UUID]]:
    """The ids of each page, following the cursors to the end."""
    pages: list[list[uuid.UUID]] = []
    cursor = None
    while True:
        page = dashboard_ops(q).job_page(cursor=cursor, **filters)
        pages.append([j.id for j in page.jobs])
        if page.next_cursor is None:
            return pages
        cursor = page.next_cursor


def test_newest_first_pages_cover_every_job_once(queue: Queue) -> None:
    ids = queue.enqueue_many([{"job_type": "t", "payload": {"n": i}} for i in range(7)])
    pages = every_page(queue, limit=3)
    assert [len(p) for p in pages] == [3, 3, 1]
    assert [i for p in pages for i in p] == sorted(ids, reverse=True)


def test_the_async_face_reads_the_same(aqueue: AsyncQueue) -> None:
    async def body(q: AsyncQueue) -> None:
        ids = await q.enqueue_many([{"job_type": "t", "queue": "mail"}] * 3)
        page = await dashboard_ops(q).job_page(queue="mail", limit=2)
        assert [j.id for j in page.jobs] == sorted(ids, reverse=True)[:2]
        rest = await dashboard_ops(q).job_page(queue="mail", limit=2, cursor=page.next_cursor)
        assert [j.id for j in rest.jobs] == [min(ids)] and rest.next_cursor is None
        (state,) = await dashboard_ops(q).queue_states()
        assert state.counts[JobStatus.PENDING] == Count(3)
        assert len(await dashboard_ops(q).throughput(minutes=3)) == 3
        await service_ops(q).supervisor_heartbeat(SupervisorBeat("s-a", "h", 1, "0.1.0", False, []))
        assert [r.id for r in await dashboard_ops(q).supervisors()] == ["s-a"]

    run_with(aqueue, body)


def test_filters_by_status_queue_type_and_correlation_id(queue: Queue) -> None:
    a = queue.enqueue("send", queue="mail", correlation_id="req-1")
    b = queue.enqueue("send", queue="mail", correlation_id="req-2")
    c = queue.enqueue("bill", queue="money", correlation_id="req-1")
    (claimed,) = queue.claim("w", queues=["money"])
    queue.complete(claimed)

    def ids(**filters: Any) -> list[uuid.UUID]:
        return [i for p in every_page(queue, limit=1, **filters) for i in p]

    assert ids(queue="mail") == [b, a]
    assert ids(job_type="bill") == [c]
    assert ids(status="completed") == [c]
    assert ids(status="pending", queue="mail") == [a, b]  # in the order they will run
    assert ids(correlation_id="req-1") == [c, a]
    assert ids(correlation_id="req-1", status="pending") == [a]
    assert ids(status="dead") == []
    assert ids(queue="", job_type="", status="", correlation_id="") == [c, b, a]


def test_a_job_without_a_correlation_id_is_correlated_by_its_own_id(queue: Queue, url: str) -> None:
    parent = queue.enqueue("t")
    (bulk,) = queue.enqueue_many([{"job_type": "t"}])
    given = queue.enqueue("t", correlation_id="req-9")
    with jobvisor.correlation_scope(parent.hex):  # what the worker sets while parent runs
        child = queue.enqueue("t")
    assert queue.get(parent).correlation_id == parent.hex
    assert queue.get(bulk).correlation_id == bulk.hex
    assert queue.get(child).correlation_id == parent.hex
    assert queue.get(given).correlation_id == "req-9"
    # Only the given ones are stored, so only they are in the correlation index.
    stored = _stored_correlation_ids(url, queue.engine)
    assert sorted(stored.values(), key=str) == sorted([None, None, "req-9", parent.hex], key=str)
    pages = every_page(queue, correlation_id=parent.hex, limit=1)
    assert [i for p in pages for i in p] == [child, parent]
    (job,) = dashboard_ops(queue).job_page(correlation_id=bulk.hex).jobs
    assert job.id == bulk and job.correlation_id == bulk.hex
    assert [
        j.id
        for j in dashboard_ops(queue).job_page(correlation_id=parent.hex, status="running").jobs
    ] == []
    assert dashboard_ops(queue).job_page(correlation_id=uuid.uuid4().hex).jobs == ()


def _stored_correlation_ids(url: str, engine: str) -> dict[str, str | None]:
    sql = "SELECT id, correlation_id FROM jobvisor_jobs"
    if engine == "postgres":
        with psycopg.connect(url) as conn:
            return {str(r[0]): r[1] for r in conn.execute(sql)}
    with sqlite3.connect(url.removeprefix("sqlite:///")) as lite:
        return {str(r[0]): r[1] for r in lite.execute(sql)}


def test_finished_jobs_are_listed_last_finished_first(cqueue: Queue, clock: Clock) -> None:
    first = cqueue.enqueue_many([{"job_type": "t"}] * 5)
    cqueue.complete_many(cqueue.claim("w", limit=5))  # five in the same instant
    clock.advance(1)
    last = cqueue.enqueue("t")
    cqueue.complete_many(cqueue.claim("w"))
    expected = [last, *sorted(first, reverse=True)]
    for limit in (1, 2, 3, 10):
        pages = every_page(cqueue, status="completed", limit=limit)
        assert [i for p in pages for i in p] == expected, limit
    page = dashboard_ops(cqueue).job_page(status="completed", order="newest")
    assert page.order == "the last finished first" and len(page.jobs) == 6
    assert every_page(cqueue, status="dead") == [[]]


def test_running_jobs_are_listed_last_claimed_first(cqueue: Queue, clock: Clock) -> None:
    early = cqueue.enqueue_many([{"job_type": "t"}] * 3)
    cqueue.claim("w", limit=3)
    clock.advance(1)
    late = cqueue.enqueue("t", queue="other")
    cqueue.claim("w", queues=["other"])
    pages = every_page(cqueue, status="running", limit=2)
    assert [len(p) for p in pages] == [2, 2]
    assert [i for p in pages for i in p] == [late, *sorted(early, reverse=True)]
    assert [i for p in every_page(cqueue, status="running", queue="other") for i in p] == [late]


def test_waiting_jobs_are_listed_in_claim_order_and_not_newest_first(queue: Queue) -> None:
    low = queue.enqueue("t", priority=0)
    high = queue.enqueue("t", priority=9)
    page = dashboard_ops(queue).job_page(status="pending")
    assert [j.id for j in page.jobs] == [high, low]
    assert page.order == "in the order they will run"
    assert dashboard_ops(queue).job_page().order == "newest first"
    with pytest.raises(InvalidArgument, match="order=newest with status='pending'"):
        dashboard_ops(queue).job_page(status="pending", order="newest")


def test_due_order_is_claim_order(cqueue: Queue, clock: Clock) -> None:
    low = cqueue.enqueue("t", priority=0, delay=0)
    high_late = cqueue.enqueue("t", priority=5, delay=2)
    high_early = cqueue.enqueue("t", priority=5, delay=1)
    later = cqueue.enqueue("t", priority=0, delay=3)
    pages = every_page(cqueue, order="due", limit=1)
    assert [i for p in pages for i in p] == [high_early, high_late, low, later]
    clock.advance(10)
    assert [j.id for j in cqueue.claim("w", limit=10)] == [high_early, high_late, low, later]
    assert dashboard_ops(cqueue).job_page(order="due").jobs == ()


def test_a_listing_cuts_a_large_payload(queue: Queue) -> None:
    queue.enqueue("t", {"text": "<script>" + "x" * 5000})
    (job,) = dashboard_ops(queue).job_page().jobs
    assert len(job.payload_preview) == browse.PREVIEW_CHARS
    assert "<script>xxx" in job.payload_preview
    assert job.payload_bytes > 5000 and job.payload_truncated


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        ({"status": "nope"}, "status='nope': expected one of pending"),
        ({"order": "oldest"}, "order='oldest': expected newest or due"),
        ({"cursor": "not-an-id"}, "cursor='not-an-id': expected a job id"),
        ({"order": "due", "cursor": "1~x"}, "cursor='1~x': expected priority~run_at~id"),
        ({"order": "due", "status": "dead"}, "order=due with status='dead'"),
        ({"order": "due", "correlation_id": "c"}, "order=due with a correlation id"),
        ({"status": "retryable", "order": "newest"}, "order=newest with status='retryable'"),
        ({"status": "dead", "cursor": "1~2~3"}, "cursor='1~2~3': expected time~id"),
        ({"status": "running", "cursor": "x~" + str(uuid.UUID(int=0))}, "expected time~id"),
        ({"status": "dead", "cursor": "9" * 30 + "~" + str(uuid.UUID(int=0))}, "expected time~id"),
        ({"limit": 0}, "limit=0: expected an integer >= 1"),
        ({"queue": " "}, "queue=' ': expected a non-empty string"),
    ],
)
def test_bad_filters_are_refused_with_the_value(
    queue: Queue, filters: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidArgument, match=message.replace("(", r"\(")):
        dashboard_ops(queue).job_page(**filters)


def test_queue_states_count_by_status_with_pauses_and_ages(cqueue: Queue, clock: Clock) -> None:
    cqueue.enqueue_many([{"job_type": "t", "queue": "mail"}] * 3)
    cqueue.enqueue("t", queue="money", delay=60)
    (job,) = cqueue.claim("w", queues=["mail"])
    cqueue.complete(job)
    cqueue.pause("idle")
    clock.advance(30)
    states = {s.name: s for s in dashboard_ops(cqueue).queue_states()}
    assert sorted(states) == ["idle", "mail", "money"]
    mail = states["mail"]
    assert mail.counts[JobStatus.PENDING] == Count(2)
    assert mail.counts[JobStatus.COMPLETED] == Count(1)
    assert mail.counts[JobStatus.DEAD] == Count(0)
    assert not mail.paused and states["idle"].paused
    assert mail.oldest_due_age == pytest.approx(30, abs=1)
    assert states["money"].oldest_due_age is None  # not due for another 30 s
    assert states["idle"].counts[JobStatus.PENDING] == Count(0)


def test_counts_past_the_cap_are_exact_while_the_table_is_small(queue: Queue) -> None:
    queue.enqueue_many([{"job_type": "t", "queue": "a"}] * 5 + [{"job_type": "t"}] * 2)
    states = {s.name: s for s in dashboard_ops(queue).queue_states(cap=3)}
    assert states["a"].counts[JobStatus.PENDING] == Count(5)
    assert states["default"].counts[JobStatus.PENDING] == Count(2)


def test_a_large_status_is_counted_in_a_sample_and_said_to_be_about(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = jobvisor.connect(pg_url)
    queue.migrate()
    queue.enqueue_many([{"job_type": "t", "payload": {"pad": "x" * 200}}] * 20_000)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("ANALYZE jobvisor_jobs")
    monkeypatch.setattr(browse, "SAMPLE_ROWS", 4000)
    (state,) = dashboard_ops(queue).queue_states(cap=100)
    pending = state.counts[JobStatus.PENDING]
    assert not pending.exact
    assert 10_000 < pending.value < 30_000
    assert state.counts[JobStatus.DEAD] == Count(0)
    queue.close()


def test_throughput_counts_completed_and_dead_per_minute(cqueue: Queue, clock: Clock) -> None:
    cqueue.enqueue_many([{"job_type": "ok"}] * 2 + [{"job_type": "bad", "max_attempts": 1}])
    for job in cqueue.claim("w", limit=3):
        if job.job_type == "ok":
            cqueue.complete(job)
        else:
            cqueue.fail(job, "boom")
    clock.advance(120)
    minutes = dashboard_ops(cqueue).throughput(minutes=5)
    assert len(minutes) == 5
    assert [(m.completed, m.dead) for m in minutes] == [(0, 0), (0, 0), (2, 1), (0, 0), (0, 0)]
    assert minutes[-1].start <= clock() < minutes[-1].start.replace(second=59, microsecond=9)


def test_a_busy_minute_is_estimated_past_the_cap(pg_url: str) -> None:
    clock = Clock()
    queue = jobvisor.connect(pg_url, clock=clock)
    queue.migrate()
    start = clock().replace(second=0)
    queue.enqueue_many([{"job_type": "t"}] * 40)
    for i, job in enumerate(queue.claim("w", limit=40)):
        clock.advance(0.5 if i else (start - clock()).total_seconds() + 10)
        queue.complete(job)
    clock.advance(60)
    minutes = dashboard_ops(queue).throughput(minutes=2, cap=10)
    busy = next(m for m in minutes if m.completed)
    assert not busy.exact
    assert 40 <= busy.completed <= 120  # 10 jobs in about 5 s: about 120 a minute, at least 40
    assert [m.completed for m in dashboard_ops(queue).throughput(minutes=2)].count(40) == 1
    queue.close()


def test_supervisor_rows_fresh_stale_and_forgotten(cqueue: Queue, clock: Clock) -> None:
    workers = [{"id": "w-1", "pid": 12, "restarts": 0, "running": 2}]
    beat = SupervisorBeat("s-1", "host-a", 10, "0.1.0", True, workers)
    service_ops(cqueue).supervisor_heartbeat(beat)
    service_ops(cqueue).supervisor_heartbeat(
        SupervisorBeat("s-2", "host-b", 11, "0.1.0", False, [])
    )
    clock.advance(20)
    service_ops(cqueue).supervisor_heartbeat(beat)  # s-1 beats again, s-2 has gone silent
    rows = dashboard_ops(cqueue).supervisors(fresh=15)
    assert [(r.id, r.leader, r.workers) for r in rows] == [("s-1", True, tuple(workers))]
    assert rows[0].uptime == pytest.approx(20, abs=0.1)
    assert [r.id for r in dashboard_ops(cqueue).supervisors(fresh=60)] == ["s-1", "s-2"]
    cqueue.enqueue("t")
    cqueue.claim("w-1")
    assert service_ops(cqueue).running_by_worker() == {"w-1": 1}
    assert service_ops(cqueue).supervisor_prune(15) == 1
    dashboard_ops(cqueue).supervisor_forget("s-1")
    assert dashboard_ops(cqueue).supervisors(fresh=60) == []


# --- the plans ---------------------------------------------------------------------


def _plan(url: str, engine: str, sql: LiteralString, params: dict[str, Any]) -> str:
    if engine == "postgres":
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ANALYZE jobvisor_jobs")
            conn.execute(PG_SESSION_SETUP)  # the settings of jobvisor's own sessions
            return "\n".join(r[0] for r in conn.execute("EXPLAIN " + sql, params))
    target = url.removeprefix("sqlite:///")
    with sqlite3.connect(target) as lite:
        lite.execute("ANALYZE")
        return "\n".join(str(r[-1]) for r in lite.execute("EXPLAIN QUERY PLAN " + sql, params))


def test_every_read_walks_an_index(queue: Queue, url: str) -> None:
    jobs = [
        {"job_type": f"t{i % 7}", "queue": f"q{i % 5}", "correlation_id": f"c{i % 300}"}
        for i in range(3000)
    ]
    queue.enqueue_many(jobs)
    pg = queue.engine == "postgres"
    module: Any = sql_postgres if pg else sql_sqlite
    some_id = str(uuid.uuid4())
    params = {
        "status": "dead",
        "queue": "q1",
        "job_type": None,
        "correlation_id": "c7",
        "limit": 51,
        "before": some_id,
        "priority": 0,
        "run_at": None,
        "after": some_id,
        "at": dt.datetime.now(dt.UTC) if pg else time.time(),
        "own": some_id,
        "cap": 10_001,
        # The time, as the runner passes it (no statement reads the clock).
        "now": dt.datetime.now(dt.UTC) if pg else time.time(),
        "first": 29_000_000,
        "last": 29_000_059,
        "queues": ["q1", "q2"] if pg else '["q1", "q2"]',
    }
    expected = {
        "JOB_PAGE_NEWEST": "jobvisor_jobs_pkey" if pg else "sqlite_autoindex_jobvisor_jobs_1",
        "JOB_PAGE_FINISHED": "jobvisor_jobs_finished_idx",
        "JOB_PAGE_RUNNING": "jobvisor_jobs_lease_idx",
        "JOB_PAGE_OF_CORRELATION": "jobvisor_jobs_correlation_idx",
        "JOB_PAGE_DUE": "jobvisor_jobs_claim_idx",
        "JOB_COUNT_WAITING_CAPPED": "jobvisor_jobs_claim_idx",
        "JOB_COUNT_RUNNING_CAPPED": "jobvisor_jobs_lease_idx",
        "JOB_COUNT_FINISHED_CAPPED": "jobvisor_jobs_finished_idx",
        "JOB_OLDEST_DUE_OF_QUEUES": "jobvisor_jobs_due_idx",
        "JOB_FINISHED_PER_MINUTE": "jobvisor_jobs_finished_idx",
        "JOB_RUNNING_BY_WORKER": "jobvisor_jobs_lease_idx",
    }
    for name, index in expected.items():
        given = {**params, "status": None} if name == "JOB_PAGE_OF_CORRELATION" else params
        plan = _plan(url, queue.engine, getattr(module, name), given)
        assert index in plan, (name, plan)
        assert "Seq Scan" not in plan and "SCAN jobvisor_jobs\n" not in plan + "\n", (name, plan)
        # No plan sorts more than the jobs of one instant (an incremental
        # sort, on the order of an index): a full sort is priced out and
        # would cost a JIT compile.
        assert not re.search(r"(^|->)\s*Sort\s+\(|TEMP B-TREE FOR ORDER BY", plan, re.M), (
            name,
            plan,
        )
    # The page statements the dashboard uses, and no more: the status index is gone.
    assert not hasattr(module, "JOB_PAGE_NEWEST_OF_STATUS")
