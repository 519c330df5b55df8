"""Workflows under `jobvisor run`: burn-downs against plain jobs, and the
hand-over's latency from a last parent's completion to its child's start.

    .venv/bin/python bench/workflows.py [--engine postgres|sqlite|both]
        [--width 10000] [--flows 1000] [--handovers 200] [--runs 3] [--workers 2]
        [--concurrency 200] [--pg-url postgresql://postgres@127.0.0.1:5432/postgres]

Three measurements per engine, each on a fresh database and one `jobvisor
run` with `--workers` workers (`bench/workflows_app.py`'s `async def`
handlers):

- **fan**: one workflow, a root, `--width` children of it, one child of them
  all; against `--width + 2` plain jobs in one `enqueue_many`.
- **flows**: `--flows` workflows of 10 jobs each (a root, 8 children, one
  child of the 8); against as many plain jobs.

  For both, the queue is paused while the jobs go in, and the clock runs from
  `resume` until no job is pending, waiting or running. Jobs per second is
  the job count over that time; the ratio is workflow over plain. Each is
  burnt down `--runs` times, plain and workflow in turn (a burn-down of a
  second or less varies from one run to the next on a busy machine): the
  medians are printed.
- **hand-over** (first, on the fresh database): `--handovers` workflows of
  three parents and one child, one after the other on an idle service; each
  child's handler notes the time it started, held against the latest
  `finished_at` of its parents (the database's clock at their completion;
  the same machine's clock). p50 and p99 of those gaps.
"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

import jobvisor
from burndown import DEFAULT_PG_URL, fresh_database  # bench/, this script's directory
from jobvisor import JobStatus

DEADLINE = 900.0


def _service(url: str, args: argparse.Namespace) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBVISOR_")}
    env.update(JOBVISOR_DATABASE_URL=url, JOBVISOR_APP="workflows_app:registry",
               JOBVISOR_WORKERS=str(args.workers), JOBVISOR_CONCURRENCY=str(args.concurrency),
               JOBVISOR_LOG_LEVEL="warning", JOBVISOR_HTTP_ADDR="",
               JOBVISOR_SHUTDOWN_TIMEOUT="10",
               PYTHONPATH=str(Path(__file__).resolve().parent))  # fmt: skip
    return subprocess.Popen([str(Path(sys.executable).with_name("jobvisor")), "run"], env=env)


# "Is any job unfinished?" from the claim and lease indexes, one connection
# polled every 20 ms: `summary()` scans the table, which would cost the
# database under test more than the burn-down it watches.
UNFINISHED_SQL = (
    "SELECT EXISTS (SELECT 1 FROM jobvisor_jobs WHERE status IN ('pending', 'retryable'))"
    " OR EXISTS (SELECT 1 FROM jobvisor_jobs WHERE status IN ('running', 'waiting'))"
)


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


def _burn(queue: jobvisor.Queue, load: Any) -> float:
    """Pause, put the jobs in, resume: seconds from the resume until drained."""
    queue.pause("default")
    load()
    started = time.perf_counter()
    queue.resume("default")
    _drained(queue.url)
    return time.perf_counter() - started


def _fan(width: int) -> jobvisor.Workflow:
    wf = jobvisor.Workflow("fan")
    root = wf.add("noop")
    leaves = [wf.add("noop", after=[root]) for _ in range(width)]
    wf.after(*leaves).add("noop")
    return wf


def _flow(parents: int, child: str = "noop") -> jobvisor.Workflow:
    wf = jobvisor.Workflow("flow")
    root = wf.add("noop")
    middle = [wf.add("noop", after=[root]) for _ in range(parents)]
    wf.after(*middle).add(child)
    return wf


def _handovers(queue: jobvisor.Queue, count: int) -> list[float]:
    """Milliseconds from each child's last parent's completion to its start."""
    gaps = []
    for _ in range(count):
        wf = jobvisor.Workflow("hand-over")
        parents = [wf.add("noop") for _ in range(3)]
        wf.after(*parents).add("stamp")
        wid = queue.enqueue_workflow(wf)
        deadline = time.monotonic() + 60
        while not (status := queue.workflow(wid)).finished:
            if time.monotonic() > deadline:
                raise SystemExit(f"workflow {wid} did not finish")
            time.sleep(0.005)
        *done, child = status.jobs
        assert child.status is JobStatus.COMPLETED, status
        last = max(job.finished_at.timestamp() for job in done if job.finished_at)
        gaps.append((float(child.result) - last) * 1000)
    return gaps


def _rate(count: int, seconds: float) -> str:
    return f"{count:,} jobs in {seconds:.2f}s = {count / seconds:,.0f} jobs/s"


def _compare(queue: jobvisor.Queue, what: str, n: int, load: Any, runs: int) -> None:
    """Burn `n` plain jobs and the workflows `load` puts in, in turn, `runs`
    times each; print the median times and their ratio."""
    plain, flows = [], []
    for _ in range(runs):
        plain.append(_burn(queue, lambda: queue.enqueue_many([{"job_type": "noop"}] * n)))
        flows.append(_burn(queue, load))
    p, f = statistics.median(plain), statistics.median(flows)
    print(f"{queue.engine} {what}: {_rate(n, f)}; plain {_rate(n, p)}; ratio {p / f:.2f}"
          f" (medians of {runs})", flush=True)  # fmt: skip


def one_engine(engine: str, args: argparse.Namespace) -> None:
    with fresh_database(engine, args.pg_url) as url:
        queue = jobvisor.connect(url)
        queue.migrate()
        proc = _service(url, args)
        try:
            queue.enqueue_many([{"job_type": "noop"} for _ in range(args.workers * 4)])
            _drained(url)  # warm: every worker connected and idle
            # First, on the fresh table (as bench/latency.py): after the
            # burn-downs every claim would also read past the index entries
            # of the jobs they took until a vacuum removes them.
            gaps = sorted(_handovers(queue, args.handovers))
            p99 = gaps[min(len(gaps) - 1, int(len(gaps) * 0.99))]
            print(f"{engine} hand-over, last parent completed to child started, "
                  f"{len(gaps)} samples: p50 {statistics.median(gaps):.2f} ms, "
                  f"p99 {p99:.2f} ms", flush=True)  # fmt: skip
            fan = f"fan 1 -> {args.width:,} -> 1"
            _compare(queue, fan, args.width + 2,
                     lambda: queue.enqueue_workflow(_fan(args.width)), args.runs)  # fmt: skip

            def flows() -> None:
                for _ in range(args.flows):
                    queue.enqueue_workflow(_flow(8))

            _compare(queue, f"{args.flows:,} workflows of 10", args.flows * 10, flows, args.runs)
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
    parser.add_argument("--width", type=int, default=10_000)
    parser.add_argument("--flows", type=int, default=1_000)
    parser.add_argument("--handovers", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} at the start")
    for engine in ["postgres", "sqlite"] if args.engine == "both" else [args.engine]:
        one_engine(engine, args)
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} at the end")


if __name__ == "__main__":
    main()
