"""Racing enqueuers of one unique key: eight threads per key, each on its own
connection, released at once by a barrier, some ignoring and some replacing,
some in the next time bucket, and a claimer taking jobs meanwhile. Whatever
the interleaving, there is exactly one job per key and bucket, and every
enqueuer of that key and bucket was handed its id."""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobvisor import Queue, Unique
from tests.support.invariants import assert_invariants, query_all
from tests.support.queue import Clock, MakeQueue

ENQUEUERS = 8
PERIOD = 3600


@dataclasses.dataclass(frozen=True)
class KeyPlan:
    """How the eight enqueuers of one key call: each one's on_conflict and
    bucket (0 or 1: the clock one period later), and whether it has a period."""

    period: bool
    by_args: bool
    conflicts: tuple[str, ...]
    buckets: tuple[int, ...]

    def unique(self, name: str) -> Unique:
        return Unique(key=name, by_args=self.by_args, period=PERIOD if self.period else None)

    def group(self, enqueuer: int) -> int:
        """The bucket an enqueuer's job falls in (0 for every one without a period)."""
        return self.buckets[enqueuer] if self.period else 0


key_plans = st.builds(
    KeyPlan,
    period=st.booleans(),
    by_args=st.booleans(),
    conflicts=st.tuples(*[st.sampled_from(["ignore", "replace"])] * ENQUEUERS),
    buckets=st.tuples(*[st.integers(0, 1)] * ENQUEUERS),
)


@dataclasses.dataclass
class Racers:
    """Per enqueuer, a queue of its own for each bucket's clock."""

    queues: list[tuple[Queue, Queue]]


@pytest.fixture
def racers(make_queue: MakeQueue) -> Iterator[Racers]:
    start = dt.datetime.now(dt.UTC).replace(minute=30, second=0, microsecond=0)
    now, later = Clock(start), Clock(start + dt.timedelta(seconds=PERIOD))
    yield Racers([(make_queue(clock=now), make_queue(clock=later)) for _ in range(ENQUEUERS)])


def _race(calls: list[Callable[[], Any]]) -> list[Any]:
    """Run every call in a thread of its own, all released by one barrier;
    their results in order (an exception in any is raised here)."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[index] = calls[index]()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    if errors:
        raise errors[0]
    return results


def _enqueuer(racers: Racers, job_type: str, plans: list[KeyPlan], index: int) -> Any:
    def call() -> list[uuid.UUID]:
        ids = []
        for k, plan in enumerate(plans):
            q = racers.queues[index][plan.group(index)]
            payload = {"enqueuer": index} if not plan.by_args else {"same": True}
            ids.append(
                q.enqueue(
                    job_type,
                    payload,
                    unique=plan.unique(f"key-{k}"),
                    on_conflict=plan.conflicts[index],
                )
            )
        return ids

    return call


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(plans=st.lists(key_plans, min_size=1, max_size=3), claimer=st.booleans())
def test_one_job_per_key_and_bucket(
    racers: Racers, url: str, plans: list[KeyPlan], claimer: bool
) -> None:
    job_type = f"race-{uuid.uuid4().hex[:12]}"  # each example in a namespace of its own
    calls = [_enqueuer(racers, job_type, plans, i) for i in range(ENQUEUERS)]
    if claimer:
        claim_queue = racers.queues[0][0]
        calls.append(lambda: claim_queue.claim("racer", job_types=[job_type], limit=2))
    results = _race(calls)
    returned = results[:ENQUEUERS]

    expected_jobs = 0
    for k, plan in enumerate(plans):
        ids_by_group: dict[int, set[uuid.UUID]] = {}
        for index in range(ENQUEUERS):
            ids_by_group.setdefault(plan.group(index), set()).add(returned[index][k])
        for group, ids in ids_by_group.items():
            assert len(ids) == 1, f"key {k} bucket {group}: enqueuers got {len(ids)} ids"
        assert len({next(iter(ids)) for ids in ids_by_group.values()}) == len(ids_by_group)
        expected_jobs += len(ids_by_group)

    (rows,) = query_all(url, ["SELECT job_type, unique_key FROM jobvisor_jobs"])
    keys = collections.Counter(key for kind, key in rows if kind == job_type)
    assert all(count == 1 for count in keys.values()), keys
    assert keys.total() == expected_jobs
    _check_payloads(racers.queues[0][0], plans, returned)
    assert_invariants(url)


def _check_payloads(q: Queue, plans: list[KeyPlan], returned: list[list[uuid.UUID]]) -> None:
    """Each job carries the payload of one enqueuer of its key and bucket."""
    for k, plan in enumerate(plans):
        for index in range(ENQUEUERS):
            job = q.get(returned[index][k])
            if plan.by_args:
                assert job.payload == {"same": True}
                continue
            senders = {i for i in range(ENQUEUERS) if plan.group(i) == plan.group(index)}
            assert job.payload["enqueuer"] in senders
