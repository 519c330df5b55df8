"""Bulk enqueue: `enqueue_many` of many jobs, on PostgreSQL and SQLite.

    .venv/bin/python bench/enqueue_many.py [--jobs 100000] [--chunk 1000]
        [--engine postgres|sqlite|both|citus] [--runs 3] [--dedupe 0.0]
        [--pg-url postgresql://postgres@127.0.0.1:5432/postgres]
        [--citus-url postgresql://postgres@127.0.0.1:56001/postgres]

Two shapes, each from an empty jobs table and timed from the call to its
return (checks, the COPY or executemany, and the commit):

- **chunks**: `--jobs` jobs in calls of `--chunk` (1,000 x100 by default),
  each call its own transaction;
- **one call**: `--jobs` jobs in one `enqueue_many` call.

The items are mappings as an application passes them (`{"job_type": ...,
"payload": {...}}`), so the checks of every item are in the figure. With
`--dedupe F`, that fraction of the items carries a dedupe key (half of them
a key an earlier item already holds). Each figure is the median of `--runs`
runs. PostgreSQL runs in a database `jobvisor_bench_enqueue_many` that the
script drops and creates (`--pg-url` names the server's maintenance
database); SQLite in a temporary file; Citus mode in a database of that name
on every node of the cluster `--citus-url` names (see `bench/burndown.py`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

import jobvisor
from queue_throughput import drop_pg_database, recreate_pg_database

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
DEFAULT_CITUS_URL = "postgresql://postgres@127.0.0.1:56001/postgres"
BENCH_DB = "jobvisor_bench_enqueue_many"


def empty(url: str) -> None:
    """Empty the jobs table (and, on PostgreSQL, flush what came before)."""
    if url.startswith("postgresql"):
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("TRUNCATE jobvisor_jobs CASCADE")
            conn.execute("CHECKPOINT")
        return
    with jobvisor.connect(url) as q, q.transaction() as conn:
        conn.execute("DELETE FROM jobvisor_jobs")


def items(jobs: int, dedupe: float) -> list[dict[str, Any]]:
    """The jobs to enqueue; a fraction `dedupe` of them with a dedupe key,
    every other keyed item repeating the key before it."""
    every = round(1 / dedupe) if dedupe > 0 else 0
    made: list[dict[str, Any]] = []
    for n in range(jobs):
        item: dict[str, Any] = {"job_type": "bench", "payload": {"n": n, "to": "a@example.org"}}
        if every and n % every == 0:
            item["dedupe_key"] = f"k{(n // every) // 2}"
        made.append(item)
    return made


def timed(url: str, body: Callable[[jobvisor.Queue], int], jobs: int) -> float:
    """Jobs/s of `body` on a fresh queue; `body` returns how many ids it got."""
    empty(url)
    with jobvisor.connect(url) as q:
        q.summary()  # the connection is open before the clock starts
        started = time.perf_counter()
        got = body(q)
        elapsed = time.perf_counter() - started
    if got != jobs:
        raise SystemExit(f"enqueue_many returned {got} ids for {jobs} jobs")
    return jobs / elapsed


def run_engine(url: str, label: str, args: argparse.Namespace) -> None:
    batch = items(args.jobs, args.dedupe)

    def chunks(q: jobvisor.Queue) -> int:
        return sum(
            len(q.enqueue_many(batch[i : i + args.chunk])) for i in range(0, len(batch), args.chunk)
        )

    def one_call(q: jobvisor.Queue) -> int:
        return len(q.enqueue_many(batch))

    calls = -(-args.jobs // args.chunk)
    for shape, body in ((f"{args.chunk:,} x{calls}", chunks), ("one call", one_call)):
        rates = [timed(url, body, args.jobs) for _ in range(args.runs)]
        figures = ", ".join(f"{r:,.0f}" for r in rates)
        print(
            f"{label:10} {shape:>12}: median {statistics.median(rates):>9,.0f} jobs/s"
            f"  (runs: {figures})",
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--chunk", type=int, default=1000)
    parser.add_argument("--engine", choices=["postgres", "sqlite", "both", "citus"], default="both")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dedupe", type=float, default=0.0)
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    parser.add_argument("--citus-url", default=DEFAULT_CITUS_URL)
    args = parser.parse_args(argv)
    print(f"{args.jobs:,} jobs, dedupe keys on {args.dedupe:.0%}, median of {args.runs} runs")
    if args.engine in ("postgres", "both"):
        url = recreate_pg_database(args.pg_url, BENCH_DB)
        run_engine(url, "postgres", args)
        drop_pg_database(args.pg_url, BENCH_DB)
    if args.engine == "citus":
        os.environ["JOBVISOR_CITUS"] = "on"  # every queue below in Citus mode
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from tests.support.citus import create_database, drop_database  # noqa: PLC0415  (on the path just now)

        url, nodes = create_database(args.citus_url, BENCH_DB)
        run_engine(url, "citus", args)
        drop_database([args.citus_url, *nodes], BENCH_DB)
    if args.engine in ("sqlite", "both"):
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{Path(tmp) / 'bench.db'}"
            with jobvisor.connect(url) as q:
                q.migrate()
            run_engine(url, "sqlite", args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
