"""Without opentelemetry importable, enqueue and the worker work as before,
nothing of opentelemetry is imported, and no job gets a `meta`. Run in a
fresh interpreter whose import system refuses `opentelemetry`."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import psycopg

from jobvisor.queue.api import parse_url
from tests.support.invariants import assert_invariants
from tests.support.no_otel import BLOCK_OPENTELEMETRY
from tests.support.tracing import DEADLINE

ROOT = Path(__file__).resolve().parents[3]

SCRIPT = BLOCK_OPENTELEMETRY + textwrap.dedent(
    """
    import jobvisor
    from jobvisor import Registry, tracing
    from tests.support.tracing import run_worker

    url = sys.argv[1]
    registry = Registry()

    @registry.handler("send_email")
    async def send_email(job):
        pass

    with jobvisor.connect(url) as queue:
        queue.migrate()
        ids = [queue.enqueue("send_email")]
        ids += queue.enqueue_many([{"job_type": "send_email"}, {"job_type": "send_email"}])
    jobs = run_worker(url, registry, ids)
    assert [j.status.value for j in jobs] == ["completed"] * 3, jobs
    assert [j.meta for j in jobs] == [None] * 3, jobs
    assert not tracing.available()
    loaded = [m for m in sys.modules if m.startswith("opentelemetry")]
    assert not loaded, loaded
    print("ok")
    """
)


def test_without_opentelemetry_jobs_run_and_record_no_meta(url: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, url], cwd=ROOT,
        capture_output=True, text=True, timeout=DEADLINE * 2, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"

    query = "SELECT count(*), count(meta), min(status), max(status) FROM jobvisor_jobs"
    engine, target = parse_url(url)
    if engine == "postgres":
        with psycopg.connect(target) as conn:
            row = conn.execute(query.encode()).fetchone()
    else:
        lite = sqlite3.connect(target)
        try:
            row = lite.execute(query).fetchone()
        finally:
            lite.close()
    assert row == (3, 0, "completed", "completed")  # meta is NULL in every row
    assert_invariants(url)
