"""Limits under load: throughput of a type with `concurrency=50` and a type
with `key_concurrency=2` (100 keys), offered at a fixed rate, against the
same load without limits, the two runs alternating.

    .venv/bin/python bench/limits.py [--rate 10000] [--seconds 10] [--workers 2]
        [--concurrency 100] [--keys 100] [--runs 1] [--engine postgres|sqlite|citus]
        [--pg-url postgresql://postgres@127.0.0.1:5432/postgres]
        [--citus-url postgresql://postgres@127.0.0.1:56001/postgres]

One `jobvisor run` (one host) with `--workers` workers at `--concurrency`
each, app `bench.limits_app:limited` or `:unlimited`. An enqueuer offers
`--rate` jobs a second for `--seconds` seconds (a batch every 10 ms, the two
types alternating, each keyed job a random one of `--keys` tenants). Jobs
per second is the jobs divided by the time from the first enqueue to the
last completion (the database's clock); "most running" is the most
`capped` jobs seen running at once by a sampler reading the table every
5 ms, and must not pass the limit. The mean time
a capped job spends `running` (claim to completion) bounds what 50 slots can
carry: 50 / that time, by Little's law.

PostgreSQL runs in a database `jobvisor_bench_limits`, dropped and created
per run; SQLite in a temporary file; Citus mode in a database of that name on
every node of the cluster `--citus-url` names (see `bench/burndown.py`).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

import jobvisor
from jobvisor.queue.api import parse_url

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
DEFAULT_CITUS_URL = "postgresql://postgres@127.0.0.1:56001/postgres"
BENCH_DB = "jobvisor_bench_limits"
TICK = 0.01


@contextlib.contextmanager
def fresh_database(engine: str, pg_url: str, citus_url: str = "") -> Iterator[str]:
    if engine == "citus":
        sys.path.insert(0, str(ROOT))
        from tests.support.citus import create_database, drop_database  # noqa: PLC0415  (on the path just now)

        url, nodes = create_database(citus_url, BENCH_DB)
        try:
            yield url
        finally:
            drop_database([citus_url, *nodes], BENCH_DB)
        return
    if engine == "sqlite":
        with tempfile.TemporaryDirectory(prefix="jobvisor-limits-") as tmp:
            yield f"sqlite:///{Path(tmp) / 'bench.db'}"
        return
    with psycopg.connect(pg_url, autocommit=True) as conn:
        name = sql.Identifier(BENCH_DB)
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(name))
    base = pg_url.rsplit("/", 1)[0]
    yield f"{base}/{BENCH_DB}"


def rows(url: str, query: str) -> list[tuple[Any, ...]]:
    engine, target = parse_url(url)
    if engine == "postgres":
        with psycopg.connect(target) as conn:
            return conn.execute(query.encode()).fetchall()
    with contextlib.closing(sqlite3.connect(target)) as lite:
        return lite.execute(query).fetchall()


def epoch(value: Any) -> float:
    return value.timestamp() if isinstance(value, dt.datetime) else float(value)


class RunningWatch:
    """Samples, on a connection of its own, how many `capped` jobs are
    running (every 5 ms, until stopped): the most seen. Read from the rows'
    status, not from their times (each process stamps those with its own
    reading of the database's clock)."""

    QUERY = "SELECT count(*) FROM jobvisor_jobs WHERE status = 'running' AND job_type = 'capped'"

    def __init__(self, url: str) -> None:
        self.url, self.most = url, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        engine, target = parse_url(self.url)
        conn: Any = (
            psycopg.connect(target, autocommit=True)
            if engine == "postgres"
            else sqlite3.connect(target, isolation_level=None)
        )
        with contextlib.closing(conn):
            while not self._stop.wait(0.005):
                ((n,),) = conn.execute(self.QUERY).fetchall()
                self.most = max(self.most, int(n))

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.most


def offer(queue: jobvisor.Queue, rate: int, seconds: float, keys: int) -> int:
    """Enqueue `rate` jobs a second for `seconds`; how many were enqueued."""
    per_tick = max(2, round(rate * TICK))
    start = time.perf_counter()
    sent = 0
    tick = 0
    while time.perf_counter() - start < seconds:
        batch: list[dict[str, Any]] = []
        for i in range(per_tick):
            if i % 2:
                key = f"tenant:{random.randrange(keys)}"
                batch.append({"job_type": "per_tenant", "concurrency_key": key})
            else:
                batch.append({"job_type": "capped"})
        queue.enqueue_many(batch)
        sent += len(batch)
        tick += 1
        pause = start + tick * TICK - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
    return sent


def wait_done(url: str, count: int, deadline: float) -> None:
    while True:
        ((done,),) = rows(url, "SELECT count(*) FROM jobvisor_jobs WHERE status = 'completed'")
        if done >= count:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out: {done} of {count} jobs completed")
        time.sleep(0.1)


def one_run(engine: str, mode: str, args: argparse.Namespace) -> dict[str, float]:
    citus = engine == "citus"
    with fresh_database(engine, args.pg_url, args.citus_url) as url:
        queue = jobvisor.connect(url, citus=citus)
        queue.migrate()
        env = dict(os.environ, JOBVISOR_DATABASE_URL=url, JOBVISOR_APP=f"bench.limits_app:{mode}",
                   JOBVISOR_CONCURRENCY=str(args.concurrency), JOBVISOR_WORKERS=str(args.workers),
                   JOBVISOR_LOG_LEVEL="warning", JOBVISOR_HTTP_ADDR="",
                   JOBVISOR_CITUS="1" if citus else "0", PYTHONPATH=str(ROOT))  # fmt: skip
        proc = subprocess.Popen([str(Path(sys.executable).with_name("jobvisor")), "run"], env=env)
        try:
            # Warm up (workers connected and idle) on a queue of its own.
            queue.enqueue_many([{"job_type": "capped", "queue": "warm"}] * 8)
            wait_done(url, 8, time.monotonic() + 60)
            watch = RunningWatch(url)
            sent = offer(queue, args.rate, args.seconds, args.keys)
            wait_done(url, 8 + sent, time.monotonic() + 600)
            most = watch.stop()
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
            queue.close()
        ((first, last),) = rows(
            url,
            "SELECT min(created_at), max(finished_at) FROM jobvisor_jobs WHERE queue = 'default'",
        )
        found = rows(
            url,
            "SELECT started_at, finished_at FROM jobvisor_jobs"
            " WHERE job_type = 'capped' AND queue = 'default'",
        )
        held = statistics.mean(epoch(f) - epoch(s) for s, f in found)
        return {
            "jobs/s": sent / (epoch(last) - epoch(first)),
            "capped": most,
            "held ms": held * 1000,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=["postgres", "sqlite", "citus"], default="postgres")
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    parser.add_argument("--citus-url", default=DEFAULT_CITUS_URL)
    args = parser.parse_args()
    rates: dict[str, list[float]] = {"unlimited": [], "limited": []}
    for run in range(args.runs):  # the two sides alternate, so both see the same machine
        for mode, seen in rates.items():
            got = one_run(args.engine, mode, args)
            seen.append(got["jobs/s"])
            print(f"  run {run + 1} {mode}: {got['jobs/s']:,.0f} jobs/s, most running capped: "
                  f"{got['capped']:.0f}, a capped job running for {got['held ms']:.1f} ms "
                  "on average (claim to completion)", flush=True)  # fmt: skip
        ratio = rates["limited"][-1] / rates["unlimited"][-1]
        print(f"  run {run + 1} limited / unlimited: {ratio:.2f}", flush=True)
    medians = {mode: statistics.median(got) for mode, got in rates.items()}
    for mode, median in medians.items():
        print(f"{args.engine} {mode}: median {median:,.0f} jobs/s over {args.runs} run(s)")
    ratio = medians["limited"] / medians["unlimited"]
    print(f"limited / unlimited: {ratio:.2f} (offered {args.rate:,} jobs/s for {args.seconds:g}s)")


if __name__ == "__main__":
    main()
