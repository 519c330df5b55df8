"""The application a real worker process loads in the tracing tests
(`JOBVISOR_APP=tests.service.tracing.app:registry`). As an application would, it sets
the global OpenTelemetry tracer provider up when imported; its exporter
appends each finished span as a JSON line to the file named by
`TRACING_TEST_SPANS`, so the test reads the worker's spans."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from jobvisor import JobContext, Registry
from tests.support.tracing import SPANS_ENV


class JsonLinesExporter(SpanExporter):
    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = [json.dumps(describe(span)) + "\n" for span in spans]
        with self.lock, open(self.path, "a", encoding="utf-8") as out:
            out.writelines(lines)
        return SpanExportResult.SUCCESS


def describe(span: ReadableSpan) -> dict[str, object]:
    assert span.context is not None
    return {
        "name": span.name,
        "trace_id": f"{span.context.trace_id:032x}",
        "span_id": f"{span.context.span_id:016x}",
        "parent_span_id": f"{span.parent.span_id:016x}" if span.parent else None,
        "links": [f"{link.context.span_id:016x}" for link in span.links],
        "attributes": dict(span.attributes or {}),
        "status": span.status.status_code.name,
    }


provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(os.environ[SPANS_ENV])))
trace.set_tracer_provider(provider)

registry = Registry()


@registry.handler("send_email")
async def send_email(job: JobContext) -> None:
    with trace.get_tracer("testapp").start_as_current_span("smtp.send"):
        pass
