"""What the worker reads back from a job's `meta`: only a mapping of string
headers under "trace"; anything else (the column is plain JSON anyone with
SQL access can write) means no carrier, and the job runs in a trace of its own."""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from typing import Any

import pytest

from jobvisor import Job, JobStatus, tracing
from jobvisor.outcomes import Outcome

pytest.importorskip("opentelemetry.sdk", reason="the dev extra installs opentelemetry-sdk")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

NOW = dt.datetime.now(dt.UTC)
JOB = Job(
    uuid.uuid4(), "mail", "send_email", {}, 0, NOW, JobStatus.RUNNING, 1, 3, None, None, None,
    NOW, uuid.uuid4(), "w-1", NOW, NOW, None,
)  # fmt: skip
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.mark.parametrize(
    ("meta", "expected"),
    [
        (None, None),
        ({}, None),
        ({"trace": None}, None),
        ({"trace": "00-abc"}, None),
        ({"trace": ["traceparent"]}, None),
        ({"trace": {}}, None),
        ({"trace": {"traceparent": 7}}, None),
        ({"trace": {"traceparent": TRACEPARENT}}, {"traceparent": TRACEPARENT}),
        (
            {"trace": {"traceparent": TRACEPARENT, "tracestate": "a=1", "x": [1]}, "other": 1},
            {"traceparent": TRACEPARENT, "tracestate": "a=1"},
        ),
    ],
)
def test_only_string_headers_under_trace_are_a_carrier(
    meta: Any, expected: dict[str, str] | None
) -> None:
    assert tracing.carrier_of(dataclasses.replace(JOB, meta=meta)) == expected


@pytest.mark.parametrize("traceparent", [TRACEPARENT, "00-garbage", "ff-" + "0" * 50])
def test_a_job_with_a_malformed_carrier_still_runs_in_a_span(traceparent: str) -> None:
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    job = dataclasses.replace(JOB, meta={"trace": {"traceparent": traceparent}})
    with tracing.job_span(job, tracing.carrier_of(job), tracer_provider=tp) as span:
        span.set_outcome(Outcome.COMPLETED)
    (finished,) = exporter.get_finished_spans()
    assert finished.context is not None
    if traceparent == TRACEPARENT:
        assert finished.context.trace_id == 0x0AF7651916CD43DD8448EB211C80319C
        assert finished.parent is not None and finished.parent.span_id == 0xB7AD6B7169203331
        assert len(finished.links) == 1
    else:  # unreadable: a trace of its own
        assert finished.parent is None and not finished.links
