"""The queue against a model of itself: hypothesis drives random sequences of
every operation, with a moving clock, on both engines.

After every step the operation's answer must match the model's (claimed ids
and their order, lease lost or not, returned statuses and counts) and so must
the whole jobs table (status, attempts, run_at, lease, claim token, worker,
finished_at of every job), the summary's counts, and DESIGN.md's invariants.

One database per test function; the machine empties the jobs table when each
example starts, so an example costs a TRUNCATE, not a CREATE DATABASE."""

from __future__ import annotations

import datetime as dt
import math
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

import jobvisor
from jobvisor import InvalidArgument, JobNotFound, LeaseLost, Queue, RetryPolicy
from jobvisor.queue.api import parse_url
from jobvisor.queue.ops import hints
from tests.support.invariants import CHECKS, assert_invariants

from .model import Handle, QueueModel

EPOCH = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)

SETTINGS = settings(
    max_examples=40,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

QUEUES = ["default", "mail"]
JOB_TYPES = ["resize", "send"]
WORKERS = ["w1", "w2"]
DEDUPE_KEYS = [None, None, "k1", "k1", "k2"]
OUTCOMES = ["renew", "complete", "fail", "snooze", "release", "cancel_held"]
POLICIES = [(0.0, 0.0), (1.0, 4.0), (5.0, 60.0), (30.0, 30.0)]  # (base, cap)

SNAPSHOT = (
    "SELECT id, status, attempts, max_attempts, run_at, lease_expires_at, claim_token,"
    " CASE WHEN status = 'running' THEN worker_id END, finished_at FROM jobvisor_jobs"
)

# Every DESIGN.md invariant check in one round trip: (check index, offending rows).
ALL_CHECKS = (
    " UNION ALL ".join(
        f"SELECT {i}, count(*) FROM ({check}) AS c{i}" for i, check in enumerate(CHECKS.values())
    )
    + " ORDER BY 1"
)


class Clock:
    """The queue's injected clock: whole seconds after EPOCH, moved by the test."""

    def __init__(self) -> None:
        self.seconds = 0

    def __call__(self) -> dt.datetime:
        return EPOCH + dt.timedelta(seconds=self.seconds)


class Table:
    """Reads the jobs table directly (not through the queue under test)."""

    def __init__(self, url: str) -> None:
        self.engine, target = parse_url(url)
        self.pg: psycopg.Connection[Any] | None = None
        self.lite: sqlite3.Connection | None = None
        if self.engine == "postgres":
            self.pg = psycopg.connect(target, autocommit=True)
        else:
            self.lite = sqlite3.connect(target, isolation_level=None)

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        if self.pg is not None:
            return self.pg.execute(sql.encode()).fetchall()
        assert self.lite is not None
        return self.lite.execute(sql).fetchall()

    def empty(self) -> None:
        if self.pg is not None:
            self.pg.execute(
                "TRUNCATE jobvisor_jobs, jobvisor_queue_pauses, jobvisor_limits CASCADE"
            )
        else:
            assert self.lite is not None
            self.lite.execute("DELETE FROM jobvisor_jobs")
            self.lite.execute("DELETE FROM jobvisor_queue_pauses")
            self.lite.execute("DELETE FROM jobvisor_limits")

    def _time(self, value: Any) -> float | None:
        if value is None:
            return None
        if isinstance(value, dt.datetime):
            return (value - EPOCH).total_seconds()
        return float(value) - EPOCH.timestamp()

    def rows(self) -> dict[uuid.UUID, tuple[object, ...]]:
        out: dict[uuid.UUID, tuple[object, ...]] = {}
        for (
            jid,
            status,
            attempts,
            max_attempts,
            run_at,
            lease,
            token,
            worker,
            finished,
        ) in self.query(SNAPSHOT):
            claim = uuid.UUID(hex=token) if isinstance(token, str) else token
            out[uuid.UUID(str(jid))] = (
                status, attempts, max_attempts, self._time(run_at), self._time(lease),
                claim, worker, self._time(finished),
            )  # fmt: skip
        return out

    def close(self) -> None:
        if self.pg is not None:
            self.pg.close()
        if self.lite is not None:
            self.lite.close()


def _handle(job: jobvisor.Job) -> Handle:
    assert job.claim_token is not None
    return Handle(job.id, job.claim_token)


def _job(handle: Handle, q: Queue) -> jobvisor.Job:
    """A `Job` carrying the handle's id and token, as a worker would hold it."""
    return jobvisor.Job(
        id=handle.id, queue="default", job_type="x", payload={}, priority=0, run_at=EPOCH,
        status=jobvisor.JobStatus.RUNNING, attempts=1, max_attempts=1, last_error=None,
        correlation_id=None, dedupe_key=None, lease_expires_at=EPOCH,
        claim_token=handle.token, worker_id="w", created_at=EPOCH, started_at=EPOCH,
        finished_at=None,
    )  # fmt: skip


class QueueMachine(RuleBasedStateMachine):
    """One example: an empty table, a clock at EPOCH, then random operations."""

    ids = Bundle("ids")
    handles = Bundle("handles")

    def __init__(self, q: Queue, clock: Clock, table: Table) -> None:
        super().__init__()
        self.q, self.clock, self.table = q, clock, table
        self.model = QueueModel()
        self.table.empty()
        self.clock.seconds = 0
        # What the queue's claims remember of the limits, from nothing: an
        # example replays the same way.
        q._ctx.limits_seen.forget()

    # --- time ------------------------------------------------------------------

    @rule(seconds=st.sampled_from([1, 5, 10, 30, 61, 300]))
    def advance(self, seconds: int) -> None:
        self.clock.seconds += seconds
        self.model.now = float(self.clock.seconds)

    # --- enqueue ---------------------------------------------------------------

    def _enqueue_one(self, spec: dict[str, Any], got: uuid.UUID) -> None:
        holder = self.model.live_holder(spec["dedupe_key"])
        if holder is not None:
            assert got == holder, f"dedupe key {spec['dedupe_key']!r}: expected the live {holder}"
            return
        self.model.enqueue(
            got, queue=spec["queue"], job_type=spec["job_type"], priority=spec["priority"],
            delay=float(spec["delay"] or 0), max_attempts=spec["max_attempts"],
            dedupe_key=spec["dedupe_key"], concurrency_key=spec["concurrency_key"],
        )  # fmt: skip

    specs = st.fixed_dictionaries(
        {
            "job_type": st.sampled_from(JOB_TYPES),
            "queue": st.sampled_from(QUEUES),
            "priority": st.sampled_from([0, 0, 1, 5]),
            "delay": st.sampled_from([None, None, 0, 3, 30]),
            "max_attempts": st.integers(1, 3),
            "dedupe_key": st.sampled_from(DEDUPE_KEYS),
            "concurrency_key": st.sampled_from([None, "a", "a", "b"]),
        }
    )

    @rule(target=ids, spec=specs)
    def enqueue(self, spec: dict[str, Any]) -> uuid.UUID:
        got = self.q.enqueue(spec["job_type"], {"n": 1}, **{
            k: v for k, v in spec.items() if k != "job_type"
        })  # fmt: skip
        self._enqueue_one(spec, got)
        return got

    @initialize(target=ids, batch=st.lists(specs, min_size=1, max_size=6))
    def seed(self, batch: list[dict[str, Any]]) -> Any:
        """Start each example with a few jobs, so claims have work from step one."""
        return self.enqueue_many(batch)

    @rule(target=ids, batch=st.lists(specs, min_size=1, max_size=4))
    def enqueue_many(self, batch: list[dict[str, Any]]) -> Any:
        got = self.q.enqueue_many(batch)
        assert len(got) == len(batch)
        for spec, job_id in zip(batch, got, strict=True):
            self._enqueue_one(spec, job_id)
        return multiple(*got)

    # --- claim -----------------------------------------------------------------

    @rule(
        target=handles,
        worker=st.sampled_from(WORKERS),
        limit=st.integers(1, 3),
        lease=st.sampled_from([5, 20, 60]),
        queues=st.sampled_from([None, None, ["default"], ["mail"], QUEUES]),
        job_types=st.sampled_from([None, None, None, ["send"]]),
    )
    def claim(
        self, worker: str, limit: int, lease: int, queues: list[str] | None,
        job_types: list[str] | None,
    ) -> Any:  # fmt: skip
        expected = self.model.claimable(limit=limit, queues=queues, job_types=job_types)
        jobs = self.q.claim(worker, limit=limit, lease=lease, queues=queues, job_types=job_types)
        assert [j.id for j in jobs] in expected
        held = {m.token for m in self.model.jobs.values() if m.status == "running"}
        assert not {j.claim_token for j in jobs} & held
        for job in jobs:
            self.model.hold(job.id, _handle(job).token, worker, float(lease))
            m = self.model.jobs[job.id]
            assert job.status == "running" and job.worker_id == worker
            assert job.attempts == m.attempts and job.max_attempts == m.max_attempts
            assert job.lease_expires_at == self.clock() + dt.timedelta(seconds=lease)
        # One token per claim, never one a held job has: a job's (id, token)
        # pair is this claim's alone.
        assert len({(j.id, j.claim_token) for j in jobs}) == len(jobs)
        return multiple(*(_handle(j) for j in jobs))

    # --- outcomes of a claim ----------------------------------------------------

    def _held_call(self, call: Callable[[], object], held: bool) -> object:
        """Run an operation on a held job: LeaseLost exactly when the model says so."""
        if held:
            return call()
        with pytest.raises(LeaseLost):
            call()
        return None

    @rule(handle=handles, lease=st.sampled_from([5, 60]))
    def renew(self, handle: Handle, lease: int) -> None:
        held = self.model.held(handle) is not None
        self._held_call(lambda: self.q.renew(_job(handle, self.q), lease=lease), held)
        self.model.renew([handle], float(lease))

    @rule(
        chosen=st.lists(handles, max_size=4, unique_by=lambda h: (h.id, h.token)),
        lease=st.sampled_from([5, 60]),
    )
    def renew_many(self, chosen: list[Handle], lease: int) -> None:
        lost = self.q.renew_many([_job(h, self.q) for h in chosen], lease=lease)
        expected = self.model.renew(chosen, float(lease))
        assert [_handle(j) for j in lost] == expected

    @rule(handle=handles)
    def complete(self, handle: Handle) -> None:
        held = self.model.held(handle) is not None
        self._held_call(lambda: self.q.complete(_job(handle, self.q)), held)
        assert self.model.complete(handle) == held

    @rule(handle=handles, retry_in=st.sampled_from([0, 2, 45]))
    def fail(self, handle: Handle, retry_in: int) -> None:
        held = self.model.held(handle) is not None
        got = self._held_call(
            lambda: self.q.fail(_job(handle, self.q), "boom", retry_in=retry_in), held
        )
        expected = self.model.fail(handle, float(retry_in))
        assert got == expected

    @rule(handle=handles, delay=st.sampled_from([0, 7, 100]))
    def snooze(self, handle: Handle, delay: int) -> None:
        held = self.model.held(handle) is not None
        self._held_call(lambda: self.q.snooze(_job(handle, self.q), delay), held)
        assert self.model.snooze(handle, float(delay)) == held

    @rule(handle=handles)
    def release(self, handle: Handle) -> None:
        held = self.model.held(handle) is not None
        self._held_call(lambda: self.q.release(_job(handle, self.q)), held)
        assert self.model.release(handle) == held

    @rule(handle=handles)
    def cancel_held(self, handle: Handle) -> None:
        held = self.model.held(handle) is not None
        self._held_call(lambda: self.q.cancel_held(_job(handle, self.q)), held)
        assert self.model.cancel_held(handle) == held

    @precondition(lambda self: any(j.status == "running" for j in self.model.jobs.values()))
    @rule(data=st.data(), outcome=st.sampled_from(OUTCOMES))
    def settle_held(self, data: st.DataObject, outcome: str) -> None:
        """One of the outcomes above on a job still held (stale handles are the
        bundle rules' common case; this makes the held path as common)."""
        running = sorted(i for i, j in self.model.jobs.items() if j.status == "running")
        job = self.model.jobs[data.draw(st.sampled_from(running))]
        assert job.token is not None
        handle = Handle(job.id, job.token)
        if outcome == "renew":
            self.renew(handle, data.draw(st.sampled_from([5, 60])))
        elif outcome == "fail":
            self.fail(handle, data.draw(st.sampled_from([0, 2, 45])))
        elif outcome == "snooze":
            self.snooze(handle, data.draw(st.sampled_from([0, 7, 100])))
        else:
            getattr(self, outcome)(handle)

    # --- recovery ---------------------------------------------------------------

    @rule(policy=st.sampled_from(POLICIES))
    def reap_expired(self, policy: tuple[float, float]) -> None:
        base, cap = policy
        got = self.q.reap_expired(policy=RetryPolicy(base=base, cap=cap, jitter=0))
        assert got == self.model.reap_expired(base=base, cap=cap)

    @precondition(lambda self: any(j.status == "running" for j in self.model.jobs.values()))
    @rule(policy=st.sampled_from(POLICIES))
    def expire_and_reap(self, policy: tuple[float, float]) -> None:
        """Let every lease run out, then reap (a lone `reap_expired` rarely finds one)."""
        self.advance(61)
        self.reap_expired(policy)

    @rule(worker=st.sampled_from(WORKERS), pick=st.integers(0, 3))
    def requeue_crashed(self, worker: str, pick: int) -> None:
        """pick 0: a crash of no known cause; otherwise a kill for one of
        the worker's running jobs, the others released."""
        running = sorted(
            j.id
            for j in self.model.jobs.values()
            if j.status == "running" and j.worker_id == worker
        )
        culprit = running[pick % len(running)] if pick and running else None
        got = self.q.requeue_crashed(worker, culprit=culprit)
        assert got == self.model.requeue_crashed(worker, culprit)

    # --- retention and operators ------------------------------------------------

    @rule(
        older_than=st.one_of(
            st.sampled_from([0, 10, 100]),
            st.fixed_dictionaries(
                {},
                optional={
                    "completed": st.sampled_from([0, 20]),
                    "dead": st.sampled_from([0, 50]),
                    "cancelled": st.sampled_from([0, 5]),
                },
            ),
        ),
        batch_size=st.sampled_from([1, 2, 1000]),
    )
    def cleanup(self, older_than: int | dict[str, int], batch_size: int) -> None:
        if isinstance(older_than, dict):
            ages = {status: float(age) for status, age in older_than.items()}
        else:
            ages = dict.fromkeys(("completed", "dead", "cancelled"), float(older_than))
        got = self.q.cleanup(older_than, batch_size=batch_size)
        assert got == self.model.cleanup(ages)

    @rule(job_id=ids)
    def cancel(self, job_id: uuid.UUID) -> None:
        expected = self.model.cancel(job_id)
        if expected is not None:
            assert self.q.cancel(job_id) == expected
        else:
            with pytest.raises(JobNotFound):
                self.q.cancel(job_id)

    @rule(job_id=ids, run_at=st.sampled_from([None, 0, 40]))
    def dead_requeue(self, job_id: uuid.UUID, run_at: int | None) -> None:
        when = None if run_at is None else self.clock() + dt.timedelta(seconds=run_at)
        blocked = self.model.requeue_blocked_by(job_id)
        expected_run_at = None if run_at is None else self.model.now + run_at
        if self.model.requeue(job_id, expected_run_at):
            self.q.dead.requeue(job_id, run_at=when)
        elif blocked is not None:
            with pytest.raises(InvalidArgument, match=str(blocked)):
                self.q.dead.requeue(job_id, run_at=when)
        else:
            with pytest.raises(JobNotFound):
                self.q.dead.requeue(job_id, run_at=when)

    @precondition(lambda self: any(j.status == "dead" for j in self.model.jobs.values()))
    @rule(data=st.data(), run_at=st.sampled_from([None, 0, 40]), discard=st.booleans())
    def settle_dead(self, data: st.DataObject, run_at: int | None, discard: bool) -> None:
        """Requeue or discard a job that is dead now (the bundle rules mostly
        draw jobs in other statuses)."""
        dead = sorted(i for i, j in self.model.jobs.items() if j.status == "dead")
        job_id = data.draw(st.sampled_from(dead))
        if discard:
            self.dead_discard(job_id)
        else:
            self.dead_requeue(job_id, run_at)

    @rule(job_id=ids)
    def dead_discard(self, job_id: uuid.UUID) -> None:
        if self.model.discard(job_id):
            self.q.dead.discard(job_id)
        else:
            with pytest.raises(JobNotFound):
                self.q.dead.discard(job_id)

    @precondition(lambda self: bool(self.model.jobs))
    @rule(data=st.data())
    def get(self, data: st.DataObject) -> None:
        job_id = data.draw(st.sampled_from(sorted(self.model.jobs)))
        job = self.q.get(job_id)
        m = self.model.jobs[job_id]
        assert (job.status, job.attempts, job.queue, job.job_type, job.priority) == (
            m.status, m.attempts, m.queue, m.job_type, m.priority,
        )  # fmt: skip

    # --- flow control -------------------------------------------------------------

    @rule(queue=st.sampled_from(QUEUES))
    def pause(self, queue: str) -> None:
        self.q.pause(queue)
        self.model.paused.add(queue)
        assert self.q.paused() == sorted(self.model.paused)

    @rule(queue=st.sampled_from(QUEUES))
    def resume(self, queue: str) -> None:
        self.q.resume(queue)
        self.model.paused.discard(queue)
        assert self.q.paused() == sorted(self.model.paused)

    @rule(
        kind=st.sampled_from(["type", "type", "queue"]),
        concurrency=st.sampled_from([None, 1, 2]),
        key_concurrency=st.sampled_from([None, 1]),
    )
    def set_limit(self, kind: str, concurrency: int | None, key_concurrency: int | None) -> None:
        """A limit never below what runs now (jobs already running finish, so
        a lower one would break "running <= limit" until they do)."""
        name = JOB_TYPES[0] if kind == "type" else QUEUES[1]
        if kind == "queue":
            key_concurrency = None
        if concurrency is None and key_concurrency is None:
            concurrency = 1
        if concurrency is not None:
            concurrency = max(concurrency, self.model.running(kind, name))
        if key_concurrency is not None:
            keys = {j.concurrency_key for j in self.model.jobs.values() if j.status == "running"}
            key_concurrency = max(
                [key_concurrency] + [self.model.running(kind, name, k) for k in keys if k]
            )
        scope = {"job_type": name} if kind == "type" else {"queue": name}
        self.q.set_limit(**scope, concurrency=concurrency, key_concurrency=key_concurrency)
        self.model.limits[(kind, name)] = (concurrency, key_concurrency)
        assert [(lim.scope, lim.name) for lim in self.q.limits()] == sorted(self.model.limits)

    @initialize(
        kind=st.sampled_from([None, "type", "type", "queue"]),
        concurrency=st.sampled_from([None, 1, 2]),
        key_concurrency=st.sampled_from([None, 1]),
    )
    def limited_from_the_start(
        self, kind: str | None, concurrency: int | None, key_concurrency: int | None
    ) -> None:
        """Most examples start with a limit, so claims meet one from step one."""
        if kind is not None:
            self.set_limit(kind, concurrency, key_concurrency)

    @rule(
        target=handles,
        worker=st.sampled_from(WORKERS),
        keys=st.lists(st.sampled_from(["a", "b", None]), min_size=2, max_size=4),
    )
    def burst(self, worker: str, keys: list[str | None]) -> Any:
        """Jobs of the limited type arrive together, some with one key, and a
        claim meets them at once (the other rules rarely line this up)."""
        for key in keys:
            spec = {
                "job_type": JOB_TYPES[0], "queue": QUEUES[1], "priority": 0, "delay": None,
                "max_attempts": 2, "dedupe_key": None, "concurrency_key": key,
            }  # fmt: skip
            self.enqueue(spec)
        return self.claim(worker, 3, 60, None, None)

    @rule(kind=st.sampled_from(["type", "queue"]))
    def clear_limit(self, kind: str) -> None:
        name = JOB_TYPES[0] if kind == "type" else QUEUES[1]
        scope = {"job_type": name} if kind == "type" else {"queue": name}
        had = self.q.clear_limit(**scope)
        assert had == ((kind, name) in self.model.limits)
        self.model.limits.pop((kind, name), None)

    @rule()
    def summary(self) -> None:
        counts = self.model.counts()
        got = {str(s): n for s, n in self.q.summary().by_status().items() if n}
        assert got == counts
        assert self.q.summary().paused == tuple(sorted(self.model.paused))
        assert self.q.dead.count() == counts.get("dead", 0)
        dead = {j.id for j in self.q.dead.list(100)}
        assert dead == {i for i, j in self.model.jobs.items() if j.status == "dead"}

    # --- after every step -------------------------------------------------------

    @invariant()
    def table_matches_model(self) -> None:
        actual, expected = self.table.rows(), self.model.rows()
        assert actual.keys() == expected.keys(), (
            f"ids only in the table: {actual.keys() - expected.keys()}, "
            f"only in the model: {expected.keys() - actual.keys()}"
        )
        wrong = {i: (actual[i], expected[i]) for i in actual if actual[i] != expected[i]}
        assert not wrong, "rows (table, model) differ:\n" + "\n".join(
            f"{i}: {pair}" for i, pair in wrong.items()
        )

    @invariant()
    def running_within_limits(self) -> None:
        """The table's running jobs never exceed a group's limit, nor a key's."""
        rows = self.table.query(
            "SELECT job_type, queue, concurrency_key FROM jobvisor_jobs WHERE status = 'running'"
        )
        for (kind, name), (concurrency, per_key) in self.model.limits.items():
            mine = [r for r in rows if (r[0] if kind == "type" else r[1]) == name]
            assert concurrency is None or len(mine) <= concurrency, (kind, name, mine)
            for key in {r[2] for r in mine if r[2] is not None}:
                assert per_key is None or sum(1 for r in mine if r[2] == key) <= per_key

    @invariant()
    def design_invariants_hold(self) -> None:
        broken = [name for (i, n), name in zip(self.table.query(ALL_CHECKS), CHECKS, strict=True)
                  if n]  # fmt: skip
        assert not broken, f"job invariants broken: {broken}; see tests/invariants.py"


def _no_fsync_wait(url: str) -> str:
    """On PostgreSQL, commits that do not wait for the disk: the test makes
    thousands of tiny transactions, and durability across a crash is not what
    it checks. Visibility and locking are unchanged."""
    if not url.startswith("postgresql"):
        return url
    return url + ("&" if "?" in url else "?") + "options=-csynchronous_commit%3Doff"


@pytest.fixture
def migrated(url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Queue, Clock, Table]]:
    # The plain claim's pause after it came back short is a matter of
    # wall-clock time: off, so every run of an example claims the same.
    monkeypatch.setattr(hints, "PLAIN_RECHECK", 0.0)
    url = _no_fsync_wait(url)
    clock = Clock()
    q = jobvisor.connect(url, clock=clock)
    q.migrate()
    table = Table(url)
    try:
        yield q, clock, table
    finally:
        table.close()
        q.close()
    assert_invariants(url)


def test_queue_matches_model(
    migrated: tuple[Queue, Clock, Table], monkeypatch: pytest.MonkeyPatch
) -> None:
    q, clock, table = migrated
    # The model claims in strict claim order: every claim a full one, however
    # slow a busy machine makes it (tests/queue/test_claim_bound.py has the
    # bounded claims).
    monkeypatch.setattr(hints, "FULL_CLAIM_SLOW", math.inf)
    # SQLite steps are cheap: more examples there, in about the same time.
    examples = 100 if q.engine == "sqlite" else 40

    class OnThisDatabase(QueueMachine):
        def __init__(self) -> None:
            super().__init__(q, clock, table)

    run_state_machine_as_test(OnThisDatabase, settings=settings(SETTINGS, max_examples=examples))
