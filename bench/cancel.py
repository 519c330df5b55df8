"""Cancel-to-stop: from `cancel` returning to the running handler getting
`CancelledError`, on PostgreSQL (the worker hears a notice).

    .venv/bin/python bench/cancel.py [--jobs 200] [--pg-url postgresql://…/postgres]

One worker process (`python -m jobvisor.worker`, app `bench.cancel_app`,
concurrency = `--jobs`) runs `--jobs` handlers that each await a long sleep.
Once all are running, the bench cancels them one at a time, with a short
random pause between two, and each handler writes the time the cancel
reached it back over a pipe. Two figures: from the call of `cancel` (its own
commit included) and from its return. Prints p50, p90, p99 and max in
milliseconds, then checks that every job ended `cancelled`.

Runs in a database named `jobvisor_bench_cancel`, dropped and created.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import time
import uuid

import jobvisor
from latency import (
    DEFAULT_PG_URL,
    ROOT,
    fresh_database,
    print_summary,
)  # bench/, this script's directory

BENCH_DB = "jobvisor_bench_cancel"


def _wait_all_running(queue: jobvisor.Queue, count: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        running = queue.summary().count(jobvisor.JobStatus.RUNNING)
        if running >= count:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"only {running} of {count} jobs running after {timeout:g}s")
        time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    args = parser.parse_args()
    url = fresh_database(args.pg_url, BENCH_DB)
    queue = jobvisor.connect(url)
    queue.migrate()
    read_fd, write_fd = os.pipe()
    env = dict(
        os.environ,
        JOBVISOR_DATABASE_URL=url,
        JOBVISOR_APP="bench.cancel_app:registry",
        JOBVISOR_LOG_LEVEL="warning",
        JOBVISOR_CONCURRENCY=str(args.jobs),
        JOBVISOR_LEASE="60",
        CANCEL_FD=str(write_fd),
        PYTHONPATH=str(ROOT),
    )
    worker = subprocess.Popen(
        [sys.executable, "-m", "jobvisor.worker"], env=env, cwd=ROOT, pass_fds=(write_fd,)
    )
    os.close(write_fd)
    from_call: list[float] = []
    from_return: list[float] = []
    reader = os.fdopen(read_fd, "r")
    try:
        ids = queue.enqueue_many([{"job_type": "wait"}] * args.jobs)
        _wait_all_running(queue, args.jobs)
        for job_id in ids:
            time.sleep(random.uniform(0.005, 0.02))
            called = time.time()
            queue.cancel(job_id)
            returned = time.time()
            seen, stopped = reader.readline().split()
            assert uuid.UUID(seen) == job_id, (seen, job_id)
            from_call.append((float(stopped) - called) * 1000)
            from_return.append((float(stopped) - returned) * 1000)
        deadline = time.monotonic() + 60
        while queue.summary().count(jobvisor.JobStatus.CANCELLED) < args.jobs:
            if time.monotonic() > deadline:
                raise SystemExit("not every job ended cancelled within 60 s")
            time.sleep(0.1)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(30)
        reader.close()
        queue.close()
    print_summary("cancel call -> handler stopped", from_call)
    print_summary("cancel return -> handler stopped", from_return)
    print(f"all {args.jobs} jobs ended cancelled")


if __name__ == "__main__":
    main()
