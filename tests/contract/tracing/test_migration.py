"""Migration 0002 adds the `meta` column: a database at version 1 with jobs
in every state upgrades to the latest version (2: meta, 3: one index less)
with those jobs intact and usable."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Sequence
from typing import Any

import psycopg

import jobvisor
from jobvisor import JobStatus
from jobvisor.queue import ops
from jobvisor.queue.api import parse_url
from jobvisor.queue.drivers.postgres import sql as sql_postgres
from jobvisor.queue.drivers.sqlite import sql as sql_sqlite
from jobvisor.queue.drivers.sqlite.runner import split_script
from tests.support.invariants import assert_invariants

V1_COLUMNS = (
    "id, queue, job_type, payload, priority, run_at, status, attempts, max_attempts,"
    " last_error, correlation_id, dedupe_key, lease_expires_at, claim_token, worker_id,"
    " created_at, started_at, finished_at"
)
SELECT_V1 = "SELECT " + V1_COLUMNS + " FROM jobvisor_jobs ORDER BY id"

# Jobs as a version-1 jobvisor wrote them: waiting, running, finished, dead.
PENDING, RUNNING, COMPLETED, DEAD = (uuid.UUID(int=n) for n in range(1, 5))
PG_JOBS = """
INSERT INTO jobvisor_jobs (id, queue, job_type, payload, priority, run_at, status, attempts,
    max_attempts, last_error, correlation_id, dedupe_key, lease_expires_at, claim_token,
    worker_id, created_at, started_at, finished_at) VALUES
('00000000-0000-0000-0000-000000000001', 'mail', 'send_email', '{"to": "a"}', 5,
    now() - interval '1 minute', 'pending', 0, 3, NULL, 'c-1', 'k-1', NULL, NULL, NULL,
    now() - interval '1 minute', NULL, NULL),
('00000000-0000-0000-0000-000000000002', 'default', 'resize', '[1, 2]', 0, now(), 'running', 1,
    3, NULL, 'c-2', NULL, now() + interval '1 hour', gen_random_uuid(), 'w-old', now(), now(),
    NULL),
('00000000-0000-0000-0000-000000000003', 'default', 'resize', '{}', 0, now(), 'completed', 1,
    3, NULL, 'c-3', NULL, NULL, NULL, 'w-old', now(), now(), now()),
('00000000-0000-0000-0000-000000000004', 'mail', 'send_email', '{}', 0, now(), 'dead', 3, 3,
    'ValueError: no', 'c-4', NULL, NULL, NULL, 'w-old', now(), now(), now())
"""
NOW = "((julianday('now') - 2440587.5) * 86400.0)"
SQLITE_JOBS = f"""
INSERT INTO jobvisor_jobs (id, queue, job_type, payload, priority, run_at, status, attempts,
    max_attempts, last_error, correlation_id, dedupe_key, lease_expires_at, claim_token,
    worker_id, created_at, started_at, finished_at) VALUES
('00000000-0000-0000-0000-000000000001', 'mail', 'send_email', '{{"to": "a"}}', 5,
    {NOW} - 60, 'pending', 0, 3, NULL, 'c-1', 'k-1', NULL, NULL, NULL, {NOW} - 60, NULL, NULL),
('00000000-0000-0000-0000-000000000002', 'default', 'resize', '[1, 2]', 0, {NOW}, 'running', 1,
    3, NULL, 'c-2', NULL, {NOW} + 3600, lower(hex(randomblob(16))), 'w-old', {NOW}, {NOW}, NULL),
('00000000-0000-0000-0000-000000000003', 'default', 'resize', '{{}}', 0, {NOW}, 'completed', 1,
    3, NULL, 'c-3', NULL, NULL, NULL, 'w-old', {NOW}, {NOW}, {NOW}),
('00000000-0000-0000-0000-000000000004', 'mail', 'send_email', '{{}}', 0, {NOW}, 'dead', 3, 3,
    'ValueError: no', 'c-4', NULL, NULL, NULL, 'w-old', {NOW}, {NOW}, {NOW})
"""


def make_version_1(url: str) -> list[Sequence[Any]]:
    """Build the schema of migration 0001 alone, recorded as version 1, with
    jobs written by that version; returns the rows."""
    engine, target = parse_url(url)
    (first, *_rest) = ops.migration_files(engine)
    version, name, script = first
    assert version == 1
    if engine == "postgres":
        with psycopg.connect(target) as conn:
            conn.execute(sql_postgres.MIGRATIONS_TABLE_CREATE)
            conn.execute(script.encode())
            conn.execute(sql_postgres.MIGRATION_RECORD, {"version": 1, "name": name})
            conn.execute(PG_JOBS.encode())
        return read_v1(url)
    lite = sqlite3.connect(target, isolation_level=None)
    try:
        lite.execute("BEGIN")
        lite.execute(sql_sqlite.MIGRATIONS_TABLE_CREATE)
        for statement in split_script(script):
            lite.execute(statement)
        lite.execute(sql_sqlite.MIGRATION_RECORD, {"version": 1, "name": name})
        lite.execute(SQLITE_JOBS)
        lite.execute("COMMIT")
    finally:
        lite.close()
    return read_v1(url)


def read_v1(url: str) -> list[Sequence[Any]]:
    """Every job row, version 1's columns only, straight from the table."""
    engine, target = parse_url(url)
    if engine == "postgres":
        with psycopg.connect(target) as conn:
            return list(conn.execute(SELECT_V1.encode()).fetchall())
    lite = sqlite3.connect(target)
    try:
        return list(lite.execute(SELECT_V1).fetchall())
    finally:
        lite.close()


def test_a_version_1_database_with_jobs_upgrades_with_its_jobs_intact(url: str) -> None:
    before = make_version_1(url)
    assert len(before) == 4
    with jobvisor.connect(url) as queue:
        assert queue.schema_version() == 1
        later = [v for v, _, _ in ops.migration_files(queue.engine) if v > 1]
        assert later[:2] == [2, 3]  # and any migration after them
        assert queue.migrate() == later
        assert queue.schema_version() == later[-1]
        assert queue.migrate() == []  # recorded: SQLite's ADD COLUMN never runs twice

        assert read_v1(url) == before
        jobs = {job_id: queue.get(job_id) for job_id in (PENDING, RUNNING, COMPLETED, DEAD)}
        assert {j.id: j.status for j in jobs.values()} == {
            PENDING: JobStatus.PENDING,
            RUNNING: JobStatus.RUNNING,
            COMPLETED: JobStatus.COMPLETED,
            DEAD: JobStatus.DEAD,
        }
        assert all(j.meta is None for j in jobs.values())
        assert jobs[PENDING].payload == {"to": "a"} and jobs[RUNNING].payload == [1, 2]
        assert [j.id for j in queue.dead.list()] == [DEAD]

        # The old jobs work with the new code: claimed, completed, requeued.
        (claimed,) = queue.claim("w-new")
        assert claimed.id == PENDING and claimed.meta is None and claimed.attempts == 1
        queue.complete(claimed)
        assert queue.get(PENDING).status == JobStatus.COMPLETED
        queue.dead.requeue(DEAD)
        assert queue.get(DEAD).status == JobStatus.PENDING
        assert queue.requeue_crashed("w-old") == 1  # the running job of the old worker
        assert queue.get(RUNNING).status == JobStatus.RETRYABLE
        # The dedupe key of the old pending job is free again now it completed.
        fresh = queue.enqueue("send_email", dedupe_key="k-1")
        assert fresh not in jobs and queue.get(fresh).meta is None
    assert_invariants(url)
