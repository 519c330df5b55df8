"""The supervisor serves `/healthz`, `/readyz` and `/metrics` from its own
loop: workers alive, the database answering, and what the workers reported."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jobvisor
from jobvisor import Queue
from jobvisor.queue.internal import dashboard_ops
from tests.support.invariants import assert_invariants
from tests.support.service import Service, by_status, http_get
from tests.support.wait import wait_until


def test_health_readiness_and_metrics(
    pg_queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = pg_queue.url
    ids = pg_queue.enqueue_many([{"job_type": "noop"}] * 30)
    service = start_service(url, tmp_path, {"JOBVISOR_HTTP_ADDR": "127.0.0.1:0"})
    port = int(service.wait_event("http.listening")[0]["port"])
    service.wait_ready()
    wait_until(lambda: by_status(url).get("completed") == len(ids), what="the jobs done")

    assert http_get(port, "/healthz") == (200, "ok: 2/2 workers alive, state running\n")
    wait_until(lambda: http_get(port, "/readyz")[0] == 200, what="ready")

    def reported() -> str:
        body = http_get(port, "/metrics")[1]
        return (
            body
            if 'jobvisor_jobs_completed_total{job_type="noop",queue="default"} 30.0' in body
            else ""
        )

    body = wait_until(reported, what="the workers' counts in /metrics")
    assert "jobvisor_workers 2.0" in body
    assert service.stop() == 0
    assert_invariants(url)


def test_the_dashboard_and_the_fleet_row(
    url: str, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    """With JOBVISOR_DASHBOARD=on the dashboard answers beside the probes, and
    the supervisor's heartbeat row shows it with its workers; a clean stop
    deletes the row."""
    settings = {"JOBVISOR_HTTP_ADDR": "127.0.0.1:0", "JOBVISOR_DASHBOARD": "on"}
    service = start_service(url, tmp_path, settings)
    port = int(service.wait_event("http.listening")[0]["port"])
    service.wait_ready()
    assert http_get(port, "/healthz")[0] == 200

    def fleet() -> list[dict[str, Any]]:
        rows = json.loads(http_get(port, "/api/supervisors")[1])["supervisors"]
        return [r for r in rows if len(r["workers"]) == 2]

    (row,) = wait_until(fleet, what="the supervisor's row with both workers")
    assert row["pid"] == service.pid
    status, page = http_get(port, "/")
    assert status == 200 and row["id"] in page
    assert service.stop() == 0
    with jobvisor.connect(url) as q:
        assert dashboard_ops(q).supervisors(fresh=3600) == []
