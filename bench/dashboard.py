"""The dashboard's pages on a big table: p50/p95 of each page, over HTTP, on
PostgreSQL with (by default) 10 million jobs.

    .venv/bin/python bench/dashboard.py [--jobs 10000000] [--requests 40]
        [--pg-url postgresql://postgres@127.0.0.1:5432/postgres] [--reuse]

The jobs are written by one INSERT … SELECT over generate_series (COPY
through `enqueue_many` would take an hour of this machine for 10 million),
in the mix a service that has run for a while holds: most completed over
the last day, a backlog pending (some scheduled ahead), retryable, dead,
cancelled and a few thousand running; 8 queues of uneven size, 20 job
types, a correlation id shared by about 5 jobs, ids time-ordered like
jobvisor's own. Then ANALYZE and VACUUM, as autovacuum would have. The
database is `jobvisor_bench_dashboard`, created per run (`--reuse` keeps a
filled one). The dashboard is served by uvicorn in this process, like
`jobvisor web`, and each page is fetched `--requests` times after one
warm-up fetch.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import threading
import time
import urllib.parse
import urllib.request

import psycopg
from psycopg import sql

import jobvisor
from jobvisor.http import serve
from jobvisor.queue.internal import dashboard_ops
from jobvisor.web import app

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
DB_NAME = "jobvisor_bench_dashboard"

# One row per job; `i` is the row number, `n` the total. Times spread over
# the last day by row number, so ids (time-ordered) follow the same order.
FILL = """
INSERT INTO jobvisor_jobs (id, queue, job_type, payload, priority, run_at, status,
    attempts, max_attempts, last_error, correlation_id, claim_token, worker_id,
    lease_expires_at, created_at, started_at, finished_at)
SELECT
    (lpad(to_hex((extract(epoch FROM t) * 1000)::bigint), 12, '0') || '7'
        || substr(h, 1, 3) || '8' || substr(h, 4, 15))::uuid,
    'queue-' || (CASE WHEN r < 0.5 THEN 0 WHEN r < 0.75 THEN 1 WHEN r < 0.87 THEN 2
        WHEN r < 0.93 THEN 3 WHEN r < 0.97 THEN 4 WHEN r < 0.99 THEN 5
        WHEN r < 0.998 THEN 6 ELSE 7 END),
    'job_type_' || mod(i, 20),
    jsonb_build_object('order', i, 'customer', 'c-' || mod(i, 100000), 'note', repeat('x', 60)),
    mod(i, 3) - 1,
    CASE WHEN s = 'pending' AND mod(i, 10) = 0 THEN now() + interval '1 hour' ELSE t END,
    s,
    CASE WHEN s IN ('pending') THEN 0 WHEN s = 'dead' THEN 5 ELSE 1 END,
    5,
    CASE WHEN s IN ('dead', 'retryable') THEN 'ValueError: upstream said no (' || i || ')' END,
    'corr-' || (i / 5),
    CASE WHEN s = 'running' THEN gen_random_uuid() END,
    CASE WHEN s = 'running' THEN 'w-' || mod(i, 40) END,
    CASE WHEN s = 'running' THEN now() + interval '5 minutes' END,
    t,
    CASE WHEN s <> 'pending' THEN t END,
    CASE WHEN s IN ('completed', 'dead', 'cancelled') THEN t + interval '2 seconds' END
FROM (
    SELECT i, md5(i::text) AS h, mod(i, 997) / 997.0 AS r,
        now() - interval '1 day' * (1 - i::float8 / %(n)s) AS t,
        CASE WHEN mod(i, 1000) < 900 THEN 'completed'
             WHEN mod(i, 1000) < 980 THEN 'pending'
             WHEN mod(i, 1000) < 992 THEN 'retryable'
             WHEN mod(i, 1000) < 996 THEN 'dead'
             WHEN mod(i, 1000) < 999 THEN 'cancelled'
             ELSE 'running' END AS s
    FROM generate_series(%(a)s, %(b)s) AS i
) AS g
"""


def database(admin_url: str, *, reuse: bool) -> str:
    url = admin_url.rsplit("/", 1)[0] + "/" + DB_NAME
    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DB_NAME,)).fetchone()
        if exists and reuse:
            return url
        name = sql.Identifier(DB_NAME)
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(name))
    return url


def fill(url: str, jobs: int) -> None:
    with jobvisor.connect(url) as q:
        q.migrate()
    with psycopg.connect(url, autocommit=True) as conn:
        (have,) = conn.execute("SELECT count(*) FROM jobvisor_jobs").fetchone() or (0,)
        if have >= jobs:
            print(f"reusing {have:,} jobs")
            return
        started = time.perf_counter()
        step = 1_000_000
        for first in range(0, jobs, step):
            count = min(step, jobs - first)
            conn.execute(FILL, {"n": jobs, "a": first + 1, "b": first + count})  # type: ignore[arg-type]
            print(f"  {first + count:>12,} jobs written", flush=True)
        conn.execute("VACUUM (ANALYZE) jobvisor_jobs")
        print(f"filled {jobs:,} jobs in {time.perf_counter() - started:.0f} s", flush=True)


class Server:
    """The dashboard on an ephemeral port, on a loop in a thread."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.base = ""
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._loop.run_until_complete, args=(self._main(),))

    async def _main(self) -> None:
        queue = jobvisor.connect_async(self.url, pool_size=4)
        self._stop = asyncio.Event()
        server = await serve(app(queue), "127.0.0.1:0")
        self.base = "http://{}:{}".format(*server.address)
        self._ready.set()
        await self._stop.wait()
        await server.close()
        await queue.close()

    def __enter__(self) -> Server:
        self._thread.start()
        self._ready.wait(60)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(60)


def fetch(url: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as response:
        response.read()
        assert response.status == 200, (url, response.status)
    return time.perf_counter() - started


def query(**params: str | None) -> str:
    return urllib.parse.urlencode(params)


def pages(url: str) -> dict[str, str]:
    """The pages to time, with ids and cursors read from the data."""
    with jobvisor.connect(url) as q:
        newest = dashboard_ops(q).job_page(limit=50)
        deep = dashboard_ops(q).job_page(status="completed", limit=50)
        for _ in range(20):  # 20 pages in: a cursor deep in the list
            deep = dashboard_ops(q).job_page(status="completed", limit=50, cursor=deep.next_cursor)
        due = dashboard_ops(q).job_page(order="due", limit=50)
        some = newest.jobs[-1]
    return {
        "overview": "/",
        "jobs, newest first": "/jobs",
        "jobs, dead": "/jobs?status=dead",
        "jobs, running": "/jobs?status=running",
        "jobs, pending": "/jobs?status=pending",
        "jobs, one queue": "/jobs?queue=queue-7",
        "jobs, queue + status": "/jobs?queue=queue-3&status=retryable",
        "jobs, one type": "/jobs?job_type=job_type_13",
        "jobs, completed page 21": "/jobs?" + query(status="completed", cursor=deep.next_cursor),
        "jobs, by run time": "/jobs?order=due",
        "jobs, by run time page 2": "/jobs?" + query(order="due", cursor=due.next_cursor),
        "jobs, correlation id": f"/jobs?correlation_id={some.correlation_id}",
        "jobs, a job's own id": f"/jobs?correlation_id={some.id.hex}",
        "job detail": f"/jobs/{some.id}",
        "schedules": "/schedules",
        "api: queues": "/api/queues",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000_000)
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    parser.add_argument("--reuse", action="store_true", help="keep a database already filled")
    args = parser.parse_args()
    url = database(args.pg_url, reuse=args.reuse)
    fill(url, args.jobs)
    targets = pages(url)
    results: list[tuple[str, float, float, float]] = []
    with Server(url) as server:
        for name, path in targets.items():
            fetch(server.base + path)  # warm-up: the first connection, plans, the cache
            times = sorted(fetch(server.base + path) for _ in range(args.requests))
            p95 = times[max(0, round(0.95 * len(times)) - 1)]
            results.append((name, statistics.median(times), p95, times[-1]))
    print(f"\n{args.jobs:,} jobs, {args.requests} requests per page (milliseconds)")
    print(f"{'page':<28} {'p50':>8} {'p95':>8} {'max':>8}")
    for name, p50, p95, top in results:
        print(f"{name:<28} {p50 * 1000:>8.1f} {p95 * 1000:>8.1f} {top * 1000:>8.1f}")


if __name__ == "__main__":
    main()
