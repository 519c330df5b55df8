"""Fleet-wide limits: concurrency per job type, per queue and per
concurrency key, and rates, enforced inside the claim on both engines. Jobs
over a limit stay pending in their order; a slot frees with the statement
that takes its job out of `running`."""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Any

import pytest

import jobvisor
from jobvisor import JobStatus, Queue
from jobvisor.queue.errors import InvalidArgument
from jobvisor.queue.internal import service_ops
from jobvisor.queue.model import Limit, LimitScope, LimitSource
from jobvisor.queue.notices import Notice, NoticeKind
from tests.support.aio import run_async
from tests.support.invariants import assert_invariants, query_all
from tests.support.queue import Clock, MakeQueue, run_in_processes
from tests.support.worker import execute


def _types(jobs: list[Any]) -> dict[str, int]:
    return dict(collections.Counter(j.job_type for j in jobs))


def _running(url: str) -> dict[str, int]:
    (rows,) = query_all(
        url, ["SELECT job_type, COUNT(*) FROM jobvisor_jobs WHERE status = 'running' GROUP BY 1"]
    )
    return {str(t): int(n) for t, n in rows}


def test_a_type_limit_caps_its_running_jobs_and_keeps_their_order(queue: Queue, url: str) -> None:
    ids = [queue.enqueue("report", {"n": n}, priority=10 - n) for n in range(8)]
    free = [queue.enqueue("mail") for _ in range(4)]
    queue.set_limit(job_type="report", concurrency=3)
    jobs = queue.claim("w", limit=50)
    assert _types(jobs) == {"report": 3, "mail": 4}
    assert [j.id for j in jobs if j.job_type == "report"] == ids[:3]
    assert {j.id for j in jobs if j.job_type == "mail"} == set(free)
    assert queue.claim("w", limit=50) == []
    queue.complete(jobs[0])
    (next_job,) = queue.claim("w", limit=50)
    assert next_job.id == ids[3]  # the next in order, and only one
    assert _running(url) == {"report": 3, "mail": 4}
    assert_invariants(url)


def test_a_queue_limit_counts_every_type_in_it(queue: Queue) -> None:
    for job_type in ("a", "b", "c"):
        queue.enqueue_many([{"job_type": job_type, "queue": "slow"}] * 2)
    queue.enqueue_many([{"job_type": "a"}] * 2)
    queue.set_limit(queue="slow", concurrency=2)
    jobs = queue.claim("w", limit=50)
    assert collections.Counter(j.queue for j in jobs) == {"slow": 2, "default": 2}


def test_key_concurrency_caps_each_key_and_leaves_unkeyed_jobs_alone(
    queue: Queue, url: str
) -> None:
    queue.set_limit(job_type="sync", key_concurrency=2)
    for tenant in ("t1", "t2", "t3"):
        for _ in range(4):
            queue.enqueue("sync", concurrency_key=tenant)
    queue.enqueue_many([{"job_type": "sync"}] * 3)  # no key: only a type limit would count it
    jobs = queue.claim("w", limit=100)
    (rows,) = query_all(
        url,
        ["SELECT concurrency_key, COUNT(*) FROM jobvisor_jobs WHERE status = 'running' GROUP BY 1"],
    )
    assert {key: int(n) for key, n in rows} == {"t1": 2, "t2": 2, "t3": 2, None: 3}
    assert len(jobs) == 9
    assert queue.claim("w", limit=100) == []


def test_a_key_and_a_type_limit_together(queue: Queue) -> None:
    queue.set_limit(job_type="sync", concurrency=3, key_concurrency=1)
    for tenant in ("t1", "t2", "t3", "t4", "t5"):
        queue.enqueue_many([{"job_type": "sync", "concurrency_key": tenant}] * 2)
    assert len(queue.claim("w", limit=100)) == 3
    assert queue.claim("w", limit=100) == []


@pytest.mark.parametrize("how", ["complete", "fail", "dead", "cancel", "release", "snooze"])
def test_a_slot_frees_when_its_job_leaves_running(queue: Queue, how: str) -> None:
    queue.enqueue_many([{"job_type": "t", "max_attempts": 1 if how == "dead" else 5}] * 3)
    queue.set_limit(job_type="t", concurrency=1)
    (job,) = queue.claim("w", limit=10)
    assert queue.claim("w", limit=10) == []
    if how == "complete":
        queue.complete(job)
    elif how in ("fail", "dead"):
        queue.fail(job, "boom", retry_in=3600)
    elif how == "cancel":
        queue.cancel(job.id)  # a cancel request: the worker settles the job cancelled
        queue.complete(job)
        assert queue.get(job.id).status is JobStatus.CANCELLED
    elif how == "release":
        queue.release(job)
    else:
        queue.snooze(job, 3600)
    (following,) = queue.claim("w", limit=10)
    assert following.id != job.id or how == "release"


def test_a_reaped_or_crashed_jobs_slot_frees(cqueue: Queue, clock: Clock) -> None:
    cqueue.enqueue_many([{"job_type": "t"}] * 4)
    cqueue.set_limit(job_type="t", concurrency=1)
    (first,) = cqueue.claim("w1", limit=10, lease=5)
    assert cqueue.claim("w2", limit=10) == []
    clock.advance(6)
    assert cqueue.reap_expired() == 1
    (second,) = cqueue.claim("w2", limit=10, lease=60)
    assert second.id != first.id
    assert cqueue.requeue_crashed("w2", error="worker died") == 1
    (third,) = cqueue.claim("w3", limit=10, lease=60)
    assert third.id not in (first.id, second.id)


def test_a_rate_is_a_token_bucket_refilled_by_the_database_clock(
    cqueue: Queue, clock: Clock
) -> None:
    cqueue.enqueue_many([{"job_type": "call"}] * 40)
    cqueue.set_limit(job_type="call", rate="5/s")
    assert len(cqueue.claim("w", limit=100)) == 5  # a full bucket
    assert cqueue.claim("w", limit=100) == []
    clock.advance(0.5)
    assert len(cqueue.claim("w", limit=100)) == 2  # 2.5 tokens: two whole ones
    clock.advance(0.1)
    assert len(cqueue.claim("w", limit=100)) == 1  # the half left, and half more
    clock.advance(3600)
    assert len(cqueue.claim("w", limit=100)) == 5  # never more than one bucket


def test_a_rate_per_minute_and_a_concurrency_together(cqueue: Queue, clock: Clock) -> None:
    cqueue.enqueue_many([{"job_type": "call"}] * 40)
    cqueue.set_limit(job_type="call", rate="6/m", concurrency=4)
    jobs = cqueue.claim("w", limit=100)
    assert len(jobs) == 4
    cqueue.complete_many(jobs)
    assert len(cqueue.claim("w", limit=100)) == 2  # the bucket's rest
    clock.advance(10)
    assert len(cqueue.claim("w", limit=100)) == 1


def _keys_running(url: str) -> dict[str | None, int]:
    (rows,) = query_all(
        url,
        ["SELECT concurrency_key, COUNT(*) FROM jobvisor_jobs WHERE status = 'running' GROUP BY 1"],
    )
    return {key: int(n) for key, n in rows}


def _buckets(url: str) -> dict[str, float]:
    (rows,) = query_all(url, ["SELECT concurrency_key, tokens FROM jobvisor_key_buckets"])
    return {str(key): float(tokens) for key, tokens in rows}


def test_a_key_rate_gives_each_key_a_bucket_and_leaves_unkeyed_jobs_alone(
    cqueue: Queue, clock: Clock, url: str
) -> None:
    cqueue.set_limit(job_type="call", key_rate="3/s")
    for tenant in ("t1", "t2"):
        cqueue.enqueue_many([{"job_type": "call", "concurrency_key": tenant}] * 10)
    cqueue.enqueue_many([{"job_type": "call"}] * 4)  # no key: no key bucket counts it
    assert len(cqueue.claim("w", limit=100)) == 10
    assert _keys_running(url) == {"t1": 3, "t2": 3, None: 4}  # a full bucket each
    assert _buckets(url) == {"t1": 0.0, "t2": 0.0}  # made by the first take
    assert cqueue.claim("w", limit=100) == []
    clock.advance(0.5)
    assert len(cqueue.claim("w", limit=100)) == 2  # 1.5 tokens each: one whole
    clock.advance(3600)
    assert len(cqueue.claim("w", limit=100)) == 6  # never more than one bucket each
    assert_invariants(url)


def test_a_key_rate_with_a_type_rate_and_a_key_concurrency(
    cqueue: Queue, clock: Clock, url: str
) -> None:
    cqueue.set_limit(job_type="call", rate="5/s", key_rate="2/s", key_concurrency=1)
    for tenant in ("t1", "t2", "t3", "t4"):
        cqueue.enqueue_many([{"job_type": "call", "concurrency_key": tenant}] * 5)
    jobs = cqueue.claim("w", limit=100)
    assert _keys_running(url) == {"t1": 1, "t2": 1, "t3": 1, "t4": 1}  # key_concurrency
    cqueue.complete_many(jobs)
    jobs = cqueue.claim("w", limit=100)
    assert len(jobs) == 1  # the type's bucket: 5 less 4
    cqueue.complete_many(jobs)
    assert cqueue.claim("w", limit=100) == []
    clock.advance(0.4)  # the type: 2 tokens; each key: 1.8 (one) or 0.8 (none)
    jobs = cqueue.claim("w", limit=100)
    assert len(jobs) == 2
    cqueue.complete_many(jobs)
    clock.advance(3600)  # every bucket full: each key 2, the type 5
    assert len(cqueue.claim("w", limit=100)) == 4  # key_concurrency again
    assert_invariants(url)


def _claim_keys(q: Queue, rounds: int) -> collections.Counter[str]:
    """The concurrency keys (carried in the payloads) of `rounds` claims' jobs."""
    started: collections.Counter[str] = collections.Counter()
    for _ in range(rounds):
        started.update(job.payload["key"] for job in q.claim("w", limit=10))
    return started


def test_one_keys_backlog_does_not_starve_the_other_keys(cqueue: Queue, clock: Clock) -> None:
    cqueue.set_limit(job_type="call", key_rate="2/s")
    # The busy key's jobs come first in claim order, far more than a window.
    busy = {
        "job_type": "call",
        "concurrency_key": "busy",
        "priority": 5,
        "payload": {"key": "busy"},
    }
    cqueue.enqueue_many([busy] * 300)
    for tenant in ("a", "b", "c"):
        job = {"job_type": "call", "concurrency_key": tenant, "payload": {"key": tenant}}
        cqueue.enqueue_many([job] * 3)
    assert _claim_keys(cqueue, 3) == {"busy": 2, "a": 2, "b": 2, "c": 2}
    clock.advance(1.0)
    assert _claim_keys(cqueue, 3) == {"busy": 2, "a": 1, "b": 1, "c": 1}  # the others' rest


def test_refilled_key_buckets_are_pruned_and_nothing_else(
    cqueue: Queue, clock: Clock, url: str
) -> None:
    cqueue.set_limit(job_type="call", key_rate="4/s")
    cqueue.enqueue_many([{"job_type": "call", "concurrency_key": "k1"}] * 4)
    cqueue.enqueue_many([{"job_type": "call", "concurrency_key": "k2"}] * 1)
    cqueue.claim("w", limit=100)
    assert _buckets(url) == {"k1": 0.0, "k2": 3.0}
    clock.advance(0.3)  # k2 full again (3 + 1.2), k1 not (1.2)
    assert service_ops(cqueue).prune_key_buckets() == 1
    assert set(_buckets(url)) == {"k1"}
    clock.advance(0.8)  # k1 full again too
    assert service_ops(cqueue).prune_key_buckets() == 1
    assert _buckets(url) == {}
    cqueue.enqueue_many([{"job_type": "call", "concurrency_key": "k1"}] * 9)
    assert len(cqueue.claim("w", limit=100)) == 4  # a pruned key has a full bucket
    cqueue.set_limit(job_type="call", concurrency=100)  # no key rate any more
    assert service_ops(cqueue).prune_key_buckets() == 1
    assert len(cqueue.claim("w", limit=100)) == 5


def test_a_limited_claim_that_fails_part_way_leaves_nothing_changed(queue: Queue, url: str) -> None:
    """The limited claim's statements go together (one pipeline on
    PostgreSQL): when the last fails, the claim and the group's take before
    it are rolled back, and the next claim goes on as if it never ran."""
    queue.set_limit(job_type="call", rate="5/s", key_rate="2/s")
    queue.enqueue_many([{"job_type": "call", "concurrency_key": "k"}] * 3)
    away = "ALTER TABLE jobvisor_key_buckets RENAME TO jobvisor_kb_away"
    execute(url, away, away)
    for _ in range(2):  # the same connection again: back in a clean state
        with pytest.raises(jobvisor.JobvisorError, match="jobvisor_key_buckets"):
            queue.claim("w", limit=10)
    (statuses, tokens) = query_all(
        url,
        [
            "SELECT status, COUNT(*) FROM jobvisor_jobs GROUP BY 1",
            "SELECT tokens FROM jobvisor_limits",
        ],
    )
    assert statuses == [("pending", 3)]
    assert tokens == [(5.0,)]
    back = "ALTER TABLE jobvisor_kb_away RENAME TO jobvisor_key_buckets"
    execute(url, back, back)
    assert len(queue.claim("w", limit=10)) == 2  # the key's bucket of two
    assert_invariants(url)


def test_set_limit_replaces_and_clear_limit_removes(queue: Queue) -> None:
    queue.set_limit(job_type="t", concurrency=3, rate="10/h")
    queue.set_limit(queue="q", concurrency=2)
    queue.set_limit(job_type="t", key_concurrency=1, key_rate="30/m")
    assert queue.limits() == [
        Limit(LimitScope.QUEUE, "q", concurrency=2),
        Limit(LimitScope.TYPE, "t", key_concurrency=1, key_rate="30/m"),
    ]
    assert queue.limits()[1].describe() == "key=1 key_rate=30/m"
    assert queue.clear_limit(job_type="t") is True
    assert queue.clear_limit(job_type="t") is False
    assert queue.limits() == [Limit(LimitScope.QUEUE, "q", concurrency=2)]
    assert queue.limits()[0].describe() == "concurrency=2"


def test_cleared_limits_let_the_waiting_jobs_run(queue: Queue) -> None:
    queue.enqueue_many([{"job_type": "t"}] * 5)
    queue.set_limit(job_type="t", concurrency=1)
    assert len(queue.claim("w", limit=10)) == 1
    queue.clear_limit(job_type="t")
    assert len(queue.claim("w", limit=10)) == 4


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"job_type": "t", "concurrency": 0}, "concurrency=0"),
        ({"job_type": "t", "concurrency": True}, "concurrency=True"),
        ({"job_type": "t", "concurrency": 10**7}, "concurrency=10000000"),
        ({"job_type": "t", "rate": "100"}, "rate='100'"),
        ({"job_type": "t", "rate": "0/s"}, "rate='0/s'"),
        ({"job_type": "t", "rate": "5/d"}, "rate='5/d'"),
        ({"job_type": "t", "rate": "-5/s"}, "rate='-5/s'"),
        ({"job_type": "t", "rate": 5}, "rate=5"),
        ({"job_type": "t"}, "expected concurrency, key_concurrency, rate or key_rate"),
        ({"queue": "q", "key_concurrency": 2}, "key_concurrency=2 for queue 'q'"),
        ({"job_type": "t", "key_rate": "10"}, "key_rate='10'"),
        ({"job_type": "t", "key_rate": "0/m"}, "key_rate='0/m'"),
        ({"job_type": "t", "key_rate": True}, "key_rate=True"),
        ({"job_type": "t", "rate": "5/s", "key_rate": "5/y"}, "key_rate='5/y'"),
        ({"queue": "q", "key_rate": "5/s"}, "key_rate='5/s' for queue 'q'"),
        ({"concurrency": 2}, "expected exactly one of queue or job_type"),
        ({"queue": "q", "job_type": "t", "concurrency": 2}, "exactly one of queue or job_type"),
        ({"queue": "", "concurrency": 2}, "queue=''"),
    ],
)
def test_a_bad_limit_is_refused_and_nothing_written(
    queue: Queue, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidArgument, match=message.replace("(", r"\(")):
        queue.set_limit(**kwargs)
    assert queue.limits() == []


def test_a_bad_concurrency_key_is_refused(queue: Queue, url: str) -> None:
    with pytest.raises(InvalidArgument, match="concurrency_key="):
        queue.enqueue("t", concurrency_key="")
    with pytest.raises(InvalidArgument, match=r"jobs\[1\]: concurrency_key="):
        queue.enqueue_many([{"job_type": "t"}, {"job_type": "t", "concurrency_key": 7}])
    assert query_all(url, ["SELECT COUNT(*) FROM jobvisor_jobs"])[0][0][0] == 0


def test_enqueue_many_carries_the_concurrency_key(queue: Queue, url: str) -> None:
    queue.enqueue_many([{"job_type": "t", "concurrency_key": f"k{i}"} for i in range(3)])
    queue.enqueue_many([{"job_type": "t", "concurrency_key": "k9", "dedupe_key": "d"}])
    (rows,) = query_all(url, ["SELECT concurrency_key FROM jobvisor_jobs ORDER BY 1"])
    assert [r[0] for r in rows] == ["k0", "k1", "k2", "k9"]


def test_limits_sync_writes_the_code_and_keeps_the_operators(queue: Queue) -> None:
    queue.set_limit(job_type="by_hand", concurrency=7)
    queue.set_limit(job_type="other_app", concurrency=1)
    declared = [
        Limit(LimitScope.TYPE, "report", concurrency=3, source=LimitSource.CODE),
        Limit(LimitScope.TYPE, "sync", key_concurrency=1, rate="20/s", source=LimitSource.CODE),
        Limit(LimitScope.TYPE, "tenant", key_rate="5/s", source=LimitSource.CODE),
    ]
    handled = ["report", "sync", "tenant", "by_hand", "plain"]
    assert service_ops(queue).limits_sync(declared, job_types=handled) == 3
    assert service_ops(queue).limits_sync(declared, job_types=handled) == 0  # nothing differs
    names = {lim.name: lim for lim in queue.limits()}
    assert set(names) == {"by_hand", "other_app", "report", "sync", "tenant"}
    assert names["sync"].rate == "20/s"
    assert names["tenant"].key_rate == "5/s"
    changed = [
        *declared[:2],
        Limit(LimitScope.TYPE, "tenant", key_rate="6/s", source=LimitSource.CODE),
    ]
    assert service_ops(queue).limits_sync(changed, job_types=handled) == 1  # a key rate differs
    assert names["report"].source is LimitSource.CODE
    # A declaration removed from the code is removed from the database.
    assert service_ops(queue).limits_sync(declared[:1], job_types=handled) == 2
    assert {lim.name for lim in queue.limits()} == {"by_hand", "other_app", "report"}


def _sync_limits_repeatedly(url: str, rounds: int) -> int:
    """Write a type's declared limits as a booting worker does, alternating
    between two versions of them so each write changes something."""
    versions = [
        [Limit(LimitScope.TYPE, "t", concurrency=n, key_rate="5/s", source=LimitSource.CODE)]
        for n in (2, 3)
    ]
    with jobvisor.connect(url) as q:
        return sum(
            service_ops(q).limits_sync(versions[i % 2], job_types=["t"]) for i in range(rounds)
        )


def test_workers_booting_at_once_write_their_limits_without_a_deadlock(
    make_queue: MakeQueue, url: str
) -> None:
    make_queue()  # migrated
    changed = run_in_processes(_sync_limits_repeatedly, [(url, 30) for _ in range(4)])
    assert sum(changed) > 0  # (a round may find another's write already there)
    (limit,) = make_queue().limits()
    assert limit.concurrency in (2, 3) and limit.key_rate == "5/s"


def test_the_async_face_limits_too(url: str) -> None:
    async def body() -> None:
        async with jobvisor.connect_async(url) as q:
            await q.migrate()
            await q.set_limit(job_type="t", concurrency=2)
            await q.enqueue_many([{"job_type": "t"}] * 5)
            assert len(await q.claim("w", limit=10)) == 2
            assert [lim.name for lim in await q.limits()] == ["t"]
            assert await q.clear_limit(job_type="t")
            assert len(await q.claim("w", limit=10)) == 3

    run_async(body)


def test_a_limited_claim_takes_limited_jobs_behind_a_full_batch(queue: Queue) -> None:
    queue.enqueue_many([{"job_type": "plain"}] * 30)
    queue.enqueue_many([{"job_type": "limited"}] * 3)
    queue.set_limit(job_type="limited", concurrency=2)
    claimed: list[Any] = []
    for _ in range(4):
        claimed += queue.claim("w", limit=5)
    assert _types(claimed)["limited"] == 2  # not starved by the batches of others


def _claim_and_hold(url: str, worker: str, rounds: int) -> int:
    """Claim one job at a time, hold it briefly, complete it; the most this
    process saw running of the limited type at once (read after each claim)."""
    most = 0
    with jobvisor.connect(url) as q:
        for _ in range(rounds):
            jobs = q.claim(worker, limit=3)
            if jobs:
                (rows,) = query_all(
                    url, ["SELECT COUNT(*) FROM jobvisor_jobs WHERE status = 'running'"]
                )
                most = max(most, int(rows[0][0]))
                time.sleep(0.002)
                q.complete_many(jobs)
    return most


def test_racing_claimers_in_processes_never_pass_the_limit(make_queue: MakeQueue, url: str) -> None:
    q = make_queue()
    q.enqueue_many([{"job_type": "t"}] * 150)
    q.set_limit(job_type="t", concurrency=3)
    seen = run_in_processes(_claim_and_hold, [(url, f"w{i}", 80) for i in range(4)])
    assert max(seen) <= 3
    assert_invariants(url)


def test_a_limited_jobs_completion_or_failure_wakes_its_queues_workers(pg_url: str) -> None:
    """PostgreSQL: the statement that frees a limited slot notifies the
    job's queue (an unlimited job's completion sends nothing)."""
    began, completed, failed = limited_end_notices(pg_url)
    assert began.kind == NoticeKind.MISSED
    assert completed == failed == Notice(NoticeKind.JOB, "mail")


def limited_end_notices(url: str) -> list[Notice]:
    """The notices a listener on queue `mail` hears: when listening begins,
    after a limited job's completion (an unlimited one's first, which must
    send none), after a limited job's failure."""
    with jobvisor.connect(url) as q:
        q.migrate()
        q.set_limit(job_type="capped", concurrency=1)
        q.enqueue_many([{"job_type": "capped", "queue": "mail"}] * 2)
        q.enqueue("free", queue="mail")
        held = {j.job_type: j for j in q.claim("w", limit=10)}
    assert set(held) == {"capped", "free"}

    async def body() -> list[Notice]:
        got: list[Notice] = []
        async with jobvisor.connect_async(url) as aq:
            notices = aq.notifications(queues=["mail"])
            async with asyncio.timeout(30):
                got.append(await anext(notices))  # missed: listening begins
                await asyncio.sleep(0.2)  # the LISTEN is in place before the changes
                waiting = asyncio.ensure_future(anext(notices))
                await aq.complete(held["free"])
                done, _ = await asyncio.wait({waiting}, timeout=0.5)
                assert not done, "an unlimited job's completion sent a notice"
                await aq.complete(held["capped"])
                got.append(await waiting)
                (following,) = await aq.claim("w", limit=10)
                await aq.fail(following, "boom", retry_in=3600)
                got.append(await anext(notices))
            await notices.aclose()
        return got

    return run_async(body)
