"""Durable steps: what a step costs in a handler, a burn-down of jobs with
steps against plain ones, and how soon a job parked in `wait_signal` resumes
after `signal`.

    .venv/bin/python bench/steps.py [--engine postgres|sqlite|both]
        [--calls 2000] [--jobs 5000] [--signals 200] [--workers 2]
        [--concurrency 200] [--pool-size N] [--pg-url postgresql://postgres@127.0.0.1:5432/postgres]

Three measurements per engine, each on a fresh database (PostgreSQL: one
named `jobvisor_bench_steps`, dropped and created per run; SQLite: a
temporary file):

- **overhead**: in this process, one claimed job and one attempt's
  `JobContext` on an `AsyncQueue` set up as a worker's
  (`synchronous_commit=False`); `--calls` calls of `await job.step(name,
  f)` with a no-op `f` (each records its row, fenced by the claim token),
  against as many bare calls of `f`. Steps per second and microseconds per
  call above the bare call; then a later attempt passes the same `--calls`
  completed steps (the log read once, each step's result handed back).
- **burn-down**: `jobvisor run` (`--workers` workers, `--concurrency`)
  empties a paused queue of `--jobs` jobs of three no-op steps each
  (`bench/steps_app.py`'s `three_steps`), against as many plain no-op jobs;
  the clock runs from `resume` until nothing is pending or running. Jobs per
  second and the ratio (steps over plain).
- **signal**: `--signals` jobs, one at a time on the idle service, each
  parked in `wait_signal("go")`; `signal(id, "go")` from this process, and
  the handler's timestamp once the wait returned (its result) held against
  the time `signal` was called. p50 and p99.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

import jobvisor
from jobvisor import JobContext, JobStatus
from jobvisor.durable import Durable
from jobvisor.queue import internal

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
BENCH_DB = "jobvisor_bench_steps"
DEADLINE = 600.0
ENDED = {JobStatus.COMPLETED, JobStatus.DEAD, JobStatus.CANCELLED}
UNFINISHED_SQL = (
    "SELECT EXISTS (SELECT 1 FROM jobvisor_jobs WHERE status IN ('pending', 'retryable'))"
    " OR EXISTS (SELECT 1 FROM jobvisor_jobs WHERE status = 'running')"
)


@contextlib.contextmanager
def fresh_database(engine: str, pg_url: str) -> Iterator[str]:
    if engine == "sqlite":
        with tempfile.TemporaryDirectory(prefix="jobvisor-steps-") as tmp:
            yield f"sqlite:///{Path(tmp) / 'bench.db'}"
        return
    with psycopg.connect(pg_url, autocommit=True) as conn:
        drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
        conn.execute(drop.format(sql.Identifier(BENCH_DB)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(BENCH_DB)))
    yield pg_url.rsplit("/", 1)[0] + "/" + BENCH_DB


def nothing() -> None:
    """The step's function: the bare call's cost is the baseline."""


async def _overhead(url: str, calls: int) -> str:
    # As a worker's queue: its commits do not wait for their WAL flush.
    async with jobvisor.connect_async(url, synchronous_commit=False) as q:
        await q.enqueue("bench")
        (job,) = await q.claim("bench-worker")
        svc = internal.service_ops(q)
        loop = asyncio.get_running_loop()
        started = time.perf_counter()
        for _ in range(calls):
            nothing()
        bare = (time.perf_counter() - started) / calls
        first = JobContext(job, "w", durable=Durable(job, svc, loop, q.max_result_bytes))
        started = time.perf_counter()
        for _ in range(calls):
            await first.step("s", nothing)
        ran = (time.perf_counter() - started) / calls
        later = JobContext(job, "w", durable=Durable(job, svc, loop, q.max_result_bytes))
        started = time.perf_counter()
        for _ in range(calls):
            await later.step("s", nothing)
        passed = (time.perf_counter() - started) / calls
        await q.complete(job)
    return (
        f"{calls:,} steps in one handler: {1 / ran:,.0f} steps/s, {(ran - bare) * 1e6:,.0f} µs"
        f" per call above a bare call ({bare * 1e6:.2f} µs); a later attempt passes them at"
        f" {(passed - bare) * 1e6:,.1f} µs each"
    )


def _service(url: str, args: argparse.Namespace) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBVISOR_")}
    env.update(JOBVISOR_DATABASE_URL=url, JOBVISOR_APP="steps_app:registry",
               JOBVISOR_WORKERS=str(args.workers), JOBVISOR_CONCURRENCY=str(args.concurrency),
               JOBVISOR_LOG_LEVEL="warning", JOBVISOR_HTTP_ADDR="",
               JOBVISOR_SHUTDOWN_TIMEOUT="10",
               PYTHONPATH=str(Path(__file__).resolve().parent))  # fmt: skip
    if args.pool_size:
        env["JOBVISOR_POOL_SIZE"] = str(args.pool_size)
    return subprocess.Popen([str(Path(sys.executable).with_name("jobvisor")), "run"], env=env)


def _drained(url: str) -> None:
    probe: Any = (
        sqlite3.connect(url.removeprefix("sqlite:///"), timeout=30)
        if url.startswith("sqlite")
        else psycopg.connect(url, autocommit=True)
    )
    deadline = time.monotonic() + DEADLINE
    try:
        while probe.execute(UNFINISHED_SQL).fetchone()[0]:
            if time.monotonic() > deadline:
                raise SystemExit("timed out waiting for the burn-down")
            time.sleep(0.02)
    finally:
        probe.close()


def _burn(queue: jobvisor.Queue, job_type: str, count: int) -> float:
    """Pause, put the jobs in, resume: seconds from the resume until drained."""
    queue.pause("default")
    queue.enqueue_many([{"job_type": job_type}] * count)
    started = time.perf_counter()
    queue.resume("default")
    _drained(queue.url)
    return time.perf_counter() - started


def _until(what: str, done: Any) -> None:
    deadline = time.monotonic() + 60
    while not done():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.002)


def _parked(queue: jobvisor.Queue, job_id: Any) -> bool:
    if queue.get(job_id).status is not JobStatus.PENDING:
        return False
    return any(s.status == "waiting" for s in internal.service_ops(queue).step_log(job_id))


def _resumes(queue: jobvisor.Queue, count: int) -> list[float]:
    """Milliseconds from each `signal` call to its handler's wait returning."""
    gaps = []
    for _ in range(count):
        job_id = queue.enqueue("resume_stamp")
        _until("the job to park", lambda: _parked(queue, job_id))  # noqa: B023
        sent = time.time()
        queue.signal(job_id, "go")
        _until("the job to end", lambda: queue.get(job_id).status in ENDED)  # noqa: B023
        done = queue.get(job_id)
        assert done.status is JobStatus.COMPLETED, done.last_error
        gaps.append((float(done.result) - sent) * 1000)
    return gaps


def _rate(count: int, seconds: float) -> str:
    return f"{count:,} jobs in {seconds:.2f}s = {count / seconds:,.0f} jobs/s"


def one_engine(engine: str, args: argparse.Namespace) -> None:
    with fresh_database(engine, args.pg_url) as url:
        queue = jobvisor.connect(url)
        queue.migrate()
        print(f"{engine} overhead: {asyncio.run(_overhead(url, args.calls))}", flush=True)
        proc = _service(url, args)
        try:
            queue.enqueue_many([{"job_type": "noop"} for _ in range(args.workers * 4)])
            _drained(url)  # warm: every worker connected and idle
            plain = _burn(queue, "noop", args.jobs)
            steps = _burn(queue, "three_steps", args.jobs)
            print(f"{engine} burn-down, 3 steps a job: {_rate(args.jobs, steps)}; plain "
                  f"{_rate(args.jobs, plain)}; ratio {plain / steps:.2f}", flush=True)  # fmt: skip
            gaps = sorted(_resumes(queue, args.signals))
            p99 = gaps[min(len(gaps) - 1, int(len(gaps) * 0.99))]
            print(f"{engine} signal to resume, {len(gaps)} samples: p50 "
                  f"{statistics.median(gaps):.2f} ms, p99 {p99:.2f} ms", flush=True)  # fmt: skip
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
            queue.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=["postgres", "sqlite", "both"], default="both")
    parser.add_argument("--calls", type=int, default=2_000)
    parser.add_argument("--jobs", type=int, default=5_000)
    parser.add_argument("--signals", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--pool-size", type=int, default=0, help="0: the service's default")
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} at the start")
    for engine in ["postgres", "sqlite"] if args.engine == "both" else [args.engine]:
        one_engine(engine, args)
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} at the end")


if __name__ == "__main__":
    main()
