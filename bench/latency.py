"""Latency: from an enqueue's commit to its handler's first line, on an idle
worker (PostgreSQL: LISTEN/NOTIFY wakes it).

    .venv/bin/python bench/latency.py [--samples 500] [--pg-url postgresql://…/postgres]
        [--citus-url postgresql://postgres@127.0.0.1:56001/postgres]

One worker process (`python -m jobvisor.worker`, app `bench.latency_app`)
waits on an empty queue. The bench enqueues one job at a time and the
handler sends the time it started back over a pipe. Two figures: from the
call of `enqueue` (so including its own commit) and from its return (the
queue's pickup alone; the handler may even start before the enqueuer has read
its commit's reply, so this one can be negative). The next job is enqueued
only after the previous one was seen, with a short random pause, so the
worker is idle each time. Prints p50, p90, p99 and max in milliseconds.

Runs in a database named `jobvisor_bench_latency`, dropped and created. With
`--citus-url` it runs in Citus mode on that cluster (a database of that name
on every node, see `bench/burndown.py --engine citus`): the enqueue's notice
goes from the coordinator, where the worker listens.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psycopg
from psycopg import sql

import jobvisor

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
BENCH_DB = "jobvisor_bench_latency"
ROOT = Path(__file__).resolve().parents[1]


def _with_dbname(url: str, dbname: str) -> str:
    base, _, query = url.partition("?")
    scheme, _, rest = base.partition("://")
    authority = rest.split("/", 1)[0]
    return f"{scheme}://{authority}/{dbname}" + (f"?{query}" if query else "")


def fresh_database(pg_url: str, name: str) -> str:
    """Drop and create the database `name` on `pg_url`'s server; its URL."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return _with_dbname(pg_url, name)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def print_summary(name: str, values: list[float]) -> None:
    """One line: how many samples, their p50, p90, p99, max and mean in ms."""
    print(f"{name}, {len(values)} samples (ms): "
          f"p50 {percentile(values, 50):.2f}  p90 {percentile(values, 90):.2f}  "
          f"p99 {percentile(values, 99):.2f}  max {max(values):.2f}  "
          f"mean {statistics.fmean(values):.2f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    parser.add_argument("--citus-url", help="a Citus coordinator: run in Citus mode there")
    args = parser.parse_args()
    citus = bool(args.citus_url)
    if citus:
        sys.path.insert(0, str(ROOT))
        from tests.support.citus import create_database  # noqa: PLC0415  (on the path just now)

        url, _ = create_database(args.citus_url, BENCH_DB)
    else:
        url = fresh_database(args.pg_url, BENCH_DB)
    queue = jobvisor.connect(url, citus=citus)
    queue.migrate()
    read_fd, write_fd = os.pipe()
    env = dict(os.environ, JOBVISOR_DATABASE_URL=url, JOBVISOR_APP="bench.latency_app:registry",
               JOBVISOR_LOG_LEVEL="warning", JOBVISOR_POLL_INTERVAL="5",
               LATENCY_FD=str(write_fd), PYTHONPATH=str(ROOT),
               JOBVISOR_CITUS="1" if citus else "0")  # fmt: skip
    worker = subprocess.Popen([sys.executable, "-m", "jobvisor.worker"], env=env, cwd=ROOT,
                              pass_fds=(write_fd,))  # fmt: skip
    os.close(write_fd)
    samples: list[float] = []
    pickups: list[float] = []
    reader = os.fdopen(read_fd, "r")
    try:
        queue.enqueue("latency")
        reader.readline()  # the worker is up and has run one job
        for _ in range(args.samples):
            time.sleep(random.uniform(0.005, 0.02))  # idle again
            called = time.time()
            queue.enqueue("latency")
            returned = time.time()
            started = float(reader.readline())
            samples.append((started - called) * 1000)
            pickups.append((started - returned) * 1000)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(30)
        reader.close()
        queue.close()
    print_summary("enqueue call -> handler start", samples)
    print_summary("enqueue return -> handler start", pickups)


if __name__ == "__main__":
    main()
