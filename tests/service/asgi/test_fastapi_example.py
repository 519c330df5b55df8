"""The FastAPI example (examples/fastapi/app.py) through FastAPI's test
client, on both engines: a request's job run by a real worker process, its
result awaited; the timeout paths; bad input refused with nothing written."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

import jobvisor
import jobvisor.asgi
from examples.fastapi import app as example
from jobvisor import testing
from tests.support.queue import row_count
from tests.support.worker import running_worker

APP = "examples.fastapi.app:registry"
REPORT = {"customer": "ada", "month": "2026-05", "amounts": [12.5, 7.5, 0.25]}
BUILT = {"customer": "ada", "month": "2026-05", "count": 3, "total": 20.25}


@pytest.fixture
def client(url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    """The example app on `url` (its lifespan migrates the database)."""
    monkeypatch.setenv("JOBVISOR_DATABASE_URL", url)
    with TestClient(example.app) as client:
        yield client


def test_a_request_waits_for_the_result_a_worker_built(client: TestClient, url: str) -> None:
    with running_worker(url, app=APP):
        now = client.post("/reports/now", params={"wait": 30}, json=REPORT)
        assert now.status_code == 200, now.text
        assert now.json() == BUILT

        queued = client.post("/reports", json={**REPORT, "customer": "bob"})
        assert queued.status_code == 202
        job_id = queued.json()["id"]
        polled = client.get(f"/reports/{job_id}", params={"wait": 30})
    assert polled.status_code == 200, polled.text
    assert polled.json() == {
        "id": job_id,
        "status": "completed",
        "result": {**BUILT, "customer": "bob"},
        "error": None,
    }


def test_without_a_worker_the_wait_times_out_and_drain_finishes_the_job(
    client: TestClient, url: str
) -> None:
    late = client.post("/reports/now", params={"wait": 0.3}, json=REPORT)
    assert late.status_code == 504
    assert late.json()["status"] == "pending"
    job_id = late.json()["id"]
    assert client.get(f"/reports/{job_id}", params={"wait": 0.1}).status_code == 202

    with jobvisor.connect(url) as q:
        drained = testing.drain(q, registry=example.registry)
    assert [str(i) for i in drained.completed] == [job_id]
    done = client.get(f"/reports/{job_id}")
    assert done.status_code == 200
    assert done.json()["result"] == BUILT


def test_bad_requests_are_refused_and_write_nothing(client: TestClient, url: str) -> None:
    assert client.post("/reports", json={**REPORT, "month": "2026-13"}).status_code == 422
    assert client.post("/reports", json={"customer": "ada"}).status_code == 422
    assert client.get("/reports/not-a-uuid").status_code == 422
    unknown = "00000000-0000-7000-8000-000000000000"
    assert client.get(f"/reports/{unknown}").status_code == 404
    assert client.get(f"/reports/{unknown}", params={"wait": 99}).status_code == 422
    assert row_count(url) == 0


def test_the_dashboard_is_mounted_when_jobvisor_has_one(client: TestClient) -> None:
    has_dashboard = importlib.util.find_spec("jobvisor.web") is not None
    mounted = [getattr(route, "path", "") for route in example.app.routes]
    assert ("/jobvisor" in mounted) is has_dashboard
    if has_dashboard:
        assert client.get("/jobvisor/").status_code == 200


def test_recording_checks_what_a_request_enqueues(
    client: TestClient, url: str, jobvisor_recording: testing.Recorder
) -> None:
    assert client.post("/reports", json=REPORT).status_code == 202
    recorded = jobvisor_recording.assert_enqueued(example.build_report)
    assert recorded.payload == {"spec": REPORT}
    assert recorded.options["queue"] == "reports"
    assert row_count(url) == 0  # recorded, not written
