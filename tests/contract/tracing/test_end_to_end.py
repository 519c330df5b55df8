"""A request that enqueues jobs and the jobs' executions read as one trace,
on both engines: enqueue records the trace context in the job's `meta`, and a
real `Worker` (run in this process, with the SDK's in-memory exporter) runs
each execution in a span that is a child of, and linked to, the request's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from jobvisor import Cancel, JobContext, JobStatus, Queue, Registry, RetryPolicy
from tests.support.invariants import assert_invariants
from tests.support.tracing import run_worker

pytest.importorskip("opentelemetry.sdk", reason="the dev extra installs opentelemetry-sdk")

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

NO_WAIT = RetryPolicy(base=0.0, cap=0.0, jitter=0.0)


@pytest.fixture
def provider() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    yield tp, exporter
    tp.shutdown()


def traceparent(span: trace.Span) -> str:
    ctx = span.get_span_context()
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def named(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def assert_child_of(span: ReadableSpan, parent: ReadableSpan | trace.Span) -> None:
    expected = parent.get_span_context()
    assert span.context is not None and expected is not None
    assert span.context.trace_id == expected.trace_id
    assert span.parent is not None
    assert span.parent.span_id == expected.span_id


def test_a_request_and_the_jobs_it_enqueued_read_as_one_trace(
    url: str, queue: Queue, provider: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    tp, exporter = provider
    app_tracer = tp.get_tracer("app")
    registry = Registry()

    @registry.handler("send_email")
    async def send_email(job: JobContext) -> None:
        with app_tracer.start_as_current_span("smtp.send"):
            pass

    @registry.handler("resize_image")
    def resize_image(job: JobContext) -> None:  # runs in the thread pool
        with app_tracer.start_as_current_span("image.resize"):
            pass

    with app_tracer.start_as_current_span("POST /signup") as request:
        email = queue.enqueue("send_email", {"to": "a@example.org"}, queue="mail")
        (image,) = queue.enqueue_many([{"job_type": "resize_image", "priority": 3}])
    untraced = queue.enqueue("send_email", queue="mail")  # no span active

    expected_meta = {"trace": {"traceparent": traceparent(request)}}
    assert queue.get(email).meta == expected_meta
    assert queue.get(image).meta == expected_meta
    assert queue.get(untraced).meta is None

    jobs = run_worker(url, registry, [email, image, untraced], tracer_provider=tp)
    assert [j.status for j in jobs] == [JobStatus.COMPLETED] * 3
    assert jobs[0].meta == expected_meta  # the claim and get return it unchanged

    spans = exporter.get_finished_spans()
    (request_span,) = named(spans, "POST /signup")
    email_span, untraced_span = sorted(
        named(spans, "jobvisor.job send_email"),
        key=lambda s: (s.attributes or {})["jobvisor.job.id"] != str(email),
    )
    (image_span,) = named(spans, "jobvisor.job resize_image")
    for span, job_id, job_type, queue_name in [
        (email_span, email, "send_email", "mail"),
        (image_span, image, "resize_image", "default"),
        (untraced_span, untraced, "send_email", "mail"),
    ]:
        assert span.kind == trace.SpanKind.CONSUMER
        assert dict(span.attributes or {}) == {
            "jobvisor.job.id": str(job_id),
            "jobvisor.job.type": job_type,
            "jobvisor.job.queue": queue_name,
            "jobvisor.job.attempt": 1,
            "jobvisor.job.outcome": "completed",
        }
        assert span.status.status_code == trace.StatusCode.UNSET

    for span in (email_span, image_span):
        assert_child_of(span, request_span)
        assert [link.context.span_id for link in span.links] == [request.get_span_context().span_id]
    # The execution span is current while the handler runs, on the loop and
    # in a handler thread alike.
    for span, inner in [(email_span, "smtp.send"), (untraced_span, "smtp.send"),
                        (image_span, "image.resize")]:  # fmt: skip
        assert len(children(spans, span, inner)) == 1, (span.name, inner)
    # Enqueued outside any span: a trace of its own, with no link.
    assert untraced_span.parent is None and not untraced_span.links
    assert untraced_span.context is not None and request_span.context is not None
    assert untraced_span.context.trace_id != request_span.context.trace_id
    assert_invariants(url)


def children(
    spans: tuple[ReadableSpan, ...], parent: ReadableSpan, name: str
) -> list[ReadableSpan]:
    assert parent.context is not None
    return [
        s for s in named(spans, name)
        if s.parent is not None and s.parent.span_id == parent.context.span_id
        and s.context is not None and s.context.trace_id == parent.context.trace_id
    ]  # fmt: skip


def test_each_attempt_is_a_span_with_its_outcome(
    url: str, queue: Queue, provider: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    tp, exporter = provider
    registry = Registry()

    @registry.handler("charge_card", retry=NO_WAIT)
    async def charge_card(job: JobContext) -> None:
        raise ValueError(f"card declined on attempt {job.attempt}")

    @registry.handler("send_reminder")
    async def send_reminder(job: JobContext) -> None:
        raise Cancel("the user unsubscribed")

    with tp.get_tracer("app").start_as_current_span("POST /checkout") as request:
        charge = queue.enqueue("charge_card", max_attempts=2)
        reminder = queue.enqueue("send_reminder")

    jobs = run_worker(url, registry, [charge, reminder], tracer_provider=tp)
    assert [j.status for j in jobs] == [JobStatus.DEAD, JobStatus.CANCELLED]

    spans = exporter.get_finished_spans()
    attempts = sorted(
        named(spans, "jobvisor.job charge_card"),
        key=lambda s: str((s.attributes or {})["jobvisor.job.attempt"]),
    )
    assert [
        ((s.attributes or {})["jobvisor.job.attempt"], (s.attributes or {})["jobvisor.job.outcome"],
         s.status.status_code, s.status.description)
        for s in attempts
    ] == [
        (1, "failed", trace.StatusCode.ERROR, "ValueError: card declined on attempt 1"),
        (2, "dead", trace.StatusCode.ERROR, "ValueError: card declined on attempt 2"),
    ]  # fmt: skip
    (cancelled,) = named(spans, "jobvisor.job send_reminder")
    assert (cancelled.attributes or {})["jobvisor.job.outcome"] == "cancelled"
    assert cancelled.status.status_code == trace.StatusCode.UNSET
    for span in [*attempts, cancelled]:
        assert_child_of(span, request)
    assert_invariants(url)
