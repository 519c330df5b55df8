"""The Registry: registering handlers, their options, and loading an app."""

from __future__ import annotations

import datetime as dt
import re
import uuid
from typing import Any

import pytest

from jobvisor import (
    Cancel,
    InvalidArgument,
    Job,
    JobContext,
    JobStatus,
    Registry,
    RetryPolicy,
    Snooze,
)
from jobvisor.errortext import error_text
from jobvisor.queue import Limit, LimitScope, LimitSource
from jobvisor.worker import AppError, load_app
from jobvisor.worker.registry import InvalidLimit

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def make_job(**fields: object) -> Job:
    values: dict[str, object] = dict(
        id=uuid.uuid4(), queue="default", job_type="send_email", payload={"to": "x"},
        priority=0, run_at=NOW, status=JobStatus.RUNNING, attempts=2, max_attempts=5,
        last_error=None, correlation_id="corr", dedupe_key=None, lease_expires_at=NOW,
        claim_token=uuid.uuid4(), worker_id="w-1", created_at=NOW, started_at=NOW,
        finished_at=None,
    )  # fmt: skip
    values.update(fields)
    return Job(**values)  # type: ignore[arg-type]


def test_async_and_plain_handlers_are_told_apart() -> None:
    registry = Registry()

    @registry.handler("a", timeout=5, hard_timeout=10, max_attempts=3)
    async def a(job: JobContext) -> None:
        pass

    @registry.handler("b")
    def b(job: JobContext) -> None:
        pass

    handler_a, handler_b = registry.get("a"), registry.get("b")
    assert handler_a is not None and handler_b is not None
    assert handler_a.is_async and not handler_b.is_async
    assert (handler_a.timeout, handler_a.hard_timeout, handler_a.max_attempts) == (5.0, 10.0, 3)
    assert registry.job_types == ["a", "b"] and "a" in registry and len(registry) == 2
    assert registry.needs_threads
    assert registry.get("c") is None


def test_job_builds_enqueue_arguments_with_the_handlers_max_attempts() -> None:
    registry = Registry()
    registry.add("send_email", lambda job: None, max_attempts=4)
    registry.add("other", lambda job: None)
    assert registry.job("send_email", {"to": "a"}) == {
        "job_type": "send_email", "payload": {"to": "a"}, "max_attempts": 4,
    }  # fmt: skip
    assert registry.job("send_email", None, max_attempts=9, queue="q")["max_attempts"] == 9
    assert "max_attempts" not in registry.job("other")
    with pytest.raises(InvalidArgument, match=r"job_type='nope': no handler registered"):
        registry.job("nope")


def test_retry_policies_map_types_to_their_backoff() -> None:
    registry = Registry()
    policy = RetryPolicy(base=2.0, cap=10.0)
    registry.add("a", lambda job: None, retry=policy)
    registry.add("b", lambda job: None)
    assert registry.retry_policies() == {"a": policy}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"timeout": 0}, "timeout=0: expected positive seconds"),
        ({"timeout": "5"}, "timeout='5': expected positive seconds"),
        ({"hard_timeout": -1}, "hard_timeout=-1"),
        ({"timeout": 10, "hard_timeout": 5}, "hard_timeout=5: expected at least timeout=10"),
        ({"max_attempts": 0}, "max_attempts=0: expected an integer >= 1"),
        ({"max_attempts": True}, "max_attempts=True"),
        ({"retry": 3}, "retry=3: expected a jobvisor.RetryPolicy"),
    ],
)
def test_bad_handler_options_are_refused(options: dict[str, object], message: str) -> None:
    registry = Registry()
    with pytest.raises(InvalidArgument, match=message.replace("(", r"\(")):
        registry.add("a", lambda job: None, **options)  # type: ignore[arg-type]
    assert len(registry) == 0


def test_a_job_type_is_registered_once_and_must_be_a_name() -> None:
    registry = Registry()
    registry.add("a", lambda job: None)
    with pytest.raises(InvalidArgument, match="already registered"):
        registry.add("a", lambda job: None)
    with pytest.raises(InvalidArgument, match="job_type=' ': expected a non-empty string"):
        registry.add(" ", lambda job: None)
    with pytest.raises(InvalidArgument, match="is not callable"):
        registry.add("b", "not a function")  # type: ignore[arg-type]


def test_the_context_exposes_the_job_and_raises_to_snooze_or_cancel() -> None:
    job = make_job()
    context = JobContext(job, "w-1")
    assert (context.id, context.job_type, context.queue) == (job.id, "send_email", "default")
    assert (context.payload, context.attempt, context.max_attempts) == ({"to": "x"}, 2, 5)
    assert context.correlation_id == "corr"
    with pytest.raises(Snooze) as snoozed:
        context.snooze(dt.timedelta(minutes=1))
    assert snoozed.value.delay == 60.0
    with pytest.raises(Cancel) as cancelled:
        context.cancel("done elsewhere")
    assert cancelled.value.reason == "done elsewhere"
    with pytest.raises(InvalidArgument, match="snooze delay=-1"):
        context.snooze(-1)
    with pytest.raises(InvalidArgument, match="cancel reason=''"):
        context.cancel("")


def test_load_app_names_what_is_wrong() -> None:
    assert isinstance(load_app("jobvisor.example:registry"), Registry)
    with pytest.raises(AppError, match="expected module:attribute"):
        load_app("jobvisor.example")
    with pytest.raises(AppError, match="cannot import 'no_such_module_here'"):
        load_app("no_such_module_here:registry")
    with pytest.raises(AppError, match="has no 'nothing'"):
        load_app("jobvisor.example:nothing")
    with pytest.raises(AppError, match="expected a jobvisor Registry, got function"):
        load_app("jobvisor.example:seed")


def test_error_text_is_one_line_then_the_innermost_frames() -> None:
    message = "first line\nsecond line"

    def inner() -> None:
        raise ValueError(message)

    try:
        inner()
    except ValueError as exc:
        text = error_text(exc)
    head, _, frames = text.partition("\n")
    assert head == "ValueError: first line"
    assert "in inner" in frames and "second line" not in text
    assert error_text(RuntimeError()) == "RuntimeError"


def test_a_handler_declares_its_fleet_wide_limits() -> None:
    registry = Registry()

    @registry.handler("report", concurrency=3)
    async def report(job: JobContext) -> None: ...

    @registry.handler("sync", key_concurrency=1, rate="20/s")
    def sync(job: JobContext) -> None: ...

    @registry.handler("plain")
    async def plain(job: JobContext) -> None: ...

    @registry.handler("tenant", key_rate="5/s")
    async def tenant(job: JobContext) -> None: ...

    assert registry.limits == [
        Limit(LimitScope.TYPE, "report", concurrency=3, source=LimitSource.CODE),
        Limit(LimitScope.TYPE, "sync", key_concurrency=1, rate="20/s", source=LimitSource.CODE),
        Limit(LimitScope.TYPE, "tenant", key_rate="5/s", source=LimitSource.CODE),
    ]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"concurrency": 0}, "handler for 't': concurrency=0: expected an integer >= 1"),
        ({"key_concurrency": -1}, "key_concurrency=-1"),
        ({"rate": "20 per second"}, "rate='20 per second': expected a rate such as"),
        ({"rate": "20/d"}, "rate='20/d'"),
        ({"key_rate": "5"}, "handler for 't': key_rate='5': expected a rate such as"),
        ({"rate": "5/s", "key_rate": 5}, "key_rate=5"),
    ],
)
def test_a_bad_declared_limit_is_refused_at_registration(
    options: dict[str, Any], message: str
) -> None:
    registry = Registry()
    with pytest.raises(InvalidLimit, match=re.escape(message)):
        registry.add("t", lambda job: None, **options)
    assert "t" not in registry
