"""Batches on both engines: the callbacks of a batch are enqueued exactly
once, by the statement that finishes its last member, whatever the members'
outcomes; members can be added while it runs, never after it finished; its
results are read page by page; the safety net and retention."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from jobvisor import AsyncQueue, BatchFinished, BatchNotFound, InvalidArgument, JobStatus, Queue
from jobvisor.queue.internal import service_ops
from jobvisor.queue.model import TERMINAL
from tests.support.aio import run_with
from tests.support.invariants import assert_invariants, query_all
from tests.support.queue import Clock, MakeQueue, child_claim_all, row_count, run_in_processes

CALLBACKS: dict[str, Any] = {"on_success": "ok", "on_failure": "bad", "on_finish": "done"}


def types_count(url: str) -> dict[str, int]:
    """How many jobs of each type exist."""
    (rows,) = query_all(url, ["SELECT job_type, COUNT(*) FROM jobvisor_jobs GROUP BY job_type"])
    return {str(t): int(n) for t, n in rows}


def callbacks_enqueued(url: str) -> dict[str, int]:
    counts = types_count(url)
    return {t: counts[t] for t in ("ok", "bad", "done") if t in counts}


def run_members(q: Queue, *, fail: int = 0) -> None:
    """Claim every member and complete it, except `fail` of them that die."""
    while jobs := q.claim("w", limit=50, job_types=["member"]):
        for job in jobs:
            if fail:
                q.fail(job, "boom")
                fail -= 1
            else:
                q.complete(job, {"n": job.payload["n"]})


def test_all_members_completed_fire_on_success_and_on_finish_once(queue: Queue, url: str) -> None:
    with queue.batch(**CALLBACKS, meta={"report": 7}) as b:
        ids = [b.enqueue("member", {"n": i}) for i in range(3)]
    assert callbacks_enqueued(url) == {}
    run_members(queue)
    assert callbacks_enqueued(url) == {"ok": 1, "done": 1}
    status = queue.get_batch(b.id)
    assert status.finished and status.closed
    assert status.counts == {"completed": 3}
    assert status.total == 3 and status.unfinished == 0
    assert set(status.callbacks) == {"success", "finish"}
    done = queue.get(status.callbacks["finish"])
    assert done.payload == {"batch_id": str(b.id), "meta": {"report": 7}}
    assert done.status is JobStatus.PENDING
    assert {queue.get(i).batch_id for i in ids} == {b.id}
    assert_invariants(url)


def test_a_dead_member_fires_on_failure_and_on_finish_once(queue: Queue, url: str) -> None:
    with queue.batch(**CALLBACKS) as b:
        b.enqueue_many(
            [{"job_type": "member", "payload": {"n": i}, "max_attempts": 1} for i in range(3)]
        )
    run_members(queue, fail=1)
    assert callbacks_enqueued(url) == {"bad": 1, "done": 1}
    assert queue.get_batch(b.id).counts == {"completed": 2, "dead": 1}


def test_a_cancelled_member_counts_as_finished_not_successful(queue: Queue, url: str) -> None:
    with queue.batch(**CALLBACKS) as b:
        first = b.enqueue("member", {"n": 1})
        b.enqueue("member", {"n": 2})
    queue.cancel(first)
    assert callbacks_enqueued(url) == {}
    run_members(queue)
    assert callbacks_enqueued(url) == {"bad": 1, "done": 1}
    assert queue.get_batch(b.id).counts == {"cancelled": 1, "completed": 1}


def test_members_finished_before_the_block_ends_fire_at_its_close(queue: Queue, url: str) -> None:
    with queue.batch(on_finish="done") as b:
        b.enqueue("member", {"n": 1})
        run_members(queue)
        assert callbacks_enqueued(url) == {}  # still open: more may come
    assert callbacks_enqueued(url) == {"done": 1}
    queue.batch_close(b.id)  # closing again changes nothing
    assert callbacks_enqueued(url) == {"done": 1}


def test_an_empty_batch_finishes_as_it_closes(queue: Queue, url: str) -> None:
    with queue.batch(**CALLBACKS) as b:
        pass
    assert callbacks_enqueued(url) == {"ok": 1, "done": 1}
    status = queue.get_batch(b.id)
    assert status.finished and status.total == 0 and status.counts == {}


def test_an_error_in_the_block_keeps_the_members_and_closes_the_batch(
    queue: Queue, url: str
) -> None:
    with pytest.raises(RuntimeError), queue.batch(on_finish="done") as b:
        b.enqueue("member", {"n": 1})
        raise RuntimeError("the caller's own error")
    assert queue.get_batch(b.id).closed
    run_members(queue)
    assert callbacks_enqueued(url) == {"done": 1}


def test_racing_claimers_finish_a_thousand_members_and_fire_once(
    make_queue: MakeQueue, url: str
) -> None:
    q = make_queue()
    with q.batch(**CALLBACKS) as b:
        b.enqueue_many([{"job_type": "member", "payload": {"n": i}} for i in range(1000)])
    got = run_in_processes(child_claim_all, [(url, f"w{i}", 7) for i in range(4)])
    claimed = [job_id for ids in got for job_id in ids]
    # The claimers took the callbacks too, once each, and never a member twice.
    assert len(claimed) == len(set(claimed)) == 1002
    assert types_count(url) == {"member": 1000, "ok": 1, "done": 1}
    status = q.get_batch(b.id)
    assert status.counts == {"completed": 1000} and status.unfinished == 0
    assert_invariants(url)


def test_a_running_member_adds_to_its_own_batch(queue: Queue, url: str) -> None:
    with queue.batch(on_finish="done") as b:
        b.enqueue("parent", {"n": 0})
    (parent,) = queue.claim("w", job_types=["parent"])
    assert parent.batch_id == b.id
    child = queue.batch_add(parent.batch_id, "member", {"n": 1})
    queue.complete(parent)
    assert callbacks_enqueued(url) == {}  # the child still runs
    run_members(queue)
    assert callbacks_enqueued(url) == {"done": 1}
    assert queue.get(child).batch_id == b.id
    assert queue.get_batch(b.id).total == 2


def test_adding_to_a_finished_batch_is_refused(queue: Queue, url: str) -> None:
    with queue.batch(on_finish="done") as b:
        pass
    before = row_count(url)
    with pytest.raises(BatchFinished, match=str(b.id)):
        queue.batch_add(b.id, "member", {"n": 1})
    with pytest.raises(BatchFinished):
        queue.batch_add_many(b.id, [{"job_type": "member"}])
    missing = uuid.uuid4()
    with pytest.raises(BatchNotFound, match=str(missing)):
        queue.batch_add(missing, "member")
    with pytest.raises(BatchNotFound):
        queue.get_batch(missing)
    assert row_count(url) == before


def test_results_are_read_page_by_page(queue: Queue) -> None:
    with queue.batch(on_finish="done") as b:
        b.enqueue_many([{"job_type": "member", "payload": {"n": i}} for i in range(25)])
    run_members(queue)
    seen: list[Any] = []
    cursor = None
    pages = 0
    while True:
        page = queue.batch_results(b.id, cursor, limit=10)
        pages += 1
        seen += [(job.status, job.result) for job in page.jobs]
        if page.cursor is None:
            break
        cursor = page.cursor
    assert pages == 3
    assert seen == [(JobStatus.COMPLETED, {"n": i}) for i in range(25)]  # callbacks not in it


def test_a_dead_members_error_is_in_its_page(queue: Queue) -> None:
    with queue.batch(on_finish="done") as b:
        b.enqueue("member", {"n": 1}, max_attempts=1)
    run_members(queue, fail=1)
    (job,) = queue.batch_results(b.id).jobs
    assert job.status is JobStatus.DEAD and job.last_error == "boom"
    assert [e["error"] for e in job.errors] == ["boom"]


def test_the_safety_net_finishes_a_batch_left_stalled(queue: Queue, url: str) -> None:
    with queue.batch(**CALLBACKS) as b:
        b.enqueue("member", {"n": 1})
    with queue.transaction() as conn:  # a count left wrong, by hand
        conn.execute("UPDATE jobvisor_batches SET unfinished = 5")
    run_members(queue)
    assert callbacks_enqueued(url) == {}
    assert service_ops(queue).batch_sweep() == 1
    assert callbacks_enqueued(url) == {"ok": 1, "done": 1}
    assert service_ops(queue).batch_sweep() == 0  # once
    assert callbacks_enqueued(url) == {"ok": 1, "done": 1}


def test_the_safety_net_leaves_a_batch_with_members_to_run(queue: Queue, url: str) -> None:
    with queue.batch(on_finish="done") as b:
        b.enqueue("member", {"n": 1})
    with queue.transaction() as conn:
        conn.execute("UPDATE jobvisor_batches SET unfinished = 0")
    assert service_ops(queue).batch_sweep() == 0
    assert not queue.get_batch(b.id).finished
    run_members(queue)
    assert callbacks_enqueued(url) == {"done": 1}


def test_a_requeued_dead_member_counts_again_until_the_batch_finishes(
    queue: Queue, url: str
) -> None:
    with queue.batch(**CALLBACKS) as b:
        b.enqueue("member", {"n": 1}, max_attempts=1)
        b.enqueue("member", {"n": 2})
    (job,) = queue.claim("w", job_types=["member"])
    queue.fail(job, "boom")
    queue.dead.requeue(job.id)
    run_members(queue)
    assert callbacks_enqueued(url) == {"ok": 1, "done": 1}


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"on_finish": ""}, "on_finish"),
        ({"on_success": 3}, "on_success=3"),
        ({"meta": ["not", "a", "mapping"]}, "meta="),
        ({"meta": {"x": object()}}, "meta"),
        ({"on_failure": "bad", "meta": {"big": "x" * 2_000_000}}, "on_failure"),
    ],
)
def test_bad_batch_options_are_refused_with_nothing_written(
    queue: Queue, url: str, options: dict[str, Any], named: str
) -> None:
    before = row_count(url)
    with pytest.raises(InvalidArgument, match=named):
        queue.batch(**options)
    assert row_count(url) == before
    assert query_all(url, ["SELECT COUNT(*) FROM jobvisor_batches"])[0][0][0] == 0


@pytest.mark.parametrize(
    ("job", "named"),
    [
        ({"job_type": "member", "dedupe_key": "k"}, "dedupe_key"),
        ({"job_type": ""}, "job_type"),
        ({"job_type": "member", "priority": "high"}, "priority"),
    ],
)
def test_a_bad_member_is_refused_with_nothing_written(
    queue: Queue, url: str, job: dict[str, Any], named: str
) -> None:
    with queue.batch(on_finish="done") as b:
        before = row_count(url)
        with pytest.raises(InvalidArgument, match=named):
            b.enqueue_many([{"job_type": "member"}, job])
        assert row_count(url) == before
    assert queue.get_batch(b.id).total == 0


def test_bad_ids_cursors_and_limits_are_refused(queue: Queue) -> None:
    with pytest.raises(InvalidArgument, match="'nope'"):
        queue.get_batch("nope")
    with queue.batch() as b:
        pass
    with pytest.raises(InvalidArgument, match="cursor='x'"):
        queue.batch_results(b.id, "x")
    with pytest.raises(InvalidArgument, match="limit=0"):
        queue.batch_results(b.id, limit=0)


def test_retention_removes_a_batch_whole(cqueue: Queue, clock: Clock, url: str) -> None:
    with cqueue.batch(on_finish="done") as b:
        b.enqueue_many([{"job_type": "member", "payload": {"n": i}} for i in range(3)])
    plain = cqueue.enqueue("plain")
    run_members(cqueue)
    clock.advance(3600)
    assert service_ops(cqueue).batch_cleanup(60) == 0  # the callback has not run yet
    while jobs := cqueue.claim("w"):
        for job in jobs:
            cqueue.complete(job)
    assert cqueue.cleanup(60) == 0  # a batch's jobs are not taken one by one
    clock.advance(30)
    assert service_ops(cqueue).batch_cleanup(60) == 0  # the callback finished 30 s ago
    assert service_ops(cqueue).batch_cleanup({"completed": 10, "dead": None}) == 1
    assert row_count(url) == 1 and cqueue.get(plain).status is JobStatus.COMPLETED
    with pytest.raises(BatchNotFound):
        cqueue.get_batch(b.id)
    assert query_all(url, ["SELECT COUNT(*) FROM jobvisor_batch_callbacks"])[0][0][0] == 0


def test_retention_keeps_a_batch_while_a_status_is_kept(cqueue: Queue, clock: Clock) -> None:
    with cqueue.batch() as b:
        b.enqueue("member", {"n": 1}, max_attempts=1)
    run_members(cqueue, fail=1)
    clock.advance(3600)
    assert service_ops(cqueue).batch_cleanup({"completed": 10}) == 0  # dead ones are kept
    assert cqueue.get_batch(b.id).counts == {"dead": 1}


def test_async_batches(aqueue: AsyncQueue, url: str) -> None:
    async def body(q: AsyncQueue) -> uuid.UUID:
        async with q.batch(on_success="ok", on_finish="done") as b:
            await b.enqueue("member", {"n": 1})
            await b.enqueue_many([{"job_type": "member", "payload": {"n": 2}}])
        while jobs := await q.claim("w", limit=10, job_types=["member"]):
            for job in jobs:
                await q.complete(job, job.payload["n"])
        page = await q.batch_results(b.id)
        assert [job.result for job in page.jobs] == [1, 2]
        assert (await q.get_batch(b.id)).finished
        return b.id

    run_with(aqueue, body)
    assert callbacks_enqueued(url) == {"ok": 1, "done": 1}


def test_terminal_statuses_are_the_ones_the_trigger_counts() -> None:
    # The migration's lists spell these out; a new terminal status needs them too.
    assert {s.value for s in TERMINAL} == {"completed", "dead", "cancelled"}
