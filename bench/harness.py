"""What the service burn-down benchmarks share (`steps.py`, `workflows.py`):
a `jobvisor run` of a bench app, the wait until no job is left unfinished,
a burn-down timed from `resume`, and how a rate and a percentile are printed.

Run from `bench/` (each script's own directory is on `sys.path`)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psycopg

import jobvisor

# "Is any job unfinished?" from the claim and lease indexes, one connection
# polled every 20 ms: `summary()` scans the table, which would cost the
# database under test more than the burn-down it watches.
UNFINISHED_SQL = (
    "SELECT EXISTS (SELECT 1 FROM jobvisor_jobs WHERE status IN ('pending', 'retryable'))"
    " OR EXISTS (SELECT 1 FROM jobvisor_jobs WHERE status IN ('running', 'waiting'))"
)


def start_service(
    url: str, app: str, *, workers: int, concurrency: int, pool_size: int = 0
) -> subprocess.Popen[bytes]:
    """`jobvisor run` of `app` ("module:registry" in bench/) on `url`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBVISOR_")}
    env.update(JOBVISOR_DATABASE_URL=url, JOBVISOR_APP=app,
               JOBVISOR_WORKERS=str(workers), JOBVISOR_CONCURRENCY=str(concurrency),
               JOBVISOR_LOG_LEVEL="warning", JOBVISOR_HTTP_ADDR="",
               JOBVISOR_SHUTDOWN_TIMEOUT="10",
               PYTHONPATH=str(Path(__file__).resolve().parent))  # fmt: skip
    if pool_size:
        env["JOBVISOR_POOL_SIZE"] = str(pool_size)
    return subprocess.Popen([str(Path(sys.executable).with_name("jobvisor")), "run"], env=env)


def stop_service(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, and SIGKILL if it has not stopped within 30 s."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()


def drained(url: str, deadline: float = 900.0) -> None:
    """Return once no job is pending, retryable, running or waiting."""
    probe: Any = (
        sqlite3.connect(url.removeprefix("sqlite:///"), timeout=30)
        if url.startswith("sqlite")
        else psycopg.connect(url, autocommit=True)
    )
    give_up = time.monotonic() + deadline
    try:
        while probe.execute(UNFINISHED_SQL).fetchone()[0]:
            if time.monotonic() > give_up:
                raise SystemExit("timed out waiting for the burn-down")
            time.sleep(0.02)
    finally:
        probe.close()


def burn(queue: jobvisor.Queue, load: Callable[[], object]) -> float:
    """Pause, `load()` the jobs, resume: seconds from the resume until drained."""
    queue.pause("default")
    load()
    started = time.perf_counter()
    queue.resume("default")
    drained(queue.url)
    return time.perf_counter() - started


def rate(count: int, seconds: float) -> str:
    return f"{count:,} jobs in {seconds:.2f}s = {count / seconds:,.0f} jobs/s"


def p99(values: Sequence[float]) -> float:
    """The 99th percentile of sorted `values` (nearest rank below)."""
    return values[min(len(values) - 1, int(len(values) * 0.99))]
