"""The real `python -m jobvisor.worker` process, with an application that
configures the global tracer provider: the execution span it exports joins
the trace of the request that enqueued the job, on both engines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jobvisor import JobStatus, Queue
from tests.support.wait import wait_until
from tests.support.worker import running_worker

pytest.importorskip("opentelemetry.sdk", reason="the dev extra installs opentelemetry-sdk")

from opentelemetry.sdk.trace import TracerProvider

from tests.support.tracing import SPANS_ENV

APP = "tests.service.tracing.app:registry"


def read_spans(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


def test_the_worker_process_exports_the_execution_in_the_enqueuers_trace(
    url: str, queue: Queue, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spans_file = tmp_path / "spans.jsonl"
    monkeypatch.setenv(SPANS_ENV, str(spans_file))
    tp = TracerProvider()  # the enqueuing service's own, in this process
    with tp.get_tracer("web").start_as_current_span("POST /signup") as request:
        job_id = queue.enqueue("send_email", queue="mail")
    request_ctx = request.get_span_context()

    with running_worker(url, app=APP):
        wait_until(lambda: queue.get(job_id).status == JobStatus.COMPLETED, "the job to complete")
    # A span is exported as it ends, and the job's span ends before its
    # completion is written: the file holds both spans by now.
    spans = read_spans(spans_file)
    (job_span,) = [s for s in spans if s["name"] == "jobvisor.job send_email"]
    assert job_span["trace_id"] == f"{request_ctx.trace_id:032x}"
    assert job_span["parent_span_id"] == f"{request_ctx.span_id:016x}"
    assert job_span["links"] == [f"{request_ctx.span_id:016x}"]
    assert job_span["attributes"] == {
        "jobvisor.job.id": str(job_id),
        "jobvisor.job.type": "send_email",
        "jobvisor.job.queue": "mail",
        "jobvisor.job.attempt": 1,
        "jobvisor.job.outcome": "completed",
    }
    (inner,) = [s for s in spans if s["name"] == "smtp.send"]
    assert inner["parent_span_id"] == job_span["span_id"]
    assert inner["trace_id"] == job_span["trace_id"]
