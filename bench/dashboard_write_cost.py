"""What the dashboard's three indexes (migration 10) cost the queue's writes:
enqueue and claim + complete throughput with them and without them, on
PostgreSQL, alternating which goes first.

    .venv/bin/python bench/dashboard_write_cost.py [--jobs 50000] [--runs 3]
        [--pg-url postgresql://postgres@127.0.0.1:5432/postgres]

Each run is bench/queue_throughput.py's API phase (one `enqueue_many`, then
two processes claiming and completing in batches of 100 until the queue is
empty) on a freshly created and migrated `jobvisor_bench_write_cost` database, from
which the "without" variant drops `jobvisor_jobs_status_idx`,
`jobvisor_jobs_due_idx` and `jobvisor_jobs_correlation_idx`. Every job has a
correlation id, as jobs enqueued inside a request do. Figures are medians.
"""

from __future__ import annotations

import argparse
import statistics
import time

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
INDEXES = ("jobvisor_jobs_status_idx", "jobvisor_jobs_due_idx", "jobvisor_jobs_correlation_idx")


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


def one_run(admin_url: str, jobs: int, *, with_indexes: bool) -> tuple[float, float]:
    """(enqueue jobs/s, claim + complete jobs/s) on a fresh database."""
    url = recreate(admin_url)
    if not with_indexes:
        with psycopg.connect(url, autocommit=True) as conn:
            for name in INDEXES:
                conn.execute(f"DROP INDEX {name}")  # a constant of this script
    items = [
        {"job_type": "bench", "payload": {"n": n}, "correlation_id": f"req-{n // 3}"}
        for n in range(jobs)
    ]
    with jobvisor.connect(url) as q:
        q.summary()
        started = time.perf_counter()
        q.enqueue_many(items)
        enqueue_seconds = time.perf_counter() - started
    refresh_statistics(url)
    seconds = claim_complete(url, api_worker, workers=2, batch=100, jobs=jobs)
    return jobs / enqueue_seconds, jobs / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    args = parser.parse_args()
    results: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    for run in range(args.runs):
        for with_indexes in (run % 2 == 0, run % 2 != 0):
            results[with_indexes].append(one_run(args.pg_url, args.jobs, with_indexes=with_indexes))
            enq, done = results[with_indexes][-1]
            label = "with" if with_indexes else "without"
            print(f"run {run + 1} {label:>7}: enqueue {enq:,.0f}/s, claim+complete {done:,.0f}/s")
    recreate(args.pg_url, create=False)
    print(f"\n{args.jobs:,} jobs, median of {args.runs} runs (jobs/s)")
    print(f"{'indexes':<10} {'enqueue':>10} {'claim+complete':>16}")
    for with_indexes in (False, True):
        enq = statistics.median(r[0] for r in results[with_indexes])
        done = statistics.median(r[1] for r in results[with_indexes])
        print(f"{'with' if with_indexes else 'without':<10} {enq:>10,.0f} {done:>16,.0f}")


if __name__ == "__main__":
    main()
