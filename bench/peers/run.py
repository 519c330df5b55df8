"""Benchmark jobvisor against the queues people would pick instead, on the
same local PostgreSQL, with the same workloads:

- burn-down: 20,000 no-op jobs already queued, 2 worker processes; jobs/s
  from the first job done to the last (worker start-up reported apart);
- latency: enqueue-to-start of one job at a time on idle workers, p50/p99;
- bulk: one bulk enqueue of 100,000 jobs through each peer's batch API.

Each peer is installed into its own environment under bench/peers/.envs/
(pgqueuer, procrastinate and oban from PyPI into virtualenvs, graphile-worker
from npm), gets its own database `jobvisor_peer_<name>` (dropped and created
again before every measurement), and runs through a small driver in
drivers/. Runs alternate between peers (the order rotates each run); the
summary gives the median and the range over the runs, and the chart
(bench/peers/peers.png) is drawn with matplotlib from a separate environment.

    .venv/bin/python bench/peers/run.py                 # set up, 3 runs, table, chart
    .venv/bin/python bench/peers/run.py --runs 1 --peers jobvisor pgqueuer
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from typing import Any

import psycopg
from psycopg import sql

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ENVS = os.path.join(HERE, ".envs")
DRIVERS = os.path.join(HERE, "drivers")
RESULTS = os.path.join(HERE, "results")

# Pinned so that a rerun measures the same code.
PIP_PACKAGES = {
    "pgqueuer": ["pgqueuer==1.6.0", "asyncpg", "psycopg[binary]"],
    "procrastinate": ["procrastinate==3.10.0", "psycopg[binary]"],
    "oban": ["oban==0.7.0", "psycopg[binary]"],
    "bench": ["matplotlib"],
}
MIN_PYTHON = {"oban": (3, 12)}
NPM_PACKAGES = ["graphile-worker@0.17.3", "pg"]
PEERS = ["jobvisor", "pgqueuer", "procrastinate", "oban", "graphile-worker"]
WORKLOADS = ["bulk", "burndown", "latency"]


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def find_python(minimum: tuple[int, int]) -> str:
    """An interpreter at least `minimum`: this one, pythonX.Y on PATH, or pyenv's."""
    if sys.version_info[:2] >= minimum:
        return sys.executable
    # A name on PATH can be a pyenv shim for a version that is not selected,
    # which fails when run: every candidate is tried before it is chosen.
    on_path = [shutil.which(f"python{minimum[0]}.{minor}") for minor in range(minimum[1], 20)]
    pyenv = os.path.expanduser(f"~/.pyenv/versions/{minimum[0]}.*/bin/python")
    check = f"import sys; print(sys.version_info[:2] >= {minimum!r})"
    for path in [p for p in on_path if p] + sorted(glob.glob(pyenv), reverse=True):
        out = subprocess.run([path, "-c", check], capture_output=True, text=True, check=False)
        if out.stdout.strip() == "True":
            return path
    raise SystemExit(f"no Python >= {minimum[0]}.{minimum[1]} found (oban needs it)")


def env_python(name: str) -> str:
    return os.path.join(ENVS, name, "bin", "python")


def setup(names: list[str]) -> None:
    """Install what each peer needs into its own environment (skipped when present)."""
    os.makedirs(ENVS, exist_ok=True)
    for name in [n for n in names if n in PIP_PACKAGES] + ["bench"]:
        if os.path.exists(env_python(name)):
            continue
        log(f"installing {name} into {os.path.join(ENVS, name)}")
        python = find_python(MIN_PYTHON.get(name, (3, 10)))
        subprocess.run([python, "-m", "venv", os.path.join(ENVS, name)], check=True)
        subprocess.run([env_python(name), "-m", "pip", "install", "-q", *PIP_PACKAGES[name]],
                       check=True)  # fmt: skip
    graphile = os.path.join(ENVS, "graphile-worker")
    if "graphile-worker" in names and not os.path.isdir(os.path.join(graphile, "node_modules")):
        log(f"installing graphile-worker into {graphile}")
        os.makedirs(graphile, exist_ok=True)
        subprocess.run(["npm", "init", "-y"], cwd=graphile, check=True, capture_output=True)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", *NPM_PACKAGES],
                       cwd=graphile, check=True)  # fmt: skip


def driver_command(name: str) -> list[str]:
    if name == "jobvisor":
        return [os.path.join(ROOT, ".venv", "bin", "python"), "jobvisor_driver.py"]
    if name == "graphile-worker":
        return [os.path.join(ROOT, ".venv", "bin", "python"), "graphile_driver.py"]
    return [env_python(name), f"{name}_driver.py"]


def recreate(admin_dsn: str, dbname: str) -> str:
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
            sql.Identifier(dbname)))  # fmt: skip
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
    base = admin_dsn.rsplit("/", 1)[0]
    return f"{base}/{dbname}"


def run_driver(name: str, workload: str, dsn: str, args: argparse.Namespace) -> dict[str, Any]:
    jobs = args.bulk_jobs if workload == "bulk" else args.burndown_jobs
    concurrency = args.concurrency
    if name == "jobvisor" and args.jobvisor_concurrency is not None:
        # "default": 0, which the driver reads as no JOBVISOR_CONCURRENCY at all.
        concurrency = (
            0 if args.jobvisor_concurrency == "default" else int(args.jobvisor_concurrency)
        )
    log_dir = os.path.join(RESULTS, "logs", name)
    os.makedirs(log_dir, exist_ok=True)
    cmd = [*driver_command(name), workload, "--dsn", dsn, "--jobs", str(jobs),
           "--samples", str(args.samples), "--workers", str(args.workers),
           "--concurrency", str(concurrency), "--log-dir", log_dir,
           "--timeout", str(args.timeout)]  # fmt: skip
    env = {**os.environ, "GRAPHILE_WORKER_DIR": os.path.join(ENVS, "graphile-worker"),
           "PYTHONPATH": DRIVERS}  # fmt: skip
    try:
        out = subprocess.run(cmd, cwd=DRIVERS, env=env, capture_output=True, text=True,
                             timeout=args.timeout + 120, check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        return {"unavailable": f"driver timed out after {args.timeout + 120:.0f}s"}
    with open(os.path.join(log_dir, f"{workload}.stderr"), "a") as f:
        f.write(out.stderr)
    for line in reversed(out.stdout.splitlines()):
        if line.startswith("{"):
            result: dict[str, Any] = json.loads(line)
            return result
    tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
    return {"unavailable": f"driver exited {out.returncode}: {tail[:200]}"}


METRICS = [  # (workload, key, label, higher is better)
    ("burndown", "jobs_per_s", "burn-down jobs/s", True),
    ("latency", "p50_ms", "latency p50 ms", False),
    ("latency", "p99_ms", "latency p99 ms", False),
    ("bulk", "jobs_per_s", "bulk enqueue jobs/s", True),
    # CPU per job over the burn-down, read from /proc (common.cpu_split).
    ("burndown", "database_cpu_us_per_job", "database CPU µs/job", False),
    ("burndown", "workers_cpu_us_per_job", "workers CPU µs/job", False),
]


def summarise(results: dict[str, dict[str, list[dict[str, Any]]]]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for peer, by_workload in results.items():
        row: dict[str, Any] = {}
        for workload, key, label, _ in METRICS:
            values = [r[key] for r in by_workload.get(workload, []) if key in r]
            notes = [r["unavailable"] for r in by_workload.get(workload, []) if "unavailable" in r]
            if values:
                row[label] = {"median": statistics.median(values), "min": min(values),
                              "max": max(values), "n": len(values)}  # fmt: skip
            else:
                row[label] = {"unavailable": notes[0] if notes else "not run"}
        summary[peer] = row
    return summary


def table(summary: dict[str, Any], versions: dict[str, Any]) -> str:
    labels = [m[2] for m in METRICS]
    lines = ["| peer | version | " + " | ".join(labels) + " |",
             "|---|---|" + "---:|" * len(labels)]  # fmt: skip
    for peer, row in summary.items():
        cells = []
        for label in labels:
            cell = row[label]
            if "median" in cell:
                fmt = "{:,.0f}" if "jobs/s" in label or "µs" in label else "{:.1f}"
                cells.append(f"{fmt.format(cell['median'])} ({fmt.format(cell['min'])}-"
                             f"{fmt.format(cell['max'])})")  # fmt: skip
            else:
                cells.append("unavailable")
        version = versions.get(peer, {}).get("version", "?")
        lines.append(f"| {peer} | {version} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--peers", nargs="+", default=PEERS, choices=PEERS)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--burndown-jobs", type=int, default=20_000)
    p.add_argument("--bulk-jobs", type=int, default=100_000)
    p.add_argument("--samples", type=int, default=200, help="latency samples per run")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--concurrency", type=int, default=20, help="jobs at once per worker process")
    p.add_argument(
        "--jobvisor-concurrency",
        metavar="N|default",
        help="jobvisor's concurrency apart from the peers' (default: --concurrency);"
        " 'default' leaves JOBVISOR_CONCURRENCY unset: the service's own default",
    )
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per measurement")
    p.add_argument("--admin-dsn", default=os.environ.get(
        "JOBVISOR_BENCH_ADMIN_DSN", "postgresql://postgres@127.0.0.1:5432/postgres"))  # fmt: skip
    p.add_argument("--setup-only", action="store_true")
    p.add_argument("--chart", default=os.path.join(HERE, "peers.png"))
    args = p.parse_args()

    setup(args.peers)
    if args.setup_only:
        return
    os.makedirs(RESULTS, exist_ok=True)
    versions: dict[str, Any] = {}
    for name in args.peers:
        dsn = recreate(args.admin_dsn, f"jobvisor_peer_{name.replace('-', '_')}")
        versions[name] = run_driver(name, "version", dsn, args)
    log(f"versions: {versions}")

    results: dict[str, dict[str, list[dict[str, Any]]]] = {n: {} for n in args.peers}
    for run in range(args.runs):
        order = args.peers[run % len(args.peers) :] + args.peers[: run % len(args.peers)]
        for name in order:
            for workload in WORKLOADS:
                dsn = recreate(args.admin_dsn, f"jobvisor_peer_{name.replace('-', '_')}")
                result = run_driver(name, workload, dsn, args)
                log(f"run {run + 1}/{args.runs} {name} {workload}: {result}")
                results[name].setdefault(workload, []).append(result)

    summary = summarise(results)
    report = {
        "command": " ".join([os.path.relpath(sys.executable, ROOT), *sys.argv]),
        "settings": {k: v for k, v in vars(args).items() if k != "admin_dsn"},
        "versions": versions,
        "results": results,
        "summary": summary,
        "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    stamp = time.strftime("%Y%m%d-%H%M%S")
    with open(os.path.join(RESULTS, f"peers-{stamp}.json"), "w") as f:
        json.dump(report, f, indent=2)
    with open(os.path.join(RESULTS, "latest.json"), "w") as f:
        json.dump(report, f, indent=2)
    print(table(summary, versions))
    subprocess.run([env_python("bench"), os.path.join(HERE, "chart.py"),
                    os.path.join(RESULTS, "latest.json"), args.chart], check=True)  # fmt: skip
    log(f"chart written to {args.chart}")


if __name__ == "__main__":
    main()
