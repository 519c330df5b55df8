"""What the dashboard's indexes cost the queue's writes: enqueue and claim +
complete throughput on three schemas, on PostgreSQL, in rotating order.

    .venv/bin/python bench/dashboard_write_cost.py [--jobs 200000] [--runs 3]
        [--given-correlation] [--pg-url postgresql://postgres@127.0.0.1:5432/postgres]

Each run is bench/queue_throughput.py's API phase (one `enqueue_many`, then
two processes claiming and completing in batches of 100 until the queue is
empty) on a freshly created and migrated `jobvisor_bench_write_cost`
database, in one of three variants:

- **none**: no dashboard index (`jobvisor_jobs_due_idx` and
  `jobvisor_jobs_correlation_idx` dropped): the schema before migration 10;
- **today**: the schema as migrated (migration 11 dropped
  `jobvisor_jobs_status_idx`; a job's correlation id is stored only when
  one was given);
- **0010**: migration 10's three indexes (`jobvisor_jobs_status_idx` built
  again) with every job's correlation id stored, as every job had one then
  (a random one when none was given).

By default no job is given a correlation id (jobs enqueued outside any
`correlation_scope`), so "today" stores none; with `--given-correlation`
every job in every variant carries one, shared by three jobs, as jobs
enqueued inside a request do, and "today" writes them to the correlation
index. Figures are medians; the variants' order rotates from run to run.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from typing import Any

import psycopg
from psycopg import sql

import jobvisor
from queue_throughput import (
    DEFAULT_PG_URL,
    api_worker,
    claim_complete,
    refresh_statistics,
    with_dbname,
)

DB_NAME = "jobvisor_bench_write_cost"  # its own: other benchmarks may run beside it
VARIANTS = ("none", "today", "0010")
# Constants of this script, run as they are.
DROP_FOR_NONE = (
    "DROP INDEX IF EXISTS jobvisor_jobs_due_idx",
    "DROP INDEX IF EXISTS jobvisor_jobs_correlation_idx",
)
STATUS_IDX_0010 = (
    "CREATE INDEX jobvisor_jobs_status_idx ON jobvisor_jobs (status, id) INCLUDE (queue, job_type)"
)


def recreate(admin_url: str, *, create: bool = True) -> str:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        name = sql.Identifier(DB_NAME)
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
        if create:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(name))
    url = with_dbname(admin_url, DB_NAME)
    if create:
        with jobvisor.connect(url) as q:
            q.migrate()
    return url


def items(jobs: int, variant: str, *, given: bool) -> list[dict[str, Any]]:
    if given:
        return [
            {"job_type": "bench", "payload": {"n": n}, "correlation_id": f"req-{n // 3}"}
            for n in range(jobs)
        ]
    if variant == "0010":  # what migration 10's enqueue stored: a random id per job
        return [
            {"job_type": "bench", "payload": {"n": n}, "correlation_id": uuid.uuid4().hex}
            for n in range(jobs)
        ]
    return [{"job_type": "bench", "payload": {"n": n}} for n in range(jobs)]


def one_run(admin_url: str, jobs: int, variant: str, *, given: bool) -> tuple[float, float]:
    """(enqueue jobs/s, claim + complete jobs/s) on a fresh database."""
    url = recreate(admin_url)
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in DROP_FOR_NONE if variant == "none" else ():
            conn.execute(statement)  # type: ignore[arg-type]
        if variant == "0010":
            conn.execute(STATUS_IDX_0010)  # type: ignore[arg-type]
    work = items(jobs, variant, given=given)
    with jobvisor.connect(url) as q:
        q.summary()
        started = time.perf_counter()
        q.enqueue_many(work)
        enqueue_seconds = time.perf_counter() - started
    refresh_statistics(url)
    seconds = claim_complete(url, api_worker, workers=2, batch=100, jobs=jobs)
    return jobs / enqueue_seconds, jobs / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--given-correlation", action="store_true")
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float]]] = {v: [] for v in VARIANTS}
    for run in range(args.runs):
        for k in range(len(VARIANTS)):
            variant = VARIANTS[(run + k) % len(VARIANTS)]
            figures = one_run(args.pg_url, args.jobs, variant, given=args.given_correlation)
            results[variant].append(figures)
            enq, done = figures
            print(f"run {run + 1} {variant:>5}: enqueue {enq:,.0f}/s, claim+complete {done:,.0f}/s")
    recreate(args.pg_url, create=False)
    given = "every job a given correlation id" if args.given_correlation else "none given"
    print(f"\n{args.jobs:,} jobs, correlation ids: {given}; median of {args.runs} runs (jobs/s)")
    print(f"{'schema':<8} {'enqueue':>10} {'vs none':>8} {'claim+complete':>16} {'vs none':>8}")
    base_enq = statistics.median(r[0] for r in results["none"])
    base_done = statistics.median(r[1] for r in results["none"])
    for variant in VARIANTS:
        enq = statistics.median(r[0] for r in results[variant])
        done = statistics.median(r[1] for r in results[variant])
        print(
            f"{variant:<8} {enq:>10,.0f} {enq / base_enq - 1:>+8.1%}"
            f" {done:>16,.0f} {done / base_done - 1:>+8.1%}"
        )


if __name__ == "__main__":
    main()
