"""Wait latency: how soon `await aq.wait(id)` returns after the completion
commits, on PostgreSQL (woken by the completion's notice) and SQLite (polling).

    .venv/bin/python bench/wait_latency.py [--engine postgres|sqlite|both] [--jobs 200]
        [--pg-url postgresql://postgres@127.0.0.1:5432/postgres]

One waiter per job, each waiting before its job completes; the completion is
`complete` from a second queue in the same process, and the clock runs from
its return (the commit) until the waiter has the job. PostgreSQL runs in a
database named `jobvisor_bench_wait`, dropped and created per run; SQLite in a
temporary file.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import psycopg
from psycopg import sql

import jobvisor

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
DB_NAME = "jobvisor_bench_wait"


def _pg_database(admin_url: str) -> str:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(DB_NAME))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DB_NAME)))
    return admin_url.rsplit("/", 1)[0] + "/" + DB_NAME


async def measure(url: str, jobs: int) -> list[float]:
    with jobvisor.connect(url) as q:
        q.migrate()
    latencies: list[float] = []
    async with jobvisor.connect_async(url) as waiter, jobvisor.connect_async(url) as doer:
        for _ in range(jobs):
            jid = await doer.enqueue("bench")
            (job,) = await doer.claim("bench-worker")
            got = asyncio.get_running_loop().create_future()

            async def wait(job_id: object = jid, fut: asyncio.Future[float] = got) -> None:
                await waiter.wait(job_id, timeout=30)  # type: ignore[arg-type]
                fut.set_result(time.perf_counter())

            task = asyncio.create_task(wait())
            await asyncio.sleep(0.02)  # the waiter is waiting
            await doer.complete(job)
            committed = time.perf_counter()
            latencies.append(await got - committed)
            await task
    return latencies


def report(engine: str, latencies: list[float]) -> None:
    ms = sorted(x * 1000 for x in latencies)
    p50 = statistics.median(ms)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    print(f"{engine}: {len(ms)} waits, p50 {p50:.2f} ms, p99 {p99:.2f} ms after the commit")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=["postgres", "sqlite", "both"], default="both")
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    args = parser.parse_args()
    if args.engine in ("postgres", "both"):
        report("postgres", asyncio.run(measure(_pg_database(args.pg_url), args.jobs)))
    if args.engine in ("sqlite", "both"):
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{Path(tmp) / 'wait.db'}"
            report("sqlite", asyncio.run(measure(url, args.jobs)))


if __name__ == "__main__":
    main()
