"""Bugs the state-machine test found, pinned as plain examples.

- Job ids within one process strictly increase, so jobs that tie on priority
  and run_at (a batch from `enqueue_many`) are claimed in enqueue order; with
  random bits after the millisecond, a batch came out shuffled (and the
  state machine could not replay its own examples).
- Requeueing a dead job while a live job holds its dedupe key is refused with
  a clear `InvalidArgument`; it used to leak the driver's unique violation.
- A batch renew/complete/release that holds a stale claim of a job beside its
  current claim reports the stale one lost; it used to match on ids only and
  report both as held."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobvisor import InvalidArgument, JobStatus, Queue
from jobvisor.queue.model import new_job_id


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 5000))
def test_ids_strictly_increase_and_stay_version_7(n: int) -> None:
    ids = [new_job_id() for _ in range(n)]
    assert all(a.int < b.int for a, b in itertools.pairwise(ids))
    assert {i.version for i in ids} == {7}
    assert {i.variant for i in ids} == {"specified in RFC 4122"}


def test_a_batch_is_claimed_in_enqueue_order(queue: Queue) -> None:
    queue.enqueue_many([{"job_type": "t", "payload": {"i": i}} for i in range(2000)])
    claimed = queue.claim("w", limit=2000)
    assert [j.payload["i"] for j in claimed] == list(range(2000))


def test_requeue_refused_while_a_live_job_holds_the_dedupe_key(queue: Queue) -> None:
    dead_id = queue.enqueue("t", dedupe_key="k", max_attempts=1)
    (job,) = queue.claim("w")
    assert queue.fail(job, "boom") == JobStatus.DEAD
    live_id = queue.enqueue("t", dedupe_key="k")
    with pytest.raises(InvalidArgument, match=f"live job {live_id} holds its dedupe_key='k'"):
        queue.dead.requeue(dead_id)
    assert queue.get(dead_id).status == JobStatus.DEAD

    (live,) = queue.claim("w")
    queue.complete(live)
    queue.dead.requeue(dead_id)
    assert queue.get(dead_id).status == JobStatus.PENDING


def test_a_stale_claim_beside_the_current_one_is_reported_lost(queue: Queue) -> None:
    # A worker lost its lease on a job and claimed it again: renewing both
    # claims in one call keeps the current one and reports the stale one.
    queue.enqueue("t")
    (stale,) = queue.claim("w", lease=1)
    queue.requeue_crashed("w")  # the job is taken back (as the reaper would)
    (current,) = queue.claim("w")
    assert current.id == stale.id and current.claim_token != stale.claim_token
    assert queue.renew_many([stale, current]) == [stale]
    assert queue.renew_many([current, stale]) == [stale]
    assert queue.complete_many([stale, current]) == [stale]
    assert queue.get(current.id).status == JobStatus.COMPLETED
