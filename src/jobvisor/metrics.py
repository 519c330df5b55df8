"""Prometheus metrics, aggregated in the supervisor.

Workers never serve metrics themselves: each counts what it did and sends the
counts to its parent on the control channel as `metrics` messages
(`jobvisor.worker.protocol`); the parent folds them into one `Metrics`
registry, which `/metrics` exposes. So a scrape sees every worker, including
the ones that have since exited, and a restart loses nothing.

The `metrics` message, written by `WorkerMetrics.drain()`:

    {"t": "metrics",
     "claims": 3,                    claim statements that returned jobs (optional)
     "claimed": 5,                   jobs claimed (optional)
     "lease_lost": 0,                jobs whose lease was lost while running (optional)
     "jobs": [                       one entry per (queue, job_type, outcome) (optional)
        {"queue": "default", "job_type": "send_email", "outcome": "completed",
         "count": 2, "seconds": [0.12, 0.31]}
     ]}

`outcome` is `completed`, `failed` (will be retried), `dead` (out of
attempts), `released` (given back on shutdown), `snoozed` or `cancelled`;
`seconds` lists the run time of each of those executions (it may be shorter
than `count`, or absent). `WorkerMetrics.drain()` splits what it holds into
messages that each fit in one atomic pipe write. The aggregator ignores what
it does not understand (an unknown key, a malformed entry) instead of failing.

Everything here is a private `CollectorRegistry`, never the global one, so two
supervisors in one process (tests) do not collide.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Literal, NotRequired, TypedDict

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from .outcomes import Outcome
from .queue import validate
from .queue.model import JobStatus, Limit
from .queue.reports import Summary

__all__ = ["Metrics", "WorkerMetrics"]

DURATION_BUCKETS: Final = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
    1800.0,
    3600.0,
)
MESSAGE_LIMIT: Final = 3072  # bytes of JSON per message: below PIPE_BUF (4096) with room


class MetricsJob(TypedDict):
    """One job type's executions with one outcome since the last message."""

    queue: str
    job_type: str
    outcome: Outcome
    count: int
    seconds: list[float]


class MetricsMessage(TypedDict):
    """A worker's counts since its last message, on the control channel
    (`jobvisor.worker.protocol`) as `{"t": "metrics", ...}`."""

    t: Literal["metrics"]
    claims: NotRequired[int]
    claimed: NotRequired[int]
    lease_lost: NotRequired[int]
    jobs: NotRequired[list[MetricsJob]]


def _count(value: Any) -> int:
    """A non-negative integer from a message field, or 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if not math.isfinite(value) or value < 0:
        return 0
    return int(value)


def _duration(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


def _durations(seconds: object) -> list[float]:
    """The valid durations of a job entry's `seconds`: one number or a list."""
    if isinstance(seconds, int | float) and not isinstance(seconds, bool):
        seconds = [seconds]
    return [v for v in seconds if _duration(v)] if isinstance(seconds, list) else []


def _label(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


class Metrics:
    """Every jobvisor metric, in one private registry.

        The supervisor calls `record_worker_message` for each `metrics` message,
        `record_summary` after each status summary, `record_workflows` after each
    count of the workflows by state, `record_oldest_xmin` after
        each look at the database's horizon, `record_restart` when it
        replaces a worker, `record_reaped` after each reap, and `set_workers`
        whenever the number of live workers changes. `exposition()` is the body
        of `/metrics`.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        labels = ("queue", "job_type")
        self.completed = Counter(
            "jobvisor_jobs_completed", "Jobs that completed.", labels, registry=r
        )
        self.failed = Counter(
            "jobvisor_jobs_failed",
            "Job executions that failed and will be retried.",
            labels,
            registry=r,
        )
        self.dead = Counter(
            "jobvisor_jobs_dead", "Jobs that failed with no attempts left.", labels, registry=r
        )
        self.released = Counter(
            "jobvisor_jobs_released",
            "Running jobs given back to the queue on shutdown (attempt not counted).",
            labels,
            registry=r,
        )
        self.snoozed = Counter(
            "jobvisor_jobs_snoozed", "Jobs whose handler asked to run later.", labels, registry=r
        )
        self.cancelled = Counter(
            "jobvisor_jobs_cancelled", "Jobs their handler cancelled.", labels, registry=r
        )
        self.reaped = Counter(
            "jobvisor_jobs_reaped",
            "Jobs whose lease expired and were taken back by the reaper.",
            labels,
            registry=r,
        )
        self.schedule_fired = Counter(
            "jobvisor_schedule_fired",
            "Jobs enqueued by a schedule's ticks.",
            ["schedule"],
            registry=r,
        )
        self.schedule_lag = Histogram(
            "jobvisor_schedule_lag_seconds",
            "From a schedule's tick to its job's enqueue.",
            buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0, 60.0, 300.0),
            registry=r,
        )
        self.duration = Histogram(
            "jobvisor_job_duration_seconds",
            "How long one execution of a job ran.",
            labels,
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.queue_jobs = Gauge(
            "jobvisor_queue_jobs",
            "Jobs in the database by queue and status.",
            ("queue", "status"),
            registry=r,
        )
        self.oldest_pending_age = Gauge(
            "jobvisor_queue_oldest_pending_age_seconds",
            "Age of the oldest job that is due and not yet claimed, by queue.",
            ("queue",),
            registry=r,
        )
        self.queue_paused = Gauge(
            "jobvisor_queue_paused",
            "1 while the queue is paused (no claim takes its jobs), else 0.",
            ("queue",),
            registry=r,
        )
        self.limit = Gauge(
            "jobvisor_limit",
            "A fleet-wide limit: running jobs (concurrency, key_concurrency) or starts"
            " per second (rate, key_rate), by scope (queue or type) and name.",
            ("scope", "name", "limit"),
            registry=r,
        )
        self.workflows = Gauge(
            "jobvisor_workflows",
            "Workflows in the database by state: active (a job unfinished), completed"
            " (every job completed) or failed (every job finished, one dead or cancelled);"
            " reported by the leader only.",
            ("state",),
            registry=r,
        )
        self.claims = Counter(
            "jobvisor_claims", "Claim statements that returned at least one job.", registry=r
        )
        self.claimed = Counter("jobvisor_jobs_claimed", "Jobs claimed by workers.", registry=r)
        self.worker_restarts = Counter(
            "jobvisor_worker_restarts", "Workers replaced, by reason.", ("reason",), registry=r
        )
        self.lease_lost = Counter(
            "jobvisor_lease_lost",
            "Running jobs whose lease was lost (expired or taken by another worker).",
            registry=r,
        )
        self.workers = Gauge("jobvisor_workers", "Worker processes alive.", registry=r)
        self.slots_cannot_boot = Gauge(
            "jobvisor_worker_slots_cannot_boot",
            "Worker slots whose replacement cannot boot (a deploy broken after a good"
            " start); retried with backoff.",
            registry=r,
        )
        self.oldest_xmin_age = Gauge(
            "jobvisor_db_oldest_xmin_age_seconds",
            "How long the transaction holding back the database's oldest xmin has been open"
            " (PostgreSQL; 0 when none is).",
            registry=r,
        )
        self._by_outcome: dict[str, Counter] = {
            Outcome.COMPLETED: self.completed,
            Outcome.FAILED: self.failed,
            Outcome.DEAD: self.dead,
            Outcome.RELEASED: self.released,
            Outcome.SNOOZED: self.snoozed,
            Outcome.CANCELLED: self.cancelled,
        }

    def record_worker_message(self, message: Mapping[str, Any]) -> None:
        """Fold one `metrics` message from a worker into the totals."""
        self.claims.inc(_count(message.get("claims")))
        self.claimed.inc(_count(message.get("claimed")))
        self.lease_lost.inc(_count(message.get("lease_lost")))
        jobs = message.get("jobs")
        if not isinstance(jobs, list):
            return
        for entry in jobs:
            if not isinstance(entry, Mapping):
                continue
            queue, job_type = _label(entry.get("queue")), _label(entry.get("job_type"))
            counter = self._by_outcome.get(entry.get("outcome"))  # type: ignore[arg-type]
            if queue is None or job_type is None or counter is None:
                continue
            counter.labels(queue, job_type).inc(_count(entry.get("count", 1)))
            observed = _durations(entry.get("seconds"))
            if observed:
                histogram = self.duration.labels(queue, job_type)
                for value in observed:
                    histogram.observe(value)

    def record_summary(self, summary: Summary) -> None:
        """Set the queue gauges from a status summary; queues gone since the
        last one disappear from the output."""
        self.queue_jobs.clear()
        self.oldest_pending_age.clear()
        for name in sorted({r.queue for r in summary.rows}):
            for status in JobStatus:
                self.queue_jobs.labels(name, status.value).set(summary.count(status, name))
            self.oldest_pending_age.labels(name).set(summary.oldest_pending_age.get(name, 0.0))
        self.queue_paused.clear()
        for name in summary.queues():
            self.queue_paused.labels(name).set(1 if name in summary.paused else 0)
        self.limit.clear()
        for lim in summary.limits:
            for kind, value in _limit_values(lim):
                self.limit.labels(lim.scope.value, lim.name, kind).set(value)

    def record_workflows(self, states: Mapping[str, int] | None) -> None:
        """Set the workflow gauge from a count by state; None (this
        supervisor does not lead) removes it, so that only the leader's
        figures are scraped and a sum over supervisors counts each once."""
        self.workflows.clear()
        for state, count in sorted((states or {}).items()):
            self.workflows.labels(str(state)).set(count)

    def record_restart(self, reason: str) -> None:
        """A worker was replaced: `crashed`, `killed` (a signal; SIGKILL is
        usually the OOM killer), `unresponsive` (missed heartbeats),
        `hard_limit` (a job overran its hard time limit), `unavailable` (the
        database could not be reached at boot), `boot_failed` (a replacement
        that cannot boot after a good start) or `reload` (SIGHUP); the
        values of `supervisor.decisions.RestartReason`."""
        self.worker_restarts.labels(reason or "unknown").inc()

    def record_reaped(self, by_type: Mapping[tuple[str, str], int]) -> None:
        """Expired leases the reaper took back, by (queue, job type)."""
        for (queue, job_type), count in by_type.items():
            if count > 0:
                self.reaped.labels(queue, job_type).inc(count)

    def record_schedule_fired(self, schedule: str, lags: Sequence[float]) -> None:
        """The jobs one schedule's tick(s) enqueued, with each tick's lag."""
        self.schedule_fired.labels(schedule).inc(len(lags))
        for lag in lags:
            self.schedule_lag.observe(max(lag, 0.0))

    def record_oldest_xmin(self, age: float) -> None:
        """Seconds the transaction holding the database's oldest xmin has
        been open; 0 when no other session holds one."""
        self.oldest_xmin_age.set(age)

    def set_workers(self, alive: int, *, cannot_boot: int = 0) -> None:
        self.workers.set(alive)
        self.slots_cannot_boot.set(cannot_boot)

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format, version 0.0.4."""
        return generate_latest(self.registry)


class WorkerMetrics:
    """What one worker counts between two `metrics` messages.

    The worker calls `job_ended` for each execution, `claimed` after each claim
    and `lease_lost` when a lease is lost; every few seconds it sends each
    message of `drain()` on its control channel.
    """

    def __init__(self) -> None:
        self._claims = 0
        self._claimed = 0
        self._lease_lost = 0
        self._jobs: dict[tuple[str, str, Outcome], tuple[int, list[float]]] = {}

    def job_ended(self, queue: str, job_type: str, outcome: Outcome, seconds: float | None) -> None:
        count, durations = self._jobs.get((queue, job_type, outcome), (0, []))
        if seconds is not None:
            durations.append(round(seconds, 6))
        self._jobs[(queue, job_type, outcome)] = (count + 1, durations)

    def claimed(self, jobs: int) -> None:
        if jobs > 0:
            self._claims += 1
            self._claimed += jobs

    def lease_lost(self, jobs: int = 1) -> None:
        self._lease_lost += jobs

    def drain(self) -> list[MetricsMessage]:
        """The counts since the last call, as messages that each encode to
        under `MESSAGE_LIMIT` bytes; empty when there is nothing to report."""
        messages: list[MetricsMessage] = []
        head: MetricsMessage = {"t": "metrics"}
        if self._claims:
            head["claims"], head["claimed"] = self._claims, self._claimed
        if self._lease_lost:
            head["lease_lost"] = self._lease_lost
        entries = list(self._entries())
        self._claims = self._claimed = self._lease_lost = 0
        self._jobs = {}
        current, size = head, _size(head)
        for entry in entries:
            cost = _size(entry) + 10
            if "jobs" in current and size + cost > MESSAGE_LIMIT:
                messages.append(current)
                current = {"t": "metrics"}
                size = _size(current)
            current.setdefault("jobs", []).append(entry)
            size += cost
        if len(current) > 1:
            messages.append(current)
        return messages

    def _entries(self) -> Iterable[MetricsJob]:
        for (queue, job_type, outcome), (count, durations) in sorted(self._jobs.items()):
            # Long lists of durations are split so that one entry fits a message.
            step = 100
            for start in range(0, max(count, 1), step):
                chunk = durations[start : start + step]
                n = min(step, count - start)
                yield {
                    "queue": queue,
                    "job_type": job_type,
                    "outcome": outcome,
                    "count": n,
                    "seconds": chunk,
                }


def _size(message: Mapping[str, Any]) -> int:
    return len(json.dumps(message, separators=(",", ":")))


def _limit_values(limit: Limit) -> list[tuple[str, float]]:
    """(which, value) of each limit a group has; a rate as starts per second."""
    values: list[tuple[str, float]] = []
    if limit.concurrency is not None:
        values.append(("concurrency", float(limit.concurrency)))
    if limit.key_concurrency is not None:
        values.append(("key_concurrency", float(limit.key_concurrency)))
    for which, text in (("rate", limit.rate), ("key_rate", limit.key_rate)):
        rate = validate.rate(which, text)
        if rate is not None:
            values.append((which, rate[0] / rate[1]))
    return values
