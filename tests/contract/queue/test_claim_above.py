"""`claim(above_priority=…)`: the express claim of a job that jumps the
queue, on both engines."""

from __future__ import annotations

import pytest

from jobvisor import JobStatus, Queue
from jobvisor.queue.errors import InvalidArgument


def test_only_jobs_of_a_higher_priority_in_claim_order(queue: Queue) -> None:
    for priority in (0, 0, 3, 5, 7, 5):
        queue.enqueue("t", {"p": priority}, priority=priority)
    got = queue.claim("w", limit=10, above_priority=4)
    assert [j.priority for j in got] == [7, 5, 5]
    assert all(j.status is JobStatus.RUNNING and j.attempts == 1 for j in got)
    assert queue.claim("w", limit=10, above_priority=4) == []
    assert [j.priority for j in queue.claim("w", limit=10)] == [3, 0, 0]


def test_the_limit_holds(queue: Queue) -> None:
    for _ in range(5):
        queue.enqueue("t", priority=9)
    assert len(queue.claim("w", limit=2, above_priority=0)) == 2
    assert len(queue.claim("w", limit=5, above_priority=0)) == 3


def test_paused_queues_and_limited_groups_are_left_alone(queue: Queue) -> None:
    queue.enqueue("t", queue="held", priority=9)
    queue.enqueue("capped", priority=9)
    ok = queue.enqueue("t", priority=9)
    queue.pause("held")
    queue.set_limit(job_type="capped", concurrency=5)
    assert [j.id for j in queue.claim("w", limit=10, above_priority=0)] == [ok]
    # The ordinary claim takes the limited job within its limit.
    assert [j.job_type for j in queue.claim("w", limit=10)] == ["capped"]


@pytest.mark.parametrize("bad", [True, "5", 2.0, 2**31, -(2**31) - 1])
def test_a_bad_priority_is_refused_and_nothing_is_claimed(queue: Queue, bad: object) -> None:
    jid = queue.enqueue("t", priority=9)
    with pytest.raises(InvalidArgument, match="above_priority="):
        queue.claim("w", above_priority=bad)  # type: ignore[arg-type]
    assert queue.get(jid).status is JobStatus.PENDING
