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
import os
import statistics
import time
from typing import Any

import jobvisor
from burndown import DEFAULT_PG_URL, fresh_database  # bench/, this script's directory
from harness import burn, drained, p99, rate, start_service, stop_service
from jobvisor import JobContext, JobStatus
from jobvisor.durable import Durable
from jobvisor.queue import internal

ENDED = {JobStatus.COMPLETED, JobStatus.DEAD, JobStatus.CANCELLED}


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


def one_engine(engine: str, args: argparse.Namespace) -> None:
    with fresh_database(engine, args.pg_url) as url:
        queue = jobvisor.connect(url)
        queue.migrate()
        print(f"{engine} overhead: {asyncio.run(_overhead(url, args.calls))}", flush=True)
        proc = start_service(
            url,
            "steps_app:registry",
            workers=args.workers,
            concurrency=args.concurrency,
            pool_size=args.pool_size,
        )
        try:
            queue.enqueue_many([{"job_type": "noop"} for _ in range(args.workers * 4)])
            drained(url)  # warm: every worker connected and idle
            plain = burn(queue, lambda: queue.enqueue_many([{"job_type": "noop"}] * args.jobs))
            steps = burn(
                queue, lambda: queue.enqueue_many([{"job_type": "three_steps"}] * args.jobs)
            )
            print(f"{engine} burn-down, 3 steps a job: {rate(args.jobs, steps)}; plain "
                  f"{rate(args.jobs, plain)}; ratio {plain / steps:.2f}", flush=True)  # fmt: skip
            gaps = sorted(_resumes(queue, args.signals))
            print(f"{engine} signal to resume, {len(gaps)} samples: p50 "
                  f"{statistics.median(gaps):.2f} ms, p99 {p99(gaps):.2f} ms",
                  flush=True)  # fmt: skip
        finally:
            stop_service(proc)
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
