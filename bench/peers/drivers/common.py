"""What every peer driver shares: the command line, worker processes, the
burn-down poll and the latency loop.

A driver runs inside its peer's own environment (so only the standard library
and psycopg are assumed here) and prints one JSON object on its last line:
the workload's figures, or {"unavailable": reason}.

Latency is measured the same way for every peer: the no-op handler appends
"<n> <wall-clock seconds>" to the file named by $PEER_LATENCY_FILE when it
starts, and the driver compares that with the time just before it enqueued
job n. Driver and workers share the host, so they share the clock.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

import psycopg

HERE = os.path.dirname(os.path.abspath(__file__))
LATENCY_ENV = "PEER_LATENCY_FILE"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("workload", choices=["burndown", "latency", "bulk", "version"])
    p.add_argument("--dsn", required=True)
    p.add_argument("--jobs", type=int, default=20_000)
    p.add_argument("--samples", type=int, default=200)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--concurrency", type=int, default=20)
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--log-dir", default=tempfile.gettempdir())
    return p.parse_args(argv)


def emit(result: dict[str, Any]) -> None:
    print(json.dumps(result), flush=True)


def record_start(n: int) -> None:
    """Called by a no-op handler: note when job n started, if latency is measured."""
    path = os.environ.get(LATENCY_ENV)
    if path:
        line = f"{n} {time.time()!r}\n".encode()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


class Workers:
    """Worker processes of one peer, each in its own process group."""

    def __init__(self, commands: list[list[str]], *, env: dict[str, str], log_dir: str,
                 name: str) -> None:  # fmt: skip
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs = []
        full_env = {**os.environ, **env}
        full_env["PYTHONPATH"] = HERE + os.pathsep + full_env.get("PYTHONPATH", "")
        for i, cmd in enumerate(commands):
            log = open(os.path.join(log_dir, f"{name}-worker{i}.log"), "ab")  # noqa: SIM115
            self.logs.append(log)
            self.procs.append(subprocess.Popen(
                cmd, env=full_env, stdout=log, stderr=subprocess.STDOUT, cwd=HERE,
                start_new_session=True,
            ))  # fmt: skip

    def check_alive(self) -> None:
        for proc in self.procs:
            if proc.poll() is not None:
                raise RuntimeError(f"worker {proc.args!r} exited with {proc.returncode}")

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for proc in self.procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        for log in self.logs:
            log.close()

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def count(dsn: str, sql: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(sql).fetchone()  # type: ignore[arg-type]
        return int(row[0]) if row else 0


CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_stat(pid: str) -> tuple[str, int, float] | None:
    """(command name, parent pid, user + system CPU seconds) of a live
    process, from /proc/<pid>/stat."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode()
    except OSError:
        return None
    comm = stat[stat.index("(") + 1 : stat.rindex(")")]
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
    return comm, int(fields[1]), (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def cpu_split(workers: Workers) -> dict[str, float] | None:
    """CPU seconds used so far by the database server (every process named
    `postgres`) and by the peer's processes (the ones `workers` started and
    all their descendants); None where /proc is not there. Differences over the
    burn-down give each side's CPU per job."""
    if not os.path.isdir("/proc"):
        return None
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    database = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        got = _proc_stat(entry)
        if got is None:
            continue
        comm, parents[int(entry)], cpu[int(entry)] = got
        if comm == "postgres":
            database += cpu[int(entry)]
    roots = {proc.pid for proc in workers.procs}

    def in_peer(pid: int) -> bool:
        for _ in range(64):  # walk up to init; deep enough for any peer
            if pid in roots:
                return True
            if pid not in parents or pid <= 1:
                return False
            pid = parents[pid]
        return False

    peer = sum(seconds for pid, seconds in cpu.items() if in_peer(pid))
    return {"database": database, "workers": peer}


def burn_down(dsn: str, remaining_sql: str, jobs: int, workers: Workers, *,
              timeout: float) -> dict[str, Any]:  # fmt: skip
    """Poll until no job is left; the rate counts from the first job done
    (worker start-up excluded, reported separately). Also the CPU time the
    database and the workers spent per job over that span (Linux)."""
    spawned = time.monotonic()
    first_done: float | None = None
    cpu_at_first: dict[str, float] | None = None
    left_at_first = jobs
    deadline = spawned + timeout
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            row = conn.execute(remaining_sql).fetchone()  # type: ignore[arg-type]
            left = int(row[0]) if row else 0
            now = time.monotonic()
            if first_done is None and left < jobs:
                first_done = now
                cpu_at_first = cpu_split(workers)
                left_at_first = left
            if left == 0:
                break
            if now > deadline:
                raise RuntimeError(f"burn-down timed out with {left} of {jobs} jobs left")
            workers.check_alive()
            time.sleep(0.02)
    done = time.monotonic()
    cpu_at_done = cpu_split(workers)
    assert first_done is not None
    result: dict[str, Any] = {
        "jobs": jobs,
        "seconds": done - first_done,
        "seconds_from_spawn": done - spawned,
        "jobs_per_s": jobs / max(done - first_done, 1e-9),
    }
    if cpu_at_first is not None and cpu_at_done is not None and left_at_first > 0:
        # CPU microseconds per job over the jobs finished in the timed span.
        for side in ("database", "workers"):
            spent = cpu_at_done[side] - cpu_at_first[side]
            result[f"{side}_cpu_us_per_job"] = spent / left_at_first * 1e6
    return result


def latency(enqueue: Callable[[int], None], workers: Workers, path: str, samples: int, *,
            timeout: float = 60.0, gap: float = 0.03) -> dict[str, Any]:  # fmt: skip
    """Enqueue one job at a time on idle workers and time enqueue-to-start."""
    seen: dict[int, float] = {}
    offset = 0

    def wait_for(n: int) -> float:
        nonlocal offset
        deadline = time.monotonic() + timeout
        while n not in seen:
            with open(path, "rb") as f:
                f.seek(offset)
                chunk = f.read()
            complete = chunk[: chunk.rfind(b"\n") + 1]
            offset += len(complete)
            for line in complete.decode().splitlines():
                job, started = line.split()
                seen[int(job)] = float(started)
            if n in seen:
                break
            if time.monotonic() > deadline:
                workers.check_alive()
                raise RuntimeError(f"job {n} did not start within {timeout}s")
            time.sleep(0.0005)
        return seen[n]

    open(path, "wb").close()
    # Warm up: connections open, LISTEN set, code paths hot.
    for n in range(-5, 0):
        enqueue(n)
        wait_for(n)
    time.sleep(1.0)
    got = []
    for n in range(samples):
        t0 = time.time()
        enqueue(n)
        got.append((wait_for(n) - t0) * 1000.0)
        time.sleep(gap)
    got.sort()
    return {
        "samples": samples,
        "p50_ms": statistics.median(got),
        "p99_ms": got[min(len(got) - 1, round(0.99 * (len(got) - 1)))],
        "max_ms": got[-1],
    }


def run_workload(
    args: argparse.Namespace,
    *,
    name: str,
    enqueue_all: Callable[[], Any],
    enqueue_one: Callable[[int], Any],
    workers: Callable[[argparse.Namespace, dict[str, str]], Workers],
    remaining_sql: str,
) -> None:
    """Measure `args.workload` the same way for every peer: `bulk` times
    `enqueue_all`; `burndown` enqueues them all, then starts the workers and
    waits for `remaining_sql` to reach zero; `latency` starts idle workers and
    enqueues jobs one at a time with `enqueue_one`."""
    if args.workload == "bulk":
        emit(bulk_result(args.jobs, timed(enqueue_all)))
    elif args.workload == "burndown":
        enqueue_all()
        with workers(args, {}) as w:
            emit(burn_down(args.dsn, remaining_sql, args.jobs, w, timeout=args.timeout))
    else:
        path = os.path.join(args.log_dir, f"{name}-latency.txt")
        with workers(args, {LATENCY_ENV: path}) as w:
            emit(latency(enqueue_one, w, path, args.samples))


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.monotonic()
    fn()
    return time.monotonic() - t0


def bulk_result(jobs: int, seconds: float) -> dict[str, Any]:
    return {"jobs": jobs, "seconds": seconds, "jobs_per_s": jobs / max(seconds, 1e-9)}


def fail(reason: str) -> None:
    emit({"unavailable": reason})
    sys.exit(0)
