"""Tracing: the enqueuer's context travels with the job; the execution is a
span of the same trace. Checked with the SDK's in-memory exporter."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import textwrap
import uuid

import pytest

from jobvisor import tracing
from jobvisor.outcomes import Outcome
from jobvisor.queue.model import Job, JobStatus
from tests.support.no_otel import BLOCK_OPENTELEMETRY

pytest.importorskip("opentelemetry.sdk", reason="the dev extra installs opentelemetry-sdk")

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)


def make_job(attempts: int = 1) -> Job:
    now = dt.datetime.now(dt.UTC)
    return Job(
        id=uuid.uuid4(), queue="mail", job_type="send_email", payload={}, priority=0,
        run_at=now, status=JobStatus.RUNNING, attempts=attempts, max_attempts=5,
        last_error=None, correlation_id=None, dedupe_key=None, lease_expires_at=now,
        claim_token=uuid.uuid4(), worker_id="w-1", created_at=now, started_at=now,
        finished_at=None,
    )  # fmt: skip


@pytest.fixture
def provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    return tp, exporter


def test_a_job_runs_in_a_child_span_of_the_request_that_enqueued_it(
    provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    tp, exporter = provider
    with tp.get_tracer("app").start_as_current_span("POST /signup") as request:
        carrier = tracing.inject()
    assert carrier is not None and carrier["traceparent"].startswith("00-")

    job = make_job(attempts=2)
    with tracing.job_span(job, carrier, tracer_provider=tp) as span:
        span.set_outcome(Outcome.COMPLETED)

    (request_span, job_span) = sorted(exporter.get_finished_spans(), key=lambda s: s.name)
    assert request_span.name == "POST /signup"
    assert job_span.name == "jobvisor.job send_email"
    assert job_span.kind == trace.SpanKind.CONSUMER
    assert job_span.context is not None and request_span.context is not None
    assert job_span.context.trace_id == request.get_span_context().trace_id
    assert job_span.parent is not None
    assert job_span.parent.span_id == request.get_span_context().span_id
    assert [link.context.span_id for link in job_span.links] == [request.get_span_context().span_id]
    assert dict(job_span.attributes or {}) == {
        "jobvisor.job.id": str(job.id),
        "jobvisor.job.type": "send_email",
        "jobvisor.job.queue": "mail",
        "jobvisor.job.attempt": 2,
        "jobvisor.job.outcome": "completed",
    }
    assert job_span.status.status_code == trace.StatusCode.UNSET


def test_a_failed_job_marks_its_span_as_an_error(
    provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    tp, exporter = provider
    with tracing.job_span(make_job(), None, tracer_provider=tp) as span:
        span.set_outcome(Outcome.DEAD, error="ValueError: no such user")
    (finished,) = exporter.get_finished_spans()
    assert finished.parent is None  # no carrier: a trace of its own
    assert finished.status.status_code == trace.StatusCode.ERROR
    assert finished.status.description == "ValueError: no such user"
    assert (finished.attributes or {})["jobvisor.job.outcome"] == "dead"


def test_an_exception_escaping_the_span_is_recorded(
    provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    tp, exporter = provider
    with pytest.raises(RuntimeError), tracing.job_span(make_job(), None, tracer_provider=tp):
        raise RuntimeError("worker bug")
    (finished,) = exporter.get_finished_spans()
    assert finished.status.status_code == trace.StatusCode.ERROR
    assert [e.name for e in finished.events] == ["exception"]


def test_inject_without_an_active_span_records_nothing() -> None:
    assert tracing.inject() is None


def test_without_the_extra_nothing_is_imported_and_nothing_changes() -> None:
    script = BLOCK_OPENTELEMETRY + textwrap.dedent(
        """
        import datetime as dt, uuid
        import jobvisor, jobvisor.cli, jobvisor.metrics, jobvisor.http
        from jobvisor import tracing
        from jobvisor.queue.model import Job, JobStatus

        assert not tracing.available()
        assert tracing.inject() is None
        now = dt.datetime.now(dt.UTC)
        job = Job(uuid.uuid4(), "q", "t", {}, 0, now, JobStatus.RUNNING, 1, 1, None, None,
                  None, now, uuid.uuid4(), "w", now, now, None)
        carrier = {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}
        with tracing.job_span(job, carrier) as span:
            span.set_outcome("completed")
        assert not [m for m in sys.modules if m.startswith("opentelemetry")], sys.modules
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
