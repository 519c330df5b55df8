"""Queue throughput: `enqueue_many`, then claim + complete from two processes,
on PostgreSQL and SQLite, beside a bare-driver loop that runs the same SQL.

    .venv/bin/python bench/queue_throughput.py [--jobs 100000] [--engine both]
        [--pg-url postgresql://postgres@127.0.0.1:5432/postgres] [--runs 1]

Each phase starts from an empty jobs table: the API enqueues `--jobs` jobs in
one `enqueue_many` call (COPY on PostgreSQL), then `--workers` processes
(multiprocessing, spawn) each loop `claim(limit=--batch)` and
`complete_many(...)` until the queue is empty. The bare phase enqueues the
same way, then its processes run the very statements the API runs
(`JOB_CLAIM`, `JOB_COMPLETE_MANY` of the engine's SQL module), each in its own
transaction as the API does, straight on the driver: no pool, no `Job`
objects, no checks. The ratio API / bare is how much the API costs on top of
the database's own work (target: at least 0.70).

On PostgreSQL the table is ANALYZEd after the enqueue (not timed), as
autovacuum would do soon after such a burst; `--cold-statistics` skips that.
PostgreSQL runs in a database named `jobvisor_bench` that the script drops and
creates (`--pg-url` names the server's maintenance database); SQLite in a
temporary file per phase. With `--runs N` every figure is the median of N runs,
and the API and bare phases alternate which goes first.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import json
import multiprocessing
import os
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

import jobvisor
from jobvisor.queue.drivers.postgres import sql as sql_postgres
from jobvisor.queue.drivers.sqlite import sql as sql_sqlite

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
BENCH_DB = "jobvisor_bench"
WORKER_DEADLINE = 900.0  # seconds a phase may take before the run is abandoned

# A worker's report: (monotonic start, monotonic end, jobs completed), or an error text.
Report = tuple[float, float, int] | str


@dataclasses.dataclass(frozen=True, slots=True)
class Phase:
    engine: str
    mode: str  # "api" or "bare"
    run: int
    jobs: int
    enqueue_seconds: float
    claim_complete_seconds: float

    @property
    def enqueue_rate(self) -> float:
        return self.jobs / self.enqueue_seconds

    @property
    def claim_complete_rate(self) -> float:
        return self.jobs / self.claim_complete_seconds


# --- databases ------------------------------------------------------------------


def with_dbname(url: str, dbname: str) -> str:
    """The PostgreSQL URL with its database name replaced."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(path="/" + dbname))


def recreate_pg_database(admin_url: str, dbname: str = BENCH_DB) -> str:
    """Drop and create the benchmark's database (`jobvisor_bench` unless
    named), migrate it, and return its URL."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        name = sql.Identifier(dbname)
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(name))
    url = with_dbname(admin_url, dbname)
    with jobvisor.connect(url) as q:
        q.migrate()
    return url


def drop_pg_database(admin_url: str, dbname: str = BENCH_DB) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        name = sql.Identifier(dbname)
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))


@contextmanager
def empty_queue(engine: str, pg_url: str, tmp: Path, label: str) -> Iterator[str]:
    """A migrated, empty jobs table on `engine`; yields its URL."""
    if engine == "postgres":
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("TRUNCATE jobvisor_jobs CASCADE")
            conn.execute("CHECKPOINT")
        yield pg_url
        return
    path = tmp / f"{label}.db"
    url = f"sqlite:///{path}"
    with jobvisor.connect(url) as q:
        q.migrate()
    try:
        yield url
    finally:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)


# --- the phases -----------------------------------------------------------------


def enqueue(url: str, jobs: int) -> float:
    """Enqueue `jobs` jobs with one `enqueue_many` call; returns the seconds it took."""
    items = [{"job_type": "bench", "payload": {"n": n}} for n in range(jobs)]
    with jobvisor.connect(url) as q:
        q.summary()  # open the connection before the clock starts
        started = time.perf_counter()
        ids = q.enqueue_many(items)
        elapsed = time.perf_counter() - started
    if len(ids) != jobs:
        raise SystemExit(f"enqueue_many returned {len(ids)} ids for {jobs} jobs")
    return elapsed


def refresh_statistics(url: str) -> None:
    """ANALYZE the jobs table, as autovacuum would soon after a burst of inserts.

    Without it the first claims after the burst are planned on the statistics
    of an empty (or drained) table: PostgreSQL then reads and sorts the whole
    backlog on every claim instead of walking the claim index (see
    docs/benchmarks.md). `--cold-statistics` skips it to show that case."""
    if url.startswith("postgresql"):
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ANALYZE jobvisor_jobs")


def api_worker(url: str, batch: int, barrier: Barrier, reports: Any) -> None:
    """Claim and complete through the public API until the queue is empty."""
    try:
        worker_id = f"bench-api-{os.getpid()}"
        with jobvisor.connect(url, pool_size=1) as q:
            q.summary()
            barrier.wait()
            done = 0
            started = time.monotonic()
            while jobs := q.claim(worker_id, limit=batch):
                lost = q.complete_many(jobs)
                done += len(jobs) - len(lost)
            reports.put((started, time.monotonic(), done))
    except BaseException:
        reports.put(traceback.format_exc())
        barrier.abort()


def bare_pg_worker(url: str, batch: int, barrier: Barrier, reports: Any) -> None:
    """The API's claim and complete statements, straight on one psycopg connection."""
    try:
        claim = {"worker_id": f"bench-bare-{os.getpid()}", "queues": None, "job_types": None,
                 "limit": batch, "lease": 30.0, "now": None}  # fmt: skip
        # Autocommit, as the API's pool runs single statements: each is its
        # own transaction, one round trip.
        with psycopg.connect(url, autocommit=True) as conn, conn.cursor() as cur:
            cur.execute("SELECT 1")
            barrier.wait()
            done = 0
            started = time.monotonic()
            while True:
                # The API passes the time and a fresh claim token too.
                now = dt.datetime.now(dt.UTC)
                cur.execute(
                    sql_postgres.JOB_CLAIM,
                    {**claim, "now": now, "slack": 0.0, "token": uuid.uuid4()},
                )
                rows = cur.fetchall()
                if not rows:
                    break
                held = {
                    "ids": [r[0] for r in rows],
                    "tokens": [r[13] for r in rows],
                    "results": None,
                    "now": dt.datetime.now(dt.UTC),
                }
                cur.execute(sql_postgres.JOB_COMPLETE_MANY, held)
                done += len(cur.fetchall())
            reports.put((started, time.monotonic(), done))
    except BaseException:
        reports.put(traceback.format_exc())
        barrier.abort()


def bare_sqlite_worker(url: str, batch: int, barrier: Barrier, reports: Any) -> None:
    """The API's claim and complete statements, straight on one sqlite3 connection
    configured as the SQLite runner configures its own."""
    try:
        claim = {"worker_id": f"bench-bare-{os.getpid()}", "queues": None, "job_types": None,
                 "limit": batch, "lease": 30.0, "now": None}  # fmt: skip
        path = url.removeprefix("sqlite:///")
        conn = sqlite3.connect(path, timeout=10.0, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            barrier.wait()
            done = 0
            started = time.monotonic()
            while True:
                conn.execute("BEGIN IMMEDIATE")
                now, token = time.time(), uuid.uuid4().hex
                rows = conn.execute(sql_sqlite.JOB_CLAIM, {**claim, "now": now, "token": token})
                rows = rows.fetchall()
                conn.execute("COMMIT")
                if not rows:
                    break
                pairs = json.dumps([[r[0], r[13]] for r in rows])
                conn.execute("BEGIN IMMEDIATE")
                held = {"pairs": pairs, "results": None, "now": time.time()}
                done += len(conn.execute(sql_sqlite.JOB_COMPLETE_MANY, held).fetchall())
                conn.execute("COMMIT")
            reports.put((started, time.monotonic(), done))
        finally:
            conn.close()
    except BaseException:
        reports.put(traceback.format_exc())
        barrier.abort()


Worker = Callable[[str, int, Barrier, Any], None]


def claim_complete(url: str, worker: Worker, *, workers: int, batch: int, jobs: int) -> float:
    """Run `workers` processes of `worker` against `url` from one start line;
    returns the seconds from the first start to the last finish."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(workers + 1)
    reports = ctx.Queue()
    procs = [
        ctx.Process(target=worker, args=(url, batch, barrier, reports), name=f"bench-{i}")
        for i in range(workers)
    ]
    for p in procs:
        p.start()
    with contextlib.suppress(threading.BrokenBarrierError):
        barrier.wait(timeout=120)  # broken when a worker failed to start: its report says why
    collected: list[Report] = [reports.get(timeout=WORKER_DEADLINE) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    errors = [r for r in collected if isinstance(r, str)]
    if errors:
        raise SystemExit("a benchmark worker failed:\n" + "\n".join(errors))
    spans = [r for r in collected if not isinstance(r, str)]
    done = sum(r[2] for r in spans)
    if done != jobs:
        raise SystemExit(f"workers completed {done} jobs, expected {jobs}")
    return max(r[1] for r in spans) - min(r[0] for r in spans)


def check_all_completed(url: str, jobs: int) -> None:
    with jobvisor.connect(url) as q:
        summary = q.summary()
    if summary.count(jobvisor.JobStatus.COMPLETED) != jobs or summary.count() != jobs:
        raise SystemExit(f"expected {jobs} completed jobs, found:\n{summary}")


# --- reporting ------------------------------------------------------------------


def rate(value: float) -> str:
    return f"{value:>9,.0f} jobs/s"


def median(phases: list[Phase], engine: str, modes: set[str], what: str) -> float | None:
    values = [getattr(p, what) for p in phases if p.engine == engine and p.mode in modes]
    return statistics.median(values) if values else None


def report(phases: list[Phase], args: argparse.Namespace, engines: list[str]) -> dict[str, Any]:
    print()
    print(f"== median of {args.runs} run(s), {args.jobs:,} jobs, {args.workers} processes, "
          f"batches of {args.batch}, {os.cpu_count()} CPUs ==")  # fmt: skip
    summary: dict[str, Any] = {
        "jobs": args.jobs, "runs": args.runs, "workers": args.workers, "batch": args.batch,
        "cpus": os.cpu_count(), "engines": {},
    }  # fmt: skip
    for engine in engines:
        # Every phase enqueues through the API, so all of them count for enqueue.
        enq = median(phases, engine, {"api", "bare"}, "enqueue_rate")
        api = median(phases, engine, {"api"}, "claim_complete_rate")
        bare = median(phases, engine, {"bare"}, "claim_complete_rate")
        assert enq is not None and api is not None
        print(f"{engine:<9} enqueue_many           {rate(enq)}")
        print(f"{engine:<9} claim+complete, API    {rate(api)}")
        figures: dict[str, float] = {"enqueue": enq, "api": api}
        if bare is not None:
            ratio = api / bare
            verdict = "ok" if ratio >= 0.70 else "BELOW TARGET"
            print(f"{engine:<9} claim+complete, bare   {rate(bare)}")
            print(f"{engine:<9} API / bare             {ratio:>9.2f}  (target >= 0.70: {verdict})")
            figures |= {"bare": bare, "ratio": ratio}
        summary["engines"][engine] = figures
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=100_000, help="jobs per phase (100000)")
    parser.add_argument("--engine", choices=["postgres", "sqlite", "both"], default="both")
    parser.add_argument("--pg-url", default=os.environ.get("JOBVISOR_BENCH_PG_URL", DEFAULT_PG_URL),
                        help="a PostgreSQL superuser URL; the bench runs in database "
                             f"{BENCH_DB!r} on that server (default {DEFAULT_PG_URL})")  # fmt: skip
    parser.add_argument("--runs", type=int, default=1, help="runs; figures are medians (1)")
    parser.add_argument("--workers", type=int, default=2, help="claiming processes (2)")
    parser.add_argument("--batch", type=int, default=100, help="jobs per claim (100)")
    parser.add_argument("--no-bare", action="store_true", help="skip the bare-driver loop")
    parser.add_argument("--cold-statistics", action="store_true",
                        help="claim without running ANALYZE after the enqueue")  # fmt: skip
    parser.add_argument("--json", type=Path, help="also write the medians to this JSON file")
    args = parser.parse_args(argv)
    for name in ("jobs", "runs", "workers", "batch"):
        if getattr(args, name) < 1:
            parser.error(f"--{name}={getattr(args, name)}: expected an integer >= 1")

    engines = ["postgres", "sqlite"] if args.engine == "both" else [args.engine]
    pg_url = recreate_pg_database(args.pg_url) if "postgres" in engines else ""
    bare_workers: dict[str, Worker] = {"postgres": bare_pg_worker, "sqlite": bare_sqlite_worker}
    phases: list[Phase] = []
    try:
        with tempfile.TemporaryDirectory(prefix="jobvisor-bench-") as tmpdir:
            for run in range(1, args.runs + 1):
                for engine in engines:
                    modes = ["api"] if args.no_bare else ["api", "bare"]
                    if run % 2 == 0:
                        modes.reverse()
                    for mode in modes:
                        with empty_queue(engine, pg_url, Path(tmpdir), f"{mode}-{run}") as url:
                            enq = enqueue(url, args.jobs)
                            if not args.cold_statistics:
                                refresh_statistics(url)
                            worker = api_worker if mode == "api" else bare_workers[engine]
                            cc = claim_complete(url, worker, workers=args.workers,
                                                batch=args.batch, jobs=args.jobs)  # fmt: skip
                            check_all_completed(url, args.jobs)
                        phase = Phase(engine, mode, run, args.jobs, enq, cc)
                        phases.append(phase)
                        enq_rate, cc_rate = phase.enqueue_rate, phase.claim_complete_rate
                        print(
                            f"run {run} {engine:<9} {mode:<4}  enqueue {rate(enq_rate)}"
                            f"  claim+complete {rate(cc_rate)}  ({cc:.2f} s)",
                            flush=True,
                        )
    finally:
        if pg_url:
            drop_pg_database(args.pg_url)
    summary = report(phases, args, engines)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
