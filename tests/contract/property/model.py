"""A small pure-Python model of the queue, for the state-machine test.

It knows only what DESIGN.md promises: statuses, attempts, `run_at`, lease
expiry, claim tokens, dedupe keys and the clock. Times are seconds from the
test's epoch (the injected clock's start), so both engines compare exactly.
Each method applies one operation and returns what the queue should answer;
the claim tokens themselves come from the database and are recorded with
`hold`."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable, Sequence

from jobvisor.queue.ops.recovery import CRASH_LIMIT

LIVE = frozenset({"pending", "running", "retryable"})
TERMINAL = frozenset({"completed", "dead", "cancelled"})


@dataclasses.dataclass(slots=True)
class ModelJob:
    id: uuid.UUID
    queue: str
    job_type: str
    priority: int
    run_at: float
    max_attempts: int
    dedupe_key: str | None
    status: str = "pending"
    attempts: int = 0
    token: uuid.UUID | None = None
    worker_id: str | None = None
    lease_expires_at: float | None = None
    finished_at: float | None = None
    cancel_requested: bool = False  # `cancel` of the running job: whatever settles it cancels it
    crashes: int = 0  # deaths of its workers of no known cause since it was last charged for one
    concurrency_key: str | None = None

    def row(self) -> tuple[object, ...]:
        """What the jobs table should hold for this job (worker only while running)."""
        return (
            self.status,
            self.attempts,
            self.max_attempts,
            self.run_at,
            self.lease_expires_at,
            self.token,
            self.worker_id if self.status == "running" else None,
            self.finished_at,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class Handle:
    """What a worker holds after a claim: the job's id and its claim token."""

    id: uuid.UUID
    token: uuid.UUID


class QueueModel:
    """The queue as a dict of jobs and a clock."""

    def __init__(self) -> None:
        self.now = 0.0
        self.jobs: dict[uuid.UUID, ModelJob] = {}
        self.paused: set[str] = set()  # no claim takes a job of these queues
        # (kind, name) -> (concurrency, key_concurrency): the fleet-wide limits
        self.limits: dict[tuple[str, str], tuple[int | None, int | None]] = {}

    # --- enqueue --------------------------------------------------------------

    def live_holder(self, dedupe_key: str | None) -> uuid.UUID | None:
        """The live job holding a dedupe key, if any."""
        if dedupe_key is None:
            return None
        for job in self.jobs.values():
            if job.dedupe_key == dedupe_key and job.status in LIVE:
                return job.id
        return None

    def enqueue(
        self,
        job_id: uuid.UUID,
        *,
        queue: str,
        job_type: str,
        priority: int,
        delay: float,
        max_attempts: int,
        dedupe_key: str | None,
        concurrency_key: str | None = None,
    ) -> None:
        """Record a job the queue reported as new (callers check `live_holder` first)."""
        assert job_id not in self.jobs, f"the queue reused id {job_id} for a new job"
        self.jobs[job_id] = ModelJob(
            id=job_id, queue=queue, job_type=job_type, priority=priority,
            run_at=self.now + delay, max_attempts=max_attempts, dedupe_key=dedupe_key,
            concurrency_key=concurrency_key,
        )  # fmt: skip

    # --- claims and their outcomes -------------------------------------------

    def _due(self, queues: Sequence[str] | None, job_types: Sequence[str] | None) -> list[ModelJob]:
        due = [
            j
            for j in self.jobs.values()
            if j.status in ("pending", "retryable")
            and j.run_at <= self.now
            and (not queues or j.queue in queues)
            and (not job_types or j.job_type in job_types)
            and j.queue not in self.paused
        ]
        due.sort(key=lambda j: (-j.priority, j.run_at, j.id))
        return due

    def limited(self, job: ModelJob) -> bool:
        return ("type", job.job_type) in self.limits or ("queue", job.queue) in self.limits

    def claimable(
        self, *, limit: int, queues: Sequence[str] | None, job_types: Sequence[str] | None
    ) -> list[list[uuid.UUID]]:
        """The ids a claim may take, in claim order: one answer without
        limits; with them, the plain claim first, the limited one first, or
        the limited one alone (a plain claim that came back short is not
        tried again for a moment)."""
        due = self._due(queues, job_types)
        plain = [j for j in due if not self.limited(j)]
        if not self.limits:
            return [[j.id for j in plain[:limit]]]
        limited = [j for j in due if self.limited(j)]
        first_plain = [j.id for j in plain[:limit]]
        first_plain += self._within_limits(limited, limit - len(first_plain))
        first_limited = self._within_limits(limited, limit)
        first_limited += [j.id for j in plain[: limit - len(first_limited)]]
        only_limited = self._within_limits(limited, limit)  # the plain claim skipped a while
        order = {j.id: (-j.priority, j.run_at, j.id) for j in due}
        return [
            sorted(ids, key=order.__getitem__) for ids in (first_plain, first_limited, only_limited)
        ]

    def running(self, kind: str, name: str, key: str | None = None) -> int:
        """Running jobs of a type or queue (of one concurrency key, with `key`)."""
        return sum(
            1
            for j in self.jobs.values()
            if j.status == "running"
            and (j.job_type if kind == "type" else j.queue) == name
            and (key is None or j.concurrency_key == key)
        )

    def _room(self, kind: str, name: str) -> float:
        concurrency = self.limits.get((kind, name), (None, None))[0]
        return float("inf") if concurrency is None else concurrency - self.running(kind, name)

    def _key_room(self, job: ModelJob) -> float:
        per_key = self.limits.get(("type", job.job_type), (None, None))[1]
        if per_key is None or job.concurrency_key is None:
            return float("inf")
        return per_key - self.running("type", job.job_type, job.concurrency_key)

    def _within_limits(self, limited: list[ModelJob], n: int) -> list[uuid.UUID]:
        """The limited claim: candidates of groups with room, ranked per key,
        then per type, then per queue, within each one's room."""
        if n <= 0 or not any(self._room(k, name) > 0 for k, name in self.limits):
            return []
        passed = [
            j
            for j in limited
            if self._room("type", j.job_type) > 0
            and self._room("queue", j.queue) > 0
            and self._key_room(j) > 0
        ]
        for group, room in (
            (lambda j: (j.job_type, j.concurrency_key), self._key_room),
            (lambda j: j.job_type, lambda j: self._room("type", j.job_type)),
            (lambda j: j.queue, lambda j: self._room("queue", j.queue)),
        ):
            ranks: dict[object, int] = {}
            kept = []
            for job in passed:
                ranks[group(job)] = ranks.get(group(job), 0) + 1
                if ranks[group(job)] <= room(job):
                    kept.append(job)
            passed = kept
        return [j.id for j in passed[:n]]

    def hold(self, job_id: uuid.UUID, token: uuid.UUID, worker_id: str, lease: float) -> None:
        """A claim took this job: count the attempt, record the database's token."""
        job = self.jobs[job_id]
        job.status = "running"
        job.attempts += 1
        job.token = token
        job.worker_id = worker_id
        job.lease_expires_at = self.now + lease

    def held(self, handle: Handle) -> ModelJob | None:
        """The job if `handle` still holds its claim, else None (lease lost)."""
        job = self.jobs.get(handle.id)
        if job is None or job.status != "running" or job.token != handle.token:
            return None
        return job

    def _unhold(self, job: ModelJob, status: str) -> None:
        if job.cancel_requested:
            status = "cancelled"
        job.status = status
        job.token = None
        job.lease_expires_at = None
        if status in TERMINAL:
            job.finished_at = self.now

    def renew(self, handles: Iterable[Handle], lease: float) -> list[Handle]:
        """Extend the held leases; returns the handles that lost theirs."""
        lost = []
        for handle in handles:
            job = self.held(handle)
            if job is None:
                lost.append(handle)
            else:
                job.lease_expires_at = self.now + lease
        return lost

    def complete(self, handle: Handle) -> bool:
        job = self.held(handle)
        if job is None:
            return False
        self._unhold(job, "completed")
        return True

    def _spent_or_retry(self, job: ModelJob, delay: float) -> str:
        if job.attempts >= job.max_attempts or job.cancel_requested:
            self._unhold(job, "dead")
        else:
            self._unhold(job, "retryable")
            job.run_at = self.now + delay
        return job.status

    def fail(self, handle: Handle, retry_in: float) -> str | None:
        """The new status, or None when the lease was lost."""
        job = self.held(handle)
        return None if job is None else self._spent_or_retry(job, retry_in)

    def snooze(self, handle: Handle, delay: float) -> bool:
        job = self.held(handle)
        if job is None:
            return False
        self._unhold(job, "pending")
        job.attempts -= 1
        job.run_at = self.now + delay
        return True

    def release(self, handle: Handle) -> bool:
        return self.snooze(handle, 0.0)

    def cancel_held(self, handle: Handle) -> bool:
        job = self.held(handle)
        if job is None:
            return False
        self._unhold(job, "cancelled")
        return True

    # --- recovery -------------------------------------------------------------

    def reap_expired(self, *, base: float, cap: float) -> int:
        """Expired leases back to retryable (deterministic backoff) or dead."""
        expired = [
            j
            for j in self.jobs.values()
            if j.status == "running" and j.lease_expires_at is not None
            and j.lease_expires_at < self.now
        ]  # fmt: skip
        for job in expired:
            self._spent_or_retry(job, min(cap, base * 2.0 ** max(job.attempts - 1, 0)))
        return len(expired)

    def requeue_crashed(self, worker_id: str, culprit: uuid.UUID | None = None) -> int:
        """A worker died: a charged job is back now with its attempt counted,
        the others are released with it given back. With a culprit only that
        one is charged; without one, a job that ran alone, or one at its
        `CRASH_LIMIT`-th crash since it was last charged (the others count one
        more crash)."""
        held = [j for j in self.jobs.values() if j.status == "running" and j.worker_id == worker_id]
        alone = len(held) == 1
        for job in held:
            if culprit is not None:
                charged = job.id == culprit
            else:
                charged = alone or job.crashes + 1 >= CRASH_LIMIT
            if charged:
                job.crashes = 0
                self._spent_or_retry(job, 0.0)
            else:
                if culprit is None:
                    job.crashes += 1
                self._unhold(job, "pending")
                job.attempts -= 1
                if not job.cancel_requested:
                    job.run_at = self.now
        return len(held)

    # --- retention and operators ---------------------------------------------

    def cleanup(self, ages: dict[str, float]) -> int:
        """Delete terminal jobs finished more than their status's age ago."""
        gone = [
            j.id
            for j in self.jobs.values()
            if j.status in ages and j.finished_at is not None
            and j.finished_at < self.now - ages[j.status]
        ]  # fmt: skip
        for job_id in gone:
            del self.jobs[job_id]
        return len(gone)

    def cancel(self, job_id: uuid.UUID) -> str | None:
        """The job's status after the cancel, or None when it is refused."""
        job = self.jobs.get(job_id)
        if job is None or job.status not in LIVE:
            return None
        if job.status == "running":
            job.cancel_requested = True
            return "running"
        job.status = "cancelled"
        job.finished_at = self.now
        return job.status

    def requeue_blocked_by(self, job_id: uuid.UUID) -> uuid.UUID | None:
        """The live job whose dedupe key stops this dead job's requeue, if any."""
        job = self.jobs.get(job_id)
        if job is None or job.status != "dead":
            return None
        return self.live_holder(job.dedupe_key)

    def requeue(self, job_id: uuid.UUID, run_at: float | None) -> bool:
        job = self.jobs.get(job_id)
        if job is None or job.status != "dead" or self.live_holder(job.dedupe_key):
            return False
        job.status = "pending"
        job.attempts = 0
        job.finished_at = None
        job.run_at = self.now if run_at is None else run_at
        return True

    def discard(self, job_id: uuid.UUID) -> bool:
        job = self.jobs.get(job_id)
        if job is None or job.status != "dead":
            return False
        del self.jobs[job_id]
        return True

    # --- reporting ------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for job in self.jobs.values():
            out[job.status] = out.get(job.status, 0) + 1
        return out

    def rows(self) -> dict[uuid.UUID, tuple[object, ...]]:
        return {job_id: job.row() for job_id, job in self.jobs.items()}
