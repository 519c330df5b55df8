"""OpenTelemetry tracing, when the `jobvisor[otel]` extra is installed.

A request that enqueues a job and the job's execution should read as one
trace. Two hooks do it:

- At enqueue, `inject()` returns the current trace context as W3C headers
  (`{"traceparent": "00-…", "tracestate": …}`, through the globally
  configured propagator), or None when there is nothing to record: the
  extra is missing, or no span is active. The enqueuer stores that carrier
  with the job.
- In the worker, `job_span(job, carrier)` wraps one execution in a CONSUMER
  span named `jobvisor.job <job_type>`, a child of the enqueuing span and
  linked to it, with the job's id, type, queue and attempt as attributes; the
  worker calls `span.set_outcome(outcome)` (an `Outcome`: completed, failed,
  dead, released…) before it leaves, and an exception escaping the block marks the span
  as an error.

Where the carrier lives: the job row's nullable JSON `meta` column
(migration 0002). `enqueue` and `enqueue_many` store `{"trace": inject()}`
there when a span is active, so the payload stays the caller's own; the
worker reads it back with `carrier_of(job)` and runs each execution inside
`job_span`.

Without the extra nothing changes: `opentelemetry` is imported on first use
only, `inject()` returns None and `job_span` yields a span that does nothing.
The first use also decides for the rest of the process (`available()`).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from .outcomes import Outcome
from .version import __version__

ATTR_JOB_ID = "jobvisor.job.id"
ATTR_JOB_TYPE = "jobvisor.job.type"
ATTR_QUEUE = "jobvisor.job.queue"
ATTR_ATTEMPT = "jobvisor.job.attempt"
ATTR_OUTCOME = "jobvisor.job.outcome"
FAILED_OUTCOMES = frozenset({Outcome.FAILED, Outcome.DEAD})


class TracedJob(Protocol):
    """What a span reads of a job (`jobvisor.Job` has it): the queue imports
    this module at enqueue, so it names no queue type."""

    @property
    def id(self) -> object: ...
    @property
    def job_type(self) -> str: ...
    @property
    def queue(self) -> str: ...
    @property
    def attempts(self) -> int: ...
    @property
    def meta(self) -> dict[str, Any] | None: ...


@functools.cache
def available() -> bool:
    """True when opentelemetry-api can be imported (checked once)."""
    try:
        return importlib.util.find_spec("opentelemetry.trace") is not None
    except (ImportError, ValueError):
        return False


def recording(tracer_provider: Any = None) -> bool:
    """True when executions should get spans: opentelemetry-api is installed
    and a tracer provider is configured (given here, or set globally by the
    time the app module has been imported). Without a provider every span
    would be a no-op, and wrapping each job in one costs a worker about a
    sixth of its time on no-op jobs."""
    if not available():
        return False
    if tracer_provider is not None:
        return True
    from opentelemetry import trace  # noqa: PLC0415 - optional extra

    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


def inject() -> dict[str, str] | None:
    """The current trace context as a carrier of W3C headers, or None."""
    if not available():
        return None
    from opentelemetry import propagate, trace  # noqa: PLC0415 - optional extra

    if not trace.get_current_span().get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier or None


def carrier_of(job: TracedJob) -> dict[str, str] | None:
    """The trace carrier recorded with `job` at enqueue, or None. Only string
    headers are kept: `meta` is a column anyone with SQL access can write."""
    found = job.meta.get("trace") if isinstance(job.meta, dict) else None
    if not isinstance(found, dict):
        return None
    headers = {k: v for k, v in found.items() if isinstance(k, str) and isinstance(v, str)}
    return headers or None


class JobSpan(Protocol):
    def set_outcome(self, outcome: Outcome, *, error: str | None = None) -> None: ...


class _NoSpan:
    def set_outcome(self, outcome: Outcome, *, error: str | None = None) -> None:
        return None


class _OtelSpan:
    def __init__(self, span: Any) -> None:
        self.span = span

    def set_outcome(self, outcome: Outcome, *, error: str | None = None) -> None:
        from opentelemetry.trace import Status, StatusCode  # noqa: PLC0415 - optional extra

        self.span.set_attribute(ATTR_OUTCOME, outcome)
        if outcome in FAILED_OUTCOMES:
            self.span.set_status(Status(StatusCode.ERROR, error))


@contextlib.contextmanager
def job_span(
    job: TracedJob, carrier: Mapping[str, str] | None, *, tracer_provider: Any = None
) -> Iterator[JobSpan]:
    """One execution of `job` as a span, child of and linked to the context
    in `carrier` (from `inject()` at enqueue; None starts a new trace).
    `tracer_provider` defaults to the global one."""
    if not available():
        yield _NoSpan()
        return
    from opentelemetry import propagate, trace  # noqa: PLC0415 - optional extra

    parent = propagate.extract(dict(carrier)) if carrier else None
    links = []
    if parent is not None:
        enqueuer = trace.get_current_span(parent).get_span_context()
        if enqueuer.is_valid:
            links.append(trace.Link(enqueuer, {"jobvisor.link": "enqueued_by"}))
    tracer = trace.get_tracer("jobvisor", __version__, tracer_provider=tracer_provider)
    attributes: dict[str, str | int] = {
        ATTR_JOB_ID: str(job.id),
        ATTR_JOB_TYPE: job.job_type,
        ATTR_QUEUE: job.queue,
        ATTR_ATTEMPT: job.attempts,
    }
    with tracer.start_as_current_span(
        f"jobvisor.job {job.job_type}",
        context=parent,
        kind=trace.SpanKind.CONSUMER,
        links=links,
        attributes=attributes,
    ) as span:
        yield _OtelSpan(span)
