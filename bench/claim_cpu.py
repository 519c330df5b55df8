"""Client CPU per job of claim + complete: what the queue API costs the
process that calls it, apart from the database's work and the wait for it.

    .venv/bin/python bench/claim_cpu.py [--jobs 20000] [--batch 100] [--runs 5]
        [--engine postgres] [--pg-url postgresql://postgres@127.0.0.1:5432/postgres]

One process enqueues `--jobs` jobs, then loops `claim(limit=--batch)` and
`complete_many` until the queue is empty; it prints the wall time per job
and `time.process_time()` per job (this process's CPU only). CPU time hardly
moves when other programs share the machine, where wall time does: it is the
figure to compare two versions of the API on a busy machine. Each figure is
the median of `--runs` runs. PostgreSQL runs in a database
`jobvisor_bench_claim_cpu` that the script drops and creates; SQLite in a
temporary file.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

import psycopg
from psycopg import sql

import jobvisor

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
BENCH_DB = "jobvisor_bench_claim_cpu"


def fresh_url(engine: str, admin_url: str, tmp: Path) -> str:
    if engine == "sqlite":
        path = tmp / "bench.db"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        return f"sqlite:///{path}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        name = sql.Identifier(BENCH_DB)
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(name))
    parts = urllib.parse.urlsplit(admin_url)
    return urllib.parse.urlunsplit(parts._replace(path="/" + BENCH_DB))


def one_run(url: str, jobs: int, batch: int) -> tuple[float, float]:
    """(wall µs, CPU µs) per job of claim + complete."""
    with jobvisor.connect(url, pool_size=1) as q:
        q.migrate()
        q.enqueue_many([{"job_type": "bench", "payload": {"n": n}} for n in range(jobs)])
        if url.startswith("postgresql"):
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("ANALYZE jobvisor_jobs")
        done = 0
        wall, cpu = time.perf_counter(), time.process_time()
        while claimed := q.claim("bench", limit=batch):
            done += len(claimed) - len(q.complete_many(claimed))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if done != jobs:
        raise SystemExit(f"completed {done} of {jobs} jobs")
    return wall / jobs * 1e6, cpu / jobs * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--engine", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    args = parser.parse_args(argv)
    walls, cpus = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.runs):
            url = fresh_url(args.engine, args.pg_url, Path(tmp))
            wall, cpu = one_run(url, args.jobs, args.batch)
            walls.append(wall)
            cpus.append(cpu)
    print(
        f"{args.engine}: claim + complete, batches of {args.batch}: "
        f"wall {statistics.median(walls):.1f} µs/job, CPU {statistics.median(cpus):.2f} µs/job "
        f"(median of {args.runs}; CPU runs: {', '.join(f'{c:.2f}' for c in cpus)})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
