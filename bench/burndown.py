"""Burn-down: how fast real worker processes empty a queue of no-op jobs.

    .venv/bin/python bench/burndown.py [--engine postgres|sqlite|citus|both] [--jobs 50000]
        [--workers 2] [--concurrency 200|default] [--sleep-ms 0] [--via workers|run] [--runs 1]
        [--pg-url postgresql://postgres@127.0.0.1:5432/postgres]
        [--bouncer-url postgresql://postgres@127.0.0.1:6432/postgres [--poll]]
        [--citus-url postgresql://postgres@127.0.0.1:56001/postgres] [--citus-nodes N]

The workers start on an empty queue and run one warm-up job each way (so
they are connected and idle); then `enqueue_many` writes `--jobs` jobs of
`bench/burndown_app.py`'s `noop` type (with `--sleep-ms`, its `sleep` type,
which awaits that long: a job waiting on a network call) in one
transaction, and the clock runs from its commit until every job is
`completed`. Jobs per second is `--jobs` divided by that time. Resident
memory of each process is read at the end. `--concurrency default` leaves
`JOBVISOR_CONCURRENCY` unset: the service's own default (`auto`, which for
this app of `async def` handlers is 200).

`--via workers` starts `python -m jobvisor.worker` processes directly;
`--via run` starts `jobvisor run` (the supervisor) with `--workers` workers.

PostgreSQL runs in a database named `jobvisor_bench_burndown`, dropped and
created per run (`--pg-url` names the server's maintenance database); SQLite in
a temporary file per run.

`--engine citus` runs in Citus mode (`JOBVISOR_CITUS=1`) on the cluster whose
coordinator `--citus-url` names (../shared/citus/cluster.sh starts one): a
database of the same name on every node, the jobs table spread over them
(over the first `--citus-nodes` worker nodes only, when given).

`--bouncer-url` names a PgBouncer in `pool_mode=transaction` in front of that
server: the workers and the enqueue then go through it with
`JOBVISOR_PGBOUNCER=1`, the workers LISTENing on the server directly
(`JOBVISOR_LISTEN_URL`), or polling with `--poll`.
"""

from __future__ import annotations

import argparse
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

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
BENCH_DB = "jobvisor_bench_burndown"
DEADLINE = 600.0


def _with_dbname(url: str, dbname: str) -> str:
    base, _, query = url.partition("?")
    scheme, _, rest = base.partition("://")
    authority = rest.split("/", 1)[0]
    return f"{scheme}://{authority}/{dbname}" + (f"?{query}" if query else "")


@contextlib.contextmanager
def fresh_database(
    engine: str, pg_url: str, citus_url: str = "", citus_nodes: int | None = None
) -> Iterator[str]:
    if engine == "citus":
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from tests.support.citus import create_database, drop_database  # noqa: PLC0415  (on the path just now)

        url, nodes = create_database(citus_url, BENCH_DB, workers=citus_nodes)
        try:
            yield url
        finally:
            drop_database([citus_url, *nodes], BENCH_DB)
        return
    if engine == "sqlite":
        with tempfile.TemporaryDirectory(prefix="jobvisor-burndown-") as tmp:
            yield f"sqlite:///{Path(tmp) / 'bench.db'}"
        return
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(BENCH_DB))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(BENCH_DB)))
    yield _with_dbname(pg_url, BENCH_DB)


def rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def children_of(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


# "Is any job unfinished?" answered from the claim and lease indexes, so the
# wait does not scan the table: polling `summary()` (two full scans of every
# row) every few milliseconds took most of a core from the database under test.
UNFINISHED_SQL = (
    "SELECT EXISTS (SELECT 1 FROM jobvisor_jobs WHERE status IN ('pending', 'retryable'))"
    " OR EXISTS (SELECT 1 FROM jobvisor_jobs WHERE status = 'running')"
)


def wait_completed(
    queue: jobvisor.Queue, count: int, deadline: float, url: str | None = None
) -> None:
    """Wait until no job is pending, retryable or running (one connection to
    `url`, the queue's by default, polled every 20 ms), then check that
    `count` jobs are completed."""
    url = url or queue.url
    probe: Any = (
        sqlite3.connect(url.removeprefix("sqlite:///"), timeout=30)
        if url.startswith("sqlite")
        else psycopg.connect(url, autocommit=True)
    )
    try:
        while probe.execute(UNFINISHED_SQL).fetchone()[0]:
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out waiting for {count} jobs")
            time.sleep(0.02)
    finally:
        probe.close()
    done = queue.summary().count("completed")
    if done < count:
        raise SystemExit(f"only {done} of {count} jobs completed")


def _bounced(url: str, args: argparse.Namespace) -> tuple[str, dict[str, str]]:
    """The URL the workers use, and their PgBouncer settings (none without one)."""
    if not args.bouncer_url or not url.startswith("postgres"):
        return url, {}
    bounced = _with_dbname(args.bouncer_url, BENCH_DB)
    return bounced, {"JOBVISOR_PGBOUNCER": "1", "JOBVISOR_LISTEN_URL": "" if args.poll else url}


def one_run(engine: str, args: argparse.Namespace) -> tuple[float, dict[str, int]]:
    with fresh_database(engine, args.pg_url, args.citus_url, args.citus_nodes) as direct:
        url, bouncer = _bounced(direct, args)
        citus = engine == "citus"
        queue = jobvisor.connect(url, pgbouncer=bool(bouncer), citus=citus)
        queue.migrate()
        if citus:
            bouncer["JOBVISOR_CITUS"] = "1"
        env = {k: v for k, v in os.environ.items() if k != "JOBVISOR_CONCURRENCY"}
        env.update(JOBVISOR_DATABASE_URL=url, JOBVISOR_APP="burndown_app:registry",
                   JOBVISOR_WORKERS=str(args.workers),
                   JOBVISOR_LOG_LEVEL="warning", JOBVISOR_LOG_FORMAT="json",
                   JOBVISOR_HTTP_ADDR="", JOBVISOR_SHUTDOWN_TIMEOUT="10",
                   PYTHONPATH=str(Path(__file__).resolve().parent), **bouncer)  # fmt: skip
        if args.concurrency != "default":
            env["JOBVISOR_CONCURRENCY"] = args.concurrency
        if args.via == "run":
            cmd = [str(Path(sys.executable).with_name("jobvisor")), "run"]
            procs = [subprocess.Popen(cmd, env=env)]
        else:
            cmd = [sys.executable, "-m", "jobvisor.worker"]
            procs = [subprocess.Popen(cmd, env=env) for _ in range(args.workers)]
        try:
            # Warm up: every worker connected and idle.
            queue.enqueue_many([{"job_type": "noop"} for _ in range(args.workers * 4)])
            wait_completed(queue, args.workers * 4, time.monotonic() + 60, direct)
            warm = args.workers * 4
            job = (
                {"job_type": "sleep", "payload": {"ms": args.sleep_ms}}
                if args.sleep_ms
                else {"job_type": "noop"}
            )
            jobs = [job for _ in range(args.jobs)]
            started = time.perf_counter()
            queue.enqueue_many(jobs)
            enqueued = time.perf_counter()
            if args.analyze and engine == "postgres":
                with psycopg.connect(url, autocommit=True) as conn:
                    conn.execute("ANALYZE jobvisor_jobs")
            wait_completed(queue, warm + args.jobs, time.monotonic() + DEADLINE, direct)
            elapsed = time.perf_counter() - enqueued
            memory = {}
            for proc in procs:
                memory[f"{Path(cmd[0]).name} {cmd[-1]}[{proc.pid}]"] = rss_kib(proc.pid)
                for child in children_of(proc.pid):
                    memory[f"  worker[{child}]"] = rss_kib(child)
            print(f"  enqueue_many({args.jobs}) took {enqueued - started:.2f}s", flush=True)
            return elapsed, memory
        finally:
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
            for proc in procs:
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
            queue.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=["postgres", "sqlite", "citus", "both"], default="both")
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", default="200", help="a number, or default (unset)")
    parser.add_argument("--sleep-ms", type=float, default=0.0, help="jobs that await this long")
    parser.add_argument("--via", choices=["workers", "run"], default="workers")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument(
        "--analyze",
        action="store_true",
        help="ANALYZE the jobs table right after the enqueue (inside the timing)",
    )
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    parser.add_argument("--bouncer-url", help="a PgBouncer (transaction pooling) to go through")
    parser.add_argument("--poll", action="store_true", help="with --bouncer-url: no LISTEN")
    parser.add_argument("--citus-url", default="postgresql://postgres@127.0.0.1:56001/postgres")
    parser.add_argument(
        "--citus-nodes", type=int, help="with --engine citus: use this many worker nodes"
    )
    args = parser.parse_args()
    engines = ["postgres", "sqlite"] if args.engine == "both" else [args.engine]
    for engine in engines:
        rates = []
        memory: dict[str, int] = {}
        for _ in range(args.runs):
            elapsed, memory = one_run(engine, args)
            rates.append(args.jobs / elapsed)
            print(f"  {engine}: {args.jobs} jobs in {elapsed:.2f}s = {rates[-1]:,.0f} jobs/s",
                  flush=True)  # fmt: skip
        kind = f"{args.sleep_ms:g} ms jobs" if args.sleep_ms else "no-op jobs"
        print(f"{engine}: via {args.via}, {args.workers} workers x concurrency "
              f"{args.concurrency}, {kind}: median {statistics.median(rates):,.0f} jobs/s "
              f"over {args.runs} run(s)")  # fmt: skip
        for name, kib in memory.items():
            print(f"  rss {name}: {kib / 1024:.1f} MiB")


if __name__ == "__main__":
    main()
