"""Statements that would run as they are on a distributed PostgreSQL: no
state change calls a volatile function or reads the clock itself. Claim
tokens come from the caller, a retry's jitter from the job's id and attempt
(the same number in SQL as in Python), the time from a parameter."""

from __future__ import annotations

import datetime as dt
import re
import time
import uuid
from types import ModuleType

import pytest

import jobvisor
from jobvisor import JobStatus, Queue
from jobvisor.backoff import retry_draw
from jobvisor.queue import RetryPolicy
from jobvisor.queue.drivers.postgres import sql as sql_postgres
from jobvisor.queue.drivers.postgres.clock import CLOCK_REFRESH
from jobvisor.queue.drivers.sqlite import sql as sql_sqlite
from jobvisor.queue.model import new_job_ids
from tests.support.queue import Clock, MakeQueue

# What a state change must not call: volatile functions, and the clock read
# inside the statement (the time is a parameter).
FORBIDDEN = re.compile(
    r"\b(random|gen_random_uuid|uuid_generate_v4|randomblob|now|clock_timestamp"
    r"|statement_timestamp|transaction_timestamp|timeofday)\s*\("
    r"|\b(current_timestamp|localtimestamp|current_time|current_date)\b"
    r"|'now'",
    re.IGNORECASE,
)
CHANGES = re.compile(r"\b(UPDATE|INSERT|DELETE)\b")


def state_changes(module: ModuleType) -> dict[str, str]:
    """The statements of an engine's SQL module that change rows, by name."""
    return {
        name: text
        for name, text in vars(module).items()
        if name.isupper() and isinstance(text, str) and CHANGES.search(text)
    }


def offenders(module: ModuleType) -> list[str]:
    """`NAME: what it calls` for every state change that calls what it must not."""
    found = []
    for name, text in sorted(state_changes(module).items()):
        calls = sorted({m.group(0) for m in FORBIDDEN.finditer(text)})
        if calls:
            found.append(f"{name}: {', '.join(calls)}")
    return found


@pytest.mark.parametrize("module", [sql_postgres, sql_sqlite], ids=["postgres", "sqlite"])
def test_no_state_change_calls_a_volatile_function_or_the_clock(module: ModuleType) -> None:
    assert len(state_changes(module)) >= 25  # the scan sees the statements
    assert offenders(module) == []


def test_the_scan_names_an_offending_statement() -> None:
    """The scan fails on the statements as they were written before."""
    bad = ModuleType("bad")
    bad.JOB_CLAIM = "UPDATE jobvisor_jobs SET claim_token = gen_random_uuid()"  # type: ignore[attr-defined]
    bad.JOB_FAIL = (  # type: ignore[attr-defined]
        "UPDATE jobvisor_jobs SET run_at = coalesce(%(now)s::timestamptz, now())"
        " + 1 * (1 - 0.5 * random())"
    )
    bad.JOB_CLAIM_LITE = (  # type: ignore[attr-defined]
        "UPDATE j SET t = lower(hex(randomblob(16))),"
        " s = coalesce(:now, (julianday('now') - 2440587.5) * 86400.0)"
    )
    bad.JOB_GET = "SELECT now()"  # type: ignore[attr-defined]  # a read may
    assert offenders(bad) == [
        "JOB_CLAIM: gen_random_uuid(",
        "JOB_CLAIM_LITE: 'now', randomblob(",
        "JOB_FAIL: now(, random(",
    ]


# --- the retry's jitter ----------------------------------------------------------


def test_retry_draw_is_fixed_by_the_job_and_its_attempt() -> None:
    (job_id,) = new_job_ids(1)
    draws = [retry_draw(job_id, attempt) for attempt in range(1, 21)]
    assert draws == [retry_draw(job_id, attempt) for attempt in range(1, 21)]
    assert all(0 <= d < 1 for d in draws)
    assert len(set(draws)) == 20  # each attempt its own


def test_retry_draws_spread_over_jobs() -> None:
    draws = [retry_draw(job_id, 3) for job_id in new_job_ids(20_000)]
    assert 0.48 < sum(draws) / len(draws) < 0.52
    deciles = [0] * 10
    for d in draws:
        deciles[int(d * 10)] += 1
    assert min(deciles) > 1700 and max(deciles) < 2300


def test_retry_draw_of_known_ids() -> None:
    low = uuid.UUID("01a23656-036b-74ab-8f88-b5623f360000")
    high = uuid.UUID("01a23656-036b-74ab-8f88-b5623f36ffff")
    assert retry_draw(low, 0) == 0.0
    assert retry_draw(high, 0) == 65535 / 65536
    assert retry_draw(low, 1) == 40503 / 65536
    assert retry_draw(high, 1) == 40502 / 65536


def test_a_failed_job_waits_its_own_jitter(cqueue: Queue, clock: Clock) -> None:
    waits = set()
    for _ in range(20):
        jid = cqueue.enqueue("j")
        (job,) = cqueue.claim("w")
        assert job.id == jid
        cqueue.fail(job, "boom")  # the default policy: 1 s, jitter 0.5
        wait = (cqueue.get(jid).run_at - clock()).total_seconds()
        assert abs(wait - RetryPolicy().delay(1, jid)) < 2e-6
        waits.add(wait)
    assert len(waits) > 15


def test_the_reaper_draws_the_same_jitter_as_python(make_queue: MakeQueue, clock: Clock) -> None:
    """The reaper's SQL and `RetryPolicy.delay` agree, job by job: one rule."""
    typed = RetryPolicy(base=30, cap=10_000, jitter=1.0)
    default = RetryPolicy(base=7, cap=20, jitter=0.9)
    q = make_queue(clock=clock, retry={"typed": typed}, default_retry=default)
    ids = q.enqueue_many(
        [{"job_type": "typed"}] * 40 + [{"job_type": "other", "max_attempts": 9}] * 40
    )
    for round_ in range(1, 4):  # attempts 1, 2 and 3
        jobs = q.claim("w", limit=100)
        assert len(jobs) == 80
        clock.advance(31)
        reaped_at = clock()
        assert q.reap_expired() == 80
        for job in jobs:
            policy = typed if job.job_type == "typed" else default
            wanted = reaped_at + dt.timedelta(seconds=policy.delay(round_, job.id))
            got = q.get(job.id)
            assert got.status is JobStatus.RETRYABLE and got.attempts == round_
            assert abs((got.run_at - wanted).total_seconds()) < 2e-6, (job.id, round_)
        clock.advance(20_000)
    assert len({q.get(i).run_at for i in ids}) > 60  # the draws differ from job to job


# --- the time as a parameter -------------------------------------------------------


def test_statements_take_the_time_read_from_the_database(pg_url: str) -> None:
    """Without an injected clock, the time every statement takes is the
    database's as the queue reckons it: a reading of the server's clock
    carried forward. A reading set by hand shows that no statement reads
    the clock itself; an old reading is replaced by a fresh one."""
    with jobvisor.connect(pg_url) as q:
        q.migrate()
        clock = q._runner.clock  # type: ignore[attr-defined]
        past = dt.datetime(2001, 2, 3, 4, 5, 6, tzinfo=dt.UTC)
        now = time.monotonic()
        clock.set(past, now, now)
        job = q.get(q.enqueue("t"))
        assert dt.timedelta(0) <= job.created_at - past < dt.timedelta(seconds=5)
        assert job.run_at == job.created_at
        (claimed,) = q.claim("w", lease=60)
        assert claimed.started_at is not None and claimed.lease_expires_at is not None
        assert claimed.started_at - past < dt.timedelta(seconds=5)
        assert claimed.lease_expires_at - claimed.started_at == dt.timedelta(seconds=60)

        stale = time.monotonic() - CLOCK_REFRESH - 1
        clock.set(past, stale, stale)
        fresh = q.get(q.enqueue("t"))
        assert abs(fresh.created_at - dt.datetime.now(dt.UTC)) < dt.timedelta(seconds=5)


def test_the_database_time_follows_the_server(pg_url: str) -> None:
    with jobvisor.connect(pg_url) as q:
        q.migrate()
        jid = q.enqueue("t")
        with q.transaction() as conn:
            (server,) = conn.execute("SELECT clock_timestamp()").fetchone()
        assert abs(q.get(jid).created_at - server) < dt.timedelta(seconds=1)
