"""What `unique=` costs an enqueue, and how long migration 0009's index build
holds writes back.

    .venv/bin/python bench/unique_enqueue.py [--calls 5000] [--engine both]
        [--index-rows 1000000] [--bulk-jobs 50000] [--runs 3]
        [--pg-url postgresql://postgres@127.0.0.1:5432/postgres]

Enqueue: from an empty jobs table, one process calls `enqueue` `--calls`
times (0 skips it), one job per call (a round trip and a commit each), in four ways:

- plain: no key;
- unique, new: `Unique(key=str(n))`, every call inserts;
- unique, ignore: `Unique(key="one")`, every call after the first finds the
  holder (the insert, then the read of the holder's id);
- unique, replace: the same key with `on_conflict="replace"`, every call
  after the first rewrites the pending holder's payload and run_at.

Index build: `--index-rows` jobs are written with `enqueue_many`, the unique
index is dropped and built again with the migration's statement, timed: the
time PostgreSQL holds writes back while `migrate()` adds it to a table of
that size. `--index-rows 0` skips it.

Schema: `--bulk-jobs` jobs in one `enqueue_many` into an empty table, then
claimed 100 at a time and completed by one process, with migration 0009's
index and trigger and with both dropped, `--runs` fresh databases each way,
alternating: what the schema costs jobs without a key.
`--bulk-jobs 0` skips it.

PostgreSQL runs in a database `jobvisor_bench_unique` that the script drops
and creates; SQLite in a temporary file. With `--runs N` each figure is the
median of N runs.
"""

from __future__ import annotations

import argparse
import functools
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

import jobvisor
from jobvisor import Queue, Unique
from queue_throughput import drop_pg_database, recreate_pg_database

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
BENCH_DB = "jobvisor_bench_unique"
INDEX_DROP = "DROP INDEX jobvisor_jobs_unique_idx"
TRIGGER_DROP = {
    "postgres": "DROP TRIGGER jobvisor_jobs_unique_release ON jobvisor_jobs",
    "sqlite": "DROP TRIGGER jobvisor_jobs_unique_release",
}
INDEX_BUILD = (
    "CREATE UNIQUE INDEX jobvisor_jobs_unique_idx"
    " ON jobvisor_jobs (unique_key) WHERE unique_key IS NOT NULL"
)

Way = Callable[[Queue, int], object]

WAYS: dict[str, Way] = {
    "plain": lambda q, n: q.enqueue("bench", {"n": n}),
    "unique, new": lambda q, n: q.enqueue("bench", {"n": n}, unique=Unique(key=str(n))),
    "unique, ignore": lambda q, n: q.enqueue("bench", {"n": n}, unique=Unique(key="one")),
    "unique, replace": lambda q, n: q.enqueue(
        "bench", {"n": n}, unique=Unique(key="one"), on_conflict="replace"
    ),
}


@contextmanager
def empty_queue(engine: str, pg_url: str) -> Iterator[tuple[Queue, str]]:
    """A migrated queue on an empty database of `engine`, and its URL."""
    if engine == "postgres":
        url = recreate_pg_database(pg_url, BENCH_DB)
        with jobvisor.connect(url) as q:
            yield q, url
        drop_pg_database(pg_url, BENCH_DB)
        return
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        with jobvisor.connect(url) as q:
            q.migrate()
            yield q, url


def enqueue_rate(engine: str, pg_url: str, way: Way, calls: int) -> float:
    with empty_queue(engine, pg_url) as (q, _):
        way(q, -1)  # the first call (connection, prepared statements) untimed
        start = time.perf_counter()
        for n in range(calls):
            way(q, n)
        return calls / (time.perf_counter() - start)


def run_sql(engine: str, url: str, statements: list[str]) -> float:
    """Run `statements` on a connection of their own; the seconds the last took."""
    if engine == "postgres":
        with psycopg.connect(url, autocommit=True) as conn:
            for statement in statements[:-1]:
                conn.execute(statement.encode())
            started = time.perf_counter()
            conn.execute(statements[-1].encode())
            return time.perf_counter() - started
    lite = sqlite3.connect(url[len("sqlite:///") :], isolation_level=None)
    try:
        for statement in statements[:-1]:
            lite.execute(statement)
        started = time.perf_counter()
        lite.execute(statements[-1])
        return time.perf_counter() - started
    finally:
        lite.close()


def index_build_seconds(engine: str, pg_url: str, rows: int) -> float:
    with empty_queue(engine, pg_url) as (q, url):
        batch = 100_000
        for start in range(0, rows, batch):
            q.enqueue_many([{"job_type": "bench"}] * min(batch, rows - start))
        analyze = "VACUUM ANALYZE jobvisor_jobs" if engine == "postgres" else "ANALYZE"
        return run_sql(engine, url, [analyze, INDEX_DROP, INDEX_BUILD])


def bulk_rates(engine: str, pg_url: str, jobs: int, schema: bool) -> tuple[float, float]:
    """(`enqueue_many`, claim + complete) jobs/s for `jobs` jobs on an empty
    table, with migration 0009's index and trigger (`schema`) or with both
    dropped: one `enqueue_many`, then one process claiming 100 at a time and
    completing them until none is left (every claim and completion changes a
    status, so evaluates the trigger's `WHEN`)."""
    with empty_queue(engine, pg_url) as (q, url):
        if not schema:
            run_sql(engine, url, [TRIGGER_DROP[engine], INDEX_DROP])
        started = time.perf_counter()
        q.enqueue_many([{"job_type": "bench"}] * jobs)
        enqueued = time.perf_counter()
        while batch := q.claim("bench", limit=100):
            q.complete_many(batch)
        return jobs / (enqueued - started), jobs / (time.perf_counter() - enqueued)


def schema_rates(engine: str, pg_url: str, jobs: int, runs: int) -> dict[str, list[float]]:
    """`bulk_rates` without and with the schema, `runs` times each,
    alternating, by what was measured and which side."""
    rates: dict[str, list[float]] = {}
    for _ in range(runs):
        for schema, side in ((False, "without"), (True, "with")):
            enqueue, burn = bulk_rates(engine, pg_url, jobs, schema)
            rates.setdefault(f"enqueue_many, {side}", []).append(enqueue)
            rates.setdefault(f"claim + complete, {side}", []).append(burn)
    return rates


def median(measure: Callable[[], float], runs: int) -> float:
    return statistics.median(measure() for _ in range(runs))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--engine", choices=["postgres", "sqlite", "both"], default="both")
    parser.add_argument("--index-rows", type=int, default=1_000_000)
    parser.add_argument("--bulk-jobs", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    args = parser.parse_args(argv)
    engines = ["postgres", "sqlite"] if args.engine == "both" else [args.engine]
    results: list[tuple[str, str, str]] = []
    for engine in engines:
        plain = 0.0
        for name, way in WAYS.items() if args.calls else ():
            measure = functools.partial(enqueue_rate, engine, args.pg_url, way, args.calls)
            rate = median(measure, args.runs)
            plain = plain or rate
            results.append(
                (engine, f"enqueue, {name}", f"{rate:,.0f} calls/s ({rate / plain:.2f})")
            )
            print(*results[-1], sep="  ", flush=True)
        if args.index_rows:
            build = functools.partial(index_build_seconds, engine, args.pg_url, args.index_rows)
            seconds = median(build, args.runs)
            results.append((engine, f"index build, {args.index_rows:,} rows", f"{seconds:.3f} s"))
            print(*results[-1], sep="  ", flush=True)
        if args.bulk_jobs:
            measured = schema_rates(engine, args.pg_url, args.bulk_jobs, args.runs)
            for label, rates in sorted(measured.items()):
                spread = ", ".join(f"{r:,.0f}" for r in rates)
                figure = f"{statistics.median(rates):,.0f} jobs/s ({spread})"
                results.append((engine, f"{label} 0009's index and trigger", figure))
                print(*results[-1], sep="  ", flush=True)
    print(f"\n== median of {args.runs} run(s), {args.calls:,} calls each ==")
    width = max(len(r[1]) for r in results)
    for engine, what, figure in results:
        print(f"{engine:<9} {what:<{width}}  {figure}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
