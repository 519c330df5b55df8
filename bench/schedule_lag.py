"""Schedule lag: from a tick to its job's insert, with the default maintenance settings.

    .venv/bin/python bench/schedule_lag.py [--engine postgres|sqlite] [--seconds 60]
        [--pg-url postgresql://postgres@127.0.0.1:5432/postgres]

Starts `jobvisor run` (one worker) with `bench/schedule_app.py`, whose only
schedule ticks every second, lets it run `--seconds`, stops it, and reads
every scheduled job's tick (its meta) and insert time (`created_at`, the
database's clock): the lag is their difference. Prints the count, p50, p99
and max. PostgreSQL runs in a database `jobvisor_bench_schedule`, dropped and
created per run; SQLite in a temporary file.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
DB = "jobvisor_bench_schedule"


def _pg_database(admin_url: str) -> str:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB}")
    return admin_url.rsplit("/", 1)[0] + "/" + DB


def _rows(url: str) -> list[tuple[Any, Any]]:
    query = "SELECT meta, created_at FROM jobvisor_jobs"
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url[len("sqlite:///") :])
        try:
            return conn.execute(query).fetchall()
        finally:
            conn.close()
    with psycopg.connect(url) as pg:
        return pg.execute(query).fetchall()


def lags(url: str) -> list[float]:
    out = []
    for meta, created in _rows(url):
        value = json.loads(meta) if isinstance(meta, str) else meta
        if not value or "tick" not in value:
            continue
        tick = dt.datetime.fromisoformat(value["tick"])
        at = (
            created
            if isinstance(created, dt.datetime)
            else dt.datetime.fromtimestamp(created, dt.UTC)
        )
        out.append((at - tick).total_seconds())
    return out


def run(url: str, seconds: float) -> list[float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBVISOR_")}
    env.update(
        JOBVISOR_DATABASE_URL=url,
        JOBVISOR_APP="bench.schedule_app:registry",
        JOBVISOR_WORKERS="1",
        JOBVISOR_HTTP_ADDR="",
        PYTHONPATH=str(ROOT),
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "jobvisor.cli", "run"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(seconds)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    return lags(url)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = _pg_database(args.pg_url) if args.engine == "postgres" else f"sqlite:///{tmp}/s.db"
        got = sorted(run(url, args.seconds))
    if len(got) < 2:
        sys.exit(f"only {len(got)} ticks enqueued")
    p99 = statistics.quantiles(got, n=100)[98]
    print(
        f"{args.engine}: {len(got)} ticks, lag p50 {statistics.median(got) * 1000:.0f} ms, "
        f"p99 {p99 * 1000:.0f} ms, max {got[-1] * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
