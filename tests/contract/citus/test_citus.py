"""What Citus mode adds to the queue's contract: where jobs live (buckets,
shards), the claim's order across buckets, `migrate` on a cluster, and what
the mode refuses (docs/design.md, "Scale-out")."""

from __future__ import annotations

import asyncio
import collections
import os
from typing import Any

import psycopg
import pytest

import jobvisor
from jobvisor import InvalidArgument, Queue
from jobvisor.queue.drivers.citus.dialect import (
    BATCH_BUCKET_ROWS,
    BUCKETS,
    bucket_of,
    key_bucket,
)
from jobvisor.queue.internal import service_ops
from jobvisor.queue.notices import Notice, NoticeKind
from tests.contract.queue.test_limits import limited_end_notices
from tests.support.aio import run_async
from tests.support.citus import create_database, drop_database
from tests.support.invariants import assert_invariants
from tests.support.queue import row_count


def _rows(url: str, sql: str) -> list[Any]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql).fetchall()


def test_every_bucket_has_a_shard_of_its_own(queue: Queue, url: str) -> None:
    shards = _rows(
        url,
        "SELECT k, get_shard_id_for_distribution_column('jobvisor_jobs', value)"
        " FROM jobvisor_buckets ORDER BY k",
    )
    assert [k for k, _ in shards] == list(range(BUCKETS))
    assert len({shard for _, shard in shards}) == BUCKETS
    nodes = _rows(
        url,
        "SELECT count(DISTINCT nodeport) FROM pg_dist_shard_placement JOIN pg_dist_shard"
        " USING (shardid) WHERE logicalrelid = 'jobvisor_jobs'::regclass",
    )
    assert nodes[0][0] >= 2  # spread over the worker nodes


def test_jobs_spread_over_the_buckets_and_a_keys_jobs_share_one(queue: Queue, url: str) -> None:
    ids = [queue.enqueue("t", {"i": i}) for i in range(640)]
    placed = dict(_rows(url, "SELECT id, bucket FROM jobvisor_jobs"))
    values = dict(_rows(url, "SELECT k, value FROM jobvisor_buckets"))
    assert all(placed[i] == values[bucket_of(i)] for i in ids)
    counts = collections.Counter(bucket_of(i) for i in ids)
    assert len(counts) == BUCKETS and min(counts.values()) >= 5, counts
    keyed = [queue.enqueue("t", {"n": n}, concurrency_key="tenant-7") for n in range(20)]
    keyed += queue.enqueue_many(
        [{"job_type": "t", "payload": {"n": n}, "concurrency_key": "tenant-7"} for n in range(20)]
    )
    assert {bucket_of(i) for i in keyed} == {key_bucket("tenant-7")}
    assert_invariants(url)


def test_a_bulk_enqueue_puts_each_run_of_jobs_without_a_key_in_one_bucket(
    queue: Queue, url: str
) -> None:
    small = queue.enqueue_many([{"job_type": "t", "payload": {"i": i}} for i in range(10)])
    assert len({bucket_of(i) for i in small}) == 1  # one shard: a commit on one node
    big = queue.enqueue_many(
        [{"job_type": "t", "payload": {"i": i}} for i in range(2 * BATCH_BUCKET_ROWS + 7)]
        + [{"job_type": "t", "delay": 5}, {"job_type": "t", "concurrency_key": "tenant-7"}]
    )
    plain = big[:-1]  # the delayed job too: no key
    runs = [plain[i : i + BATCH_BUCKET_ROWS] for i in range(0, len(plain), BATCH_BUCKET_ROWS)]
    assert [len({bucket_of(i) for i in run}) for run in runs] == [1, 1, 1]
    assert bucket_of(big[-1]) == key_bucket("tenant-7")  # a keyed job in its key's
    assert plain == sorted(plain)  # in the order they were made
    placed = dict(_rows(url, "SELECT id, bucket FROM jobvisor_jobs"))
    values = dict(_rows(url, "SELECT k, value FROM jobvisor_buckets"))
    assert all(placed[i] == values[bucket_of(i)] for i in small + big)
    assert_invariants(url)


def test_a_dedupe_key_is_unique_across_the_cluster(queue: Queue, url: str) -> None:
    first = [queue.enqueue("t", {"k": k}, dedupe_key=f"key-{k}") for k in range(64)]
    again = [queue.enqueue("t", {"again": k}, dedupe_key=f"key-{k}") for k in range(64)]
    assert again == first
    bulk = queue.enqueue_many(
        [{"job_type": "t", "payload": {}, "dedupe_key": f"key-{k}"} for k in range(64)]
    )
    assert bulk == first
    assert row_count(url) == 64


def test_the_claim_takes_the_highest_priority_across_buckets(queue: Queue) -> None:
    queue.enqueue_many([{"job_type": "low", "payload": {"i": i}} for i in range(200)])
    urgent = [queue.enqueue("urgent", {"i": i}, priority=10) for i in range(3)]
    claimed = queue.claim("w", limit=3)
    assert sorted(j.id for j in claimed) == sorted(urgent)
    rest = queue.claim("w", limit=5)
    assert [j.job_type for j in rest] == ["low"] * 5
    assert rest == sorted(rest, key=lambda j: (j.run_at, j.id))  # oldest first


def test_two_claimers_never_share_a_job(queue: Queue, url: str) -> None:
    queue.enqueue_many([{"job_type": "t", "payload": {"i": i}} for i in range(300)])
    other = jobvisor.connect(url, citus=True)
    try:
        seen: list[Any] = []
        while batch := queue.claim("a", limit=7) + other.claim("b", limit=11):
            seen.extend(j.id for j in batch)
            queue.complete_many([j for j in batch if j.worker_id == "a"])
            other.complete_many([j for j in batch if j.worker_id == "b"])
        assert len(seen) == len(set(seen)) == 300
    finally:
        other.close()
    assert_invariants(url)


def test_migrate_again_changes_nothing(queue: Queue, url: str) -> None:
    assert queue.migrate() == []
    assert _rows(url, "SELECT count(*) FROM jobvisor_buckets") == [(BUCKETS,)]


@pytest.mark.parametrize(
    "refused",
    [
        lambda q: q.enqueue_workflow(jobvisor.chain(("t", {}), "t")),
        lambda q: q.batch().__enter__(),
        lambda q: q.signal(q.enqueue("t"), "go"),
    ],
    ids=["workflow", "batch", "signal"],
)
def test_what_spans_buckets_is_refused_and_nothing_written(
    queue: Queue, url: str, refused: Any
) -> None:
    before = row_count(url)
    with pytest.raises(InvalidArgument, match="not available in Citus mode"):
        refused(queue)
    assert row_count(url) - before <= 1  # the signal test's own job
    written = "SELECT (SELECT count(*) FROM jobvisor_workflows) + (SELECT count(*) FROM"
    written += " jobvisor_batches)"
    assert _rows(url, written) == [(0,)]


def test_the_batch_maintenance_has_nothing_to_do(queue: Queue, url: str) -> None:
    """The leader's batch sweep and batch cleanup (its cleaner's) on a
    cluster, which has no batches: nothing read, nothing deleted."""
    queue.enqueue("t")
    (job,) = queue.claim("w")
    queue.complete(job)
    assert service_ops(queue).batch_sweep() == 0
    assert service_ops(queue).batch_cleanup(0) == 0
    assert queue.cleanup(0) == 1
    assert row_count(url) == 0


def test_citus_mode_is_asked_for_clearly(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBVISOR_CITUS", "sometimes")
    with pytest.raises(InvalidArgument, match=r"JOBVISOR_CITUS='sometimes': expected on or off"):
        jobvisor.connect(url)
    with pytest.raises(InvalidArgument, match="expected a postgresql:// URL"):
        jobvisor.connect("sqlite:///x.db", citus=True)
    monkeypatch.setenv("JOBVISOR_CITUS", "on")
    with jobvisor.connect(url) as q:
        q.enqueue("t")
        assert [j.job_type for j in q.claim("w")] == ["t"]
    assert os.environ["JOBVISOR_CITUS"] == "on"


def test_migrate_on_a_database_without_citus_says_so(pg_url: str) -> None:
    with (
        jobvisor.connect(pg_url, citus=True) as q,
        pytest.raises(InvalidArgument, match="the database has no citus extension"),
    ):
        q.migrate()


def test_a_queue_not_in_citus_mode_is_told_to_turn_it_on(queue: Queue, url: str) -> None:
    queue.enqueue("t")
    with (
        jobvisor.connect(url, citus=False) as plain,
        pytest.raises(jobvisor.queue.errors.DatabaseError, match="set JOBVISOR_CITUS=1"),
    ):
        plain.claim("w")


def test_a_plain_schema_with_jobs_in_it_is_spread_by_migrate(citus_url: str) -> None:
    """The move from one database: the jobs table as plain PostgreSQL has it
    (here written on the coordinator by a queue not in Citus mode, as a
    restore of a dump would), then `migrate` in Citus mode spreads it."""
    admin = citus_url.rsplit("/", 1)[0] + "/postgres"
    name = "jobvisor_citus_move_" + citus_url.rsplit("_", 1)[-1]
    url, nodes = create_database(admin, name, migrate=False)
    try:
        with jobvisor.connect(url, citus=False) as plain:
            plain.migrate()
            ids = plain.enqueue_many([{"job_type": "t", "payload": {"i": i}} for i in range(200)])
        with jobvisor.connect(url, citus=True) as spread:
            assert spread.migrate() == []  # every migration was applied already
            kept = spread.enqueue("t", dedupe_key="kept")
            assert spread.enqueue("t", dedupe_key="kept") == kept
            claimed = []
            while batch := spread.claim("w", limit=50):
                spread.complete_many(batch)
                claimed += [j.id for j in batch]
        assert sorted(claimed) == sorted([*ids, kept])
        placed = dict(_rows(url, "SELECT id, bucket FROM jobvisor_jobs"))
        values = dict(_rows(url, "SELECT k, value FROM jobvisor_buckets"))
        assert all(placed[i] == values[bucket_of(i)] for i in ids)
        assert_invariants(url)
    finally:
        drop_database([admin, *nodes], name)


def test_a_paused_queues_backlog_hides_no_other_queue(queue: Queue) -> None:
    queue.enqueue_many([{"job_type": "t", "queue": "held"} for _ in range(300)])
    later = queue.enqueue_many([{"job_type": "t", "queue": "open"} for _ in range(5)])
    queue.pause("held")
    claimed = queue.claim("w", limit=5)
    assert sorted(j.id for j in claimed) == sorted(later)


def test_a_new_jobs_notice_names_its_bucket(queue: Queue, url: str) -> None:
    async def body() -> tuple[Notice, Any]:
        async with jobvisor.connect_async(url, citus=True) as q:
            notices = q.notifications(queues=["mail"])
            assert (await anext(notices)).kind == NoticeKind.MISSED  # listening begins
            heard = asyncio.ensure_future(anext(notices))
            await asyncio.sleep(0.2)  # the LISTEN is in place
            job_id = await q.enqueue("t", queue="mail", priority=4)
            notice = await asyncio.wait_for(heard, 10)
            await notices.aclose()
        return notice, job_id

    notice, job_id = run_async(body)
    values = dict(_rows(url, "SELECT k, value FROM jobvisor_buckets"))
    assert notice == Notice(NoticeKind.JOB, "mail", priority=4, bucket=values[bucket_of(job_id)])


def test_a_limited_jobs_completion_or_failure_wakes_its_queues_workers(url: str) -> None:
    """The notice a shard cannot send goes from the coordinator."""
    began, completed, failed = limited_end_notices(url)
    assert began.kind == NoticeKind.MISSED
    assert completed == failed == Notice(NoticeKind.JOB, "mail")
