"""The limited claim alone: racing claimers draining a backlog of limited jobs,
this checkout's code against another's (an earlier commit's `src`).

    .venv/bin/python bench/limited_claim.py --other-src <checkout>/src
        [--jobs 20000] [--claimers 4] [--batch 10] [--runs 3]
        [--pg-url postgresql://postgres@127.0.0.1:5432/postgres]

Each side: a fresh database `jobvisor_bench_limited_claim`, `--jobs` jobs of
type `capped` (`concurrency=50`), half of them also keyed (type `per_tenant`,
`key_concurrency=2`, 100 keys), then `--claimers` processes that claim
`--batch` jobs at a time and complete them at once until none is left. Every
claim is a limited claim, and claims of one group wait for each other on its
lock: the figure is how long that lock is held per claim, round trips
included. Jobs per second is the jobs over the time from the claimers' start
to the last completion. The two sides alternate run by run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
BENCH_DB = "jobvisor_bench_limited_claim"

# Run by each claimer process with the side's code first on sys.path.
CLAIMER = """
import sys, jobvisor
with jobvisor.connect(sys.argv[1]) as q:
    while True:
        jobs = q.claim(sys.argv[2], limit=int(sys.argv[3]))
        if jobs:
            q.complete_many(jobs)
        elif q.summary().count("pending") == 0:
            break
"""

SETUP = """
import sys, jobvisor
with jobvisor.connect(sys.argv[1]) as q:
    q.migrate()
    q.set_limit(job_type="capped", concurrency=50)
    q.set_limit(job_type="per_tenant", key_concurrency=2)
    n = int(sys.argv[2])
    jobs = [{"job_type": "capped"} if i % 2 else
            {"job_type": "per_tenant", "concurrency_key": f"tenant:{i % 100}"} for i in range(n)]
    for i in range(0, n, 5000):
        q.enqueue_many(jobs[i:i + 5000])
"""


def fresh_database(pg_url: str) -> str:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        name = sql.Identifier(BENCH_DB)
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(name))
    return f"{pg_url.rsplit('/', 1)[0]}/{BENCH_DB}"


def one_run(src: str, args: argparse.Namespace) -> float:
    url = fresh_database(args.pg_url)
    env = dict(os.environ, PYTHONPATH=src)
    subprocess.run([sys.executable, "-c", SETUP, url, str(args.jobs)], env=env, check=True)
    start = time.perf_counter()
    procs = [
        subprocess.Popen([sys.executable, "-c", CLAIMER, url, f"c{i}", str(args.batch)], env=env)
        for i in range(args.claimers)
    ]
    for proc in procs:
        if proc.wait() != 0:
            raise SystemExit(f"a claimer failed ({src})")
    took = time.perf_counter() - start
    with psycopg.connect(url) as conn:
        ((done,),) = conn.execute(
            "SELECT count(*) FROM jobvisor_jobs WHERE status = 'completed'"
        ).fetchall()
    if done != args.jobs:
        raise SystemExit(f"{done} of {args.jobs} jobs completed ({src})")
    return args.jobs / took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--other-src", required=True, help="the other checkout's src folder")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--claimers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    args = parser.parse_args()
    sides = {"other": args.other_src, "this": str(ROOT / "src")}
    rates: dict[str, list[float]] = {side: [] for side in sides}
    for run in range(args.runs):
        for side, src in sides.items():
            rate = one_run(src, args)
            rates[side].append(rate)
            print(f"  run {run + 1} {side}: {rate:,.0f} jobs/s", flush=True)
    for side, got in rates.items():
        print(f"{side}: median {statistics.median(got):,.0f} jobs/s over {args.runs} run(s)")
    ratio = statistics.median(rates["this"]) / statistics.median(rates["other"])
    print(f"this / other: {ratio:.2f} ({args.claimers} claimers, {args.batch} jobs a claim)")


if __name__ == "__main__":
    main()
