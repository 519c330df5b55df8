"""The supervisor serves `/healthz`, `/readyz` and `/metrics` from its own
loop: workers alive, the database answering, and what the workers reported."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from jobvisor import Queue
from tests.invariants import assert_invariants

from .helpers import Service, by_status, http_get, wait_until


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
