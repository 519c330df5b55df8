"""The chaos scenarios' final check must be able to fail: each kind of damage
it looks for, made by hand on a small table, is caught (and the undamaged
table passes)."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

import jobvisor
from jobvisor.queue.api import parse_url
from tests.support.postgres import Databases, with_dbname
from tests.support.service import Service

from .app import LEDGER_INSERT
from .ledger import assert_chaos_invariants, prepare


def execute(url: str, sql: str, params: tuple[object, ...] = ()) -> None:
    with psycopg.connect(parse_url(url)[1], autocommit=True) as conn:
        conn.execute(sql, params)


def record(url: str, job_id: uuid.UUID, token: uuid.UUID, worker: str, attempt: int) -> None:
    now = dt.datetime.now(dt.UTC)
    execute(url, LEDGER_INSERT, (uuid.uuid4(), job_id, token, worker, attempt, 1, now))


@pytest.fixture(scope="module")
def checked_url(pg_admin_url: str, pg_databases: Databases) -> Iterator[str]:
    """One database for the module (each test empties its tables first)."""
    name = pg_databases.take()
    try:
        url = with_dbname(pg_admin_url, name)
        prepare(url)
        yield url
    finally:
        pg_databases.give_back(name)


@pytest.fixture
def finished(checked_url: str) -> tuple[str, list[uuid.UUID]]:
    """Three jobs claimed by `w-a`, recorded in the ledger and completed."""
    pg_url = checked_url
    execute(pg_url, "TRUNCATE jobvisor_jobs, chaos_ledger CASCADE")
    with jobvisor.connect(pg_url, pool_size=1) as q:
        ids = q.enqueue_many([{"job_type": "chaos"}] * 3)
        jobs = q.claim("w-a", limit=3)
        for job in jobs:
            assert job.claim_token is not None
            record(pg_url, job.id, job.claim_token, "w-a", job.attempts)
            q.complete(job)
    return pg_url, ids


def test_the_undamaged_table_passes(finished: tuple[str, list[uuid.UUID]]) -> None:
    url, ids = finished
    outcome = assert_chaos_invariants(url, ids, [])
    assert outcome.statuses == {"completed": 3} and outcome.runs == 3 and not outcome.extra_runs


def lose_one(url: str, ids: list[uuid.UUID]) -> list[uuid.UUID]:
    return [*ids, uuid.uuid4()]


def invent_one(url: str, ids: list[uuid.UUID]) -> list[uuid.UUID]:
    return ids[1:]


def leave_one_running(url: str, ids: list[uuid.UUID]) -> list[uuid.UUID]:
    with jobvisor.connect(url, pool_size=1) as q:
        extra = q.enqueue("chaos")
        (job,) = q.claim("w-b")
        assert job.claim_token is not None
        record(url, job.id, job.claim_token, "w-b", 1)
    return [*ids, extra]


def kill_one_without_error(url: str, ids: list[uuid.UUID]) -> list[uuid.UUID]:
    execute(url, "UPDATE jobvisor_jobs SET status = 'dead', last_error = NULL WHERE id = %s",
            (ids[0],))  # fmt: skip
    return ids


def run_one_twice(url: str, ids: list[uuid.UUID]) -> list[uuid.UUID]:
    record(url, ids[0], uuid.uuid4(), "w-b", 1)
    return ids


def share_a_claim(url: str, ids: list[uuid.UUID]) -> list[uuid.UUID]:
    execute(url, "INSERT INTO chaos_ledger"
            " (run_id, job_id, claim_token, worker_id, attempt, pid, at)"
            " SELECT gen_random_uuid(), job_id, claim_token, worker_id, attempt, pid, at"
            " FROM chaos_ledger WHERE job_id = %s LIMIT 1", (ids[0],))  # fmt: skip
    return ids


def forget_a_run(url: str, ids: list[uuid.UUID]) -> list[uuid.UUID]:
    execute(url, "DELETE FROM chaos_ledger WHERE job_id = %s", (ids[0],))
    return ids


def run_after_completion(url: str, ids: list[uuid.UUID]) -> list[uuid.UUID]:
    record(url, ids[0], uuid.uuid4(), "w-a", 2)
    return ids


@pytest.mark.parametrize(
    ("damage", "complaint"),
    [
        (lose_one, "enqueued jobs are missing"),
        (invent_one, "jobs nobody enqueued"),
        (leave_one_running, "jobs left in {'running': 1}"),
        (kill_one_without_error, "dead jobs without a last_error"),
        (run_one_twice, "runs that nothing cut short"),
        (share_a_claim, "shared claims"),
        (forget_a_run, "completed without its run"),
        (run_after_completion, "runs after the completing one"),
    ],
)
def test_damage_is_caught(
    finished: tuple[str, list[uuid.UUID]],
    damage: Callable[[str, list[uuid.UUID]], list[uuid.UUID]],
    complaint: str,
) -> None:
    url, ids = finished
    enqueued = damage(url, ids)
    with pytest.raises(AssertionError, match=complaint.replace("{", r"\{").replace("}", r"\}")):
        assert_chaos_invariants(url, enqueued, [])


def test_a_lost_lease_explains_no_rerun_under_the_same_attempt(
    finished: tuple[str, list[uuid.UUID]], tmp_path: Path
) -> None:
    """A lease is lost to a reap or a requeue, which count the attempt: a run
    with the completing run's attempt was not cut short that way."""
    url, ids = finished
    run_one_twice(url, ids)
    service = Service(url, tmp_path)  # never started: only its log is read
    event = {"event": "job.lease_lost", "worker_id": "w-b", "job_id": str(ids[0])}
    service.log_path.write_text(json.dumps(event) + "\n")
    with pytest.raises(AssertionError, match="runs that nothing cut short"):
        assert_chaos_invariants(url, ids, [service])


def test_a_second_run_is_allowed_where_the_log_says_its_lease_was_lost(
    finished: tuple[str, list[uuid.UUID]], tmp_path: Path
) -> None:
    url, ids = finished
    # The first run on w-b lost its lease; the job was claimed again (attempt
    # 2) by w-a, which completed it.
    execute(url, "UPDATE jobvisor_jobs SET attempts = 2 WHERE id = %s", (ids[0],))
    execute(url, "UPDATE chaos_ledger SET attempt = 2 WHERE job_id = %s", (ids[0],))
    run_one_twice(url, ids)
    service = Service(url, tmp_path)  # never started: only its log is read
    event = {"event": "job.lease_lost", "worker_id": "w-b", "job_id": str(ids[0])}
    service.log_path.write_text(json.dumps(event) + "\n")
    outcome = assert_chaos_invariants(url, ids, [service])
    assert [(r.job_id, r.worker_id, r.why) for r in outcome.extra_runs] == [
        (str(ids[0]), "w-b", "the lease was lost")
    ]


def test_a_crash_explains_a_rerun_just_before_it_and_no_other(
    finished: tuple[str, list[uuid.UUID]],
) -> None:
    """A crash may undo the last claims and completions a worker committed
    without waiting for the flush: a run shortly before it may be run again,
    a run long before it may not."""
    url, ids = finished
    run_one_twice(url, ids)
    now = dt.datetime.now(dt.UTC)
    outcome = assert_chaos_invariants(url, ids, [], crashed=[now])
    assert [(r.job_id, r.why) for r in outcome.extra_runs] == [
        (str(ids[0]), "the server crashed before its claim or completion was flushed")
    ]
    with pytest.raises(AssertionError, match="runs that nothing cut short"):
        assert_chaos_invariants(url, ids, [], crashed=[now + dt.timedelta(minutes=1)])
