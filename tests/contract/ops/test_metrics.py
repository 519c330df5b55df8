"""The metrics aggregator: worker messages in, Prometheus exposition out."""

from __future__ import annotations

import json
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from jobvisor import Queue
from jobvisor.metrics import MESSAGE_LIMIT, Metrics, WorkerMetrics
from jobvisor.outcomes import Outcome
from jobvisor.queue.model import JobStatus
from jobvisor.queue.reports import Summary


def samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the exposition, by (name, sorted labels)."""
    out = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(metrics: Metrics, name: str, **labels: str) -> float | None:
    return samples(metrics).get((name, tuple(sorted(labels.items()))))


def test_worker_counts_reach_the_parent_through_messages() -> None:
    worker = WorkerMetrics()
    worker.claimed(3)
    worker.claimed(0)  # an empty claim is not a claim
    worker.claimed(2)
    for seconds in (0.02, 0.3, 7.0):
        worker.job_ended("mail", "send_email", Outcome.COMPLETED, seconds)
    worker.job_ended("mail", "send_email", Outcome.FAILED, 0.5)
    worker.job_ended("mail", "send_email", Outcome.DEAD, 0.5)
    worker.job_ended("default", "resize", Outcome.RELEASED, None)
    worker.lease_lost()
    messages = worker.drain()
    assert worker.drain() == []  # drained: nothing twice

    parent = Metrics()
    for message in messages:
        # What travels over the pipe: one JSON line per message.
        parent.record_worker_message(json.loads(json.dumps(message)))

    mail = {"queue": "mail", "job_type": "send_email"}
    assert value(parent, "jobvisor_jobs_completed_total", **mail) == 3
    assert value(parent, "jobvisor_jobs_failed_total", **mail) == 1
    assert value(parent, "jobvisor_jobs_dead_total", **mail) == 1
    assert value(parent, "jobvisor_jobs_released_total", queue="default", job_type="resize") == 1
    assert value(parent, "jobvisor_claims_total") == 2
    assert value(parent, "jobvisor_jobs_claimed_total") == 5
    assert value(parent, "jobvisor_lease_lost_total") == 1
    assert value(parent, "jobvisor_job_duration_seconds_count", **mail) == 5
    assert value(parent, "jobvisor_job_duration_seconds_sum", **mail) == pytest.approx(8.32)
    assert value(parent, "jobvisor_job_duration_seconds_bucket", **mail, le="0.025") == 1
    assert value(parent, "jobvisor_job_duration_seconds_bucket", **mail, le="10.0") == 5
    # The released job had no run time: counted, not observed.
    released = {"queue": "default", "job_type": "resize"}
    assert value(parent, "jobvisor_job_duration_seconds_count", **released) is None


def test_counts_from_many_workers_add_up() -> None:
    parent = Metrics()
    for _ in range(3):
        worker = WorkerMetrics()
        worker.job_ended("q", "t", Outcome.COMPLETED, 0.1)
        worker.claimed(1)
        for message in worker.drain():
            parent.record_worker_message(message)
    assert value(parent, "jobvisor_jobs_completed_total", queue="q", job_type="t") == 3
    assert value(parent, "jobvisor_claims_total") == 3


def test_a_busy_worker_splits_its_report_into_atomic_messages() -> None:
    worker = WorkerMetrics()
    for i in range(5000):
        worker.job_ended(f"queue-{i % 7}", "job-type-with-a-long-name", Outcome.COMPLETED, i / 1000)
    messages = worker.drain()
    assert len(messages) > 1
    for message in messages:
        assert len(json.dumps(message, separators=(",", ":"))) < MESSAGE_LIMIT
        assert message["t"] == "metrics"
    parent = Metrics()
    for message in messages:
        parent.record_worker_message(message)
    total = sum(
        v for (name, _), v in samples(parent).items() if name == "jobvisor_jobs_completed_total"
    )
    observed = sum(
        v for (name, _), v in samples(parent).items()
        if name == "jobvisor_job_duration_seconds_count"
    )  # fmt: skip
    assert total == observed == 5000


@pytest.mark.parametrize(
    "message",
    [
        {"t": "metrics", "claims": "many", "lease_lost": -3, "claimed": float("nan")},
        {"t": "metrics", "jobs": "not a list"},
        {"t": "metrics", "jobs": [1, None, "x", {"queue": "q"}]},
        {"t": "metrics", "jobs": [{"queue": "q", "job_type": "t", "outcome": "exploded"}]},
        {"t": "metrics", "jobs": [{"queue": 1, "job_type": "t", "outcome": "completed"}]},
        {"t": "metrics", "future_field": {"x": 1}},
    ],
)
def test_malformed_messages_change_nothing(message: dict[str, Any]) -> None:
    parent = Metrics()
    before = samples(parent)
    parent.record_worker_message(message)
    assert samples(parent) == before


def test_bad_durations_are_skipped_and_the_count_kept() -> None:
    parent = Metrics()
    parent.record_worker_message({"t": "metrics", "jobs": [
        {"queue": "q", "job_type": "t", "outcome": "completed", "count": 3,
         "seconds": [0.5, -1, "slow", float("inf"), True]},
    ]})  # fmt: skip
    assert value(parent, "jobvisor_jobs_completed_total", queue="q", job_type="t") == 3
    assert value(parent, "jobvisor_job_duration_seconds_count", queue="q", job_type="t") == 1


def test_restarts_reaps_and_workers() -> None:
    parent = Metrics()
    parent.record_restart("killed")
    parent.record_restart("killed")
    parent.record_restart("unresponsive")
    parent.record_reaped({})
    parent.record_reaped({("default", "resize"): 3, ("mail", "send"): 1})
    parent.record_reaped({("default", "resize"): 1, ("mail", "send"): 0})
    parent.set_workers(3)
    assert value(parent, "jobvisor_worker_restarts_total", reason="killed") == 2
    assert value(parent, "jobvisor_worker_restarts_total", reason="unresponsive") == 1
    assert value(parent, "jobvisor_jobs_reaped_total", queue="default", job_type="resize") == 4
    assert value(parent, "jobvisor_jobs_reaped_total", queue="mail", job_type="send") == 1
    assert value(parent, "jobvisor_workers") == 3


def test_registries_are_private() -> None:
    a, b = Metrics(), Metrics()
    a.record_restart("crashed")
    assert value(b, "jobvisor_worker_restarts_total", reason="crashed") is None


def test_queue_gauges_agree_with_the_database(queue: Queue) -> None:
    for i in range(5):
        queue.enqueue("send_email", {"n": i}, queue="mail")
    queue.enqueue("resize", queue="images")
    queue.enqueue("resize", queue="images", delay=3600)
    (job,) = queue.claim("w-test", queues=["mail"])
    queue.complete(job)
    (job,) = queue.claim("w-test", queues=["mail"])
    metrics = Metrics()
    summary = queue.summary()
    metrics.record_summary(summary)

    for name in ("mail", "images"):
        for status in JobStatus:
            got = value(metrics, "jobvisor_queue_jobs", queue=name, status=status.value)
            assert got == summary.count(status, name)
    assert value(metrics, "jobvisor_queue_jobs", queue="mail", status="pending") == 3
    assert value(metrics, "jobvisor_queue_jobs", queue="mail", status="running") == 1
    assert value(metrics, "jobvisor_queue_jobs", queue="mail", status="completed") == 1
    assert value(metrics, "jobvisor_queue_jobs", queue="images", status="pending") == 2
    age = value(metrics, "jobvisor_queue_oldest_pending_age_seconds", queue="mail")
    assert age is not None and age >= 0

    # A queue gone from the next summary leaves the gauges too.
    rest = tuple(r for r in summary.rows if r.queue != "mail")
    metrics.record_summary(Summary(rows=rest, oldest_pending_age={}))
    assert value(metrics, "jobvisor_queue_jobs", queue="mail", status="pending") is None
    assert value(metrics, "jobvisor_queue_oldest_pending_age_seconds", queue="mail") is None
    assert value(metrics, "jobvisor_queue_jobs", queue="images", status="pending") == 2


def test_the_paused_gauge_follows_pause_and_resume(queue: Queue) -> None:
    queue.enqueue("send_email", queue="mail")
    queue.enqueue("resize", queue="images")
    queue.pause("mail")
    queue.pause("idle")  # paused with no job at all: shown too
    metrics = Metrics()
    metrics.record_summary(queue.summary())
    assert value(metrics, "jobvisor_queue_paused", queue="mail") == 1
    assert value(metrics, "jobvisor_queue_paused", queue="idle") == 1
    assert value(metrics, "jobvisor_queue_paused", queue="images") == 0

    queue.resume("mail")
    queue.resume("idle")
    metrics.record_summary(queue.summary())
    assert value(metrics, "jobvisor_queue_paused", queue="mail") == 0
    assert value(metrics, "jobvisor_queue_paused", queue="idle") is None


def test_the_limit_gauge_shows_every_limit(queue: Queue) -> None:
    queue.set_limit(queue="mail", concurrency=5)
    queue.set_limit(job_type="sync", key_concurrency=2, rate="120/m", key_rate="30/m")
    metrics = Metrics()
    metrics.record_summary(queue.summary())

    def limits() -> dict[tuple[str, str, str], float]:
        return {
            (dict(labels)["scope"], dict(labels)["name"], dict(labels)["limit"]): v
            for (name, labels), v in samples(metrics).items()
            if name == "jobvisor_limit"
        }

    assert limits() == {
        ("queue", "mail", "concurrency"): 5.0,
        ("type", "sync", "key_concurrency"): 2.0,
        ("type", "sync", "rate"): 2.0,  # starts per second
        ("type", "sync", "key_rate"): 0.5,
    }
    queue.clear_limit(queue="mail")
    metrics.record_summary(queue.summary())
    assert ("queue", "mail", "concurrency") not in limits()
