"""The job model: statuses, the `Job` row as workers see it, enqueue requests,
retry policies and the status summary."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import hashlib
import inspect
import json
import os
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from ..backoff import backoff, retry_draw
from . import validate
from .errors import InvalidArgument
from .jsonvalue import payload_json

UTC = dt.UTC
DEFAULT_QUEUE = "default"
DEFAULT_MAX_ATTEMPTS = 20
MAX_ERRORS = 20  # entries kept in a job's error history (the statements say 20 too)


class JobStatus(enum.StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    RETRYABLE = "retryable"
    COMPLETED = "completed"
    DEAD = "dead"
    CANCELLED = "cancelled"
    WAITING = "waiting"  # a workflow job whose parents have not all finished

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


TERMINAL = frozenset({JobStatus.COMPLETED, JobStatus.DEAD, JobStatus.CANCELLED})


@dataclasses.dataclass(frozen=True, slots=True)
class Job:
    """A job as read from the database. `claim_token` is set while it runs.
    `meta` is jobvisor's own data about the job, apart from the payload: the
    enqueuer's trace context under "trace" (see `jobvisor.tracing`), or None.

    `get` and the dead-job reads also carry what the job left behind (a claim
    does not read them): `result`, its handler's return value (None when it
    returned None, or has not completed); `progress`, the last one its handler
    reported (`{"fraction": 0.0..1.0, "note": str | None}`) or None; and
    `errors`, one entry per failed attempt, oldest first, the last
    `MAX_ERRORS` kept: `{"attempt": int, "at": datetime, "error": str,
    "worker_id": str}`; and `unique_key`, the key it holds while its status
    is one of its unique states (see `Unique`), else None."""

    id: uuid.UUID
    queue: str
    job_type: str
    payload: Any
    priority: int
    run_at: dt.datetime
    status: JobStatus
    attempts: int
    max_attempts: int
    last_error: str | None
    correlation_id: str | None
    dedupe_key: str | None
    lease_expires_at: dt.datetime | None
    claim_token: uuid.UUID | None
    worker_id: str | None
    created_at: dt.datetime
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    meta: dict[str, Any] | None = None
    result: Any = None
    progress: dict[str, Any] | None = None
    errors: tuple[dict[str, Any], ...] = ()
    unique_key: str | None = None

    @property
    def attempts_left(self) -> int:
        return self.max_attempts - self.attempts

    @property
    def batch_id(self) -> uuid.UUID | None:
        """The batch this job is a member of (see `Queue.batch`), or None."""
        batch = self.meta.get("batch") if self.meta else None
        return uuid.UUID(batch) if isinstance(batch, str) else None


@dataclasses.dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff with jitter: attempt n waits up to base * 2**(n-1),
    capped at `cap` seconds, and at least `(1 - jitter)` of that."""

    base: float = 1.0
    cap: float = 3600.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        validate.seconds("RetryPolicy base", self.base, high=validate.MAX_DELAY)
        cap = validate.seconds("RetryPolicy cap", self.cap, high=validate.MAX_DELAY)
        if cap < self.base:
            raise InvalidArgument(f"RetryPolicy cap={self.cap!r}: expected seconds >= base")
        if not (isinstance(self.jitter, int | float) and 0 <= self.jitter <= 1):
            raise InvalidArgument(f"RetryPolicy jitter={self.jitter!r}: expected 0..1")

    def delay(self, attempt: int, job_id: uuid.UUID | None = None) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based);
        for a job, its jitter is the job's own (`retry_draw`), as the reaper's."""
        draw = None if job_id is None else retry_draw(job_id, attempt)
        return backoff(attempt, base=self.base, cap=self.cap, jitter=self.jitter, draw=draw)


DEFAULT_RETRY = RetryPolicy()


class OnConflict(enum.StrEnum):
    """What `enqueue(..., unique=...)` does when a job already holds the key:
    `ignore` returns that job's id and writes nothing; `replace` also gives a
    pending holder the new payload and `run_at` (a debounce). A holder that is
    no longer pending (running, retryable, finished) is never changed."""

    IGNORE = "ignore"
    REPLACE = "replace"

    @classmethod
    def of(cls, value: object) -> OnConflict:
        """`value` as an `OnConflict`; `InvalidArgument` naming it otherwise."""
        if isinstance(value, str) and value in cls._value2member_map_:
            return cls(value)
        raise InvalidArgument(
            f"on_conflict={validate.short(value)}: expected 'ignore' or 'replace'"
        )


UNIQUE_STATES: tuple[str, ...] = ("pending", "running", "retryable")
# A unique key longer than this (a long key full of escaped characters) is
# stored as its SHA-256, well inside PostgreSQL's index entry limit.
MAX_UNIQUE_KEY_BYTES = 2000


@dataclasses.dataclass(frozen=True, slots=True)
class Unique:
    """At most one job per key: `enqueue(..., unique=Unique(...))`, or a job
    type's default (`registry.handler(..., unique=...)`).

    The key is always the job type, with `key` (a string you choose) and,
    when `by_args`, a hash of the payload's canonical JSON (keys sorted, no
    spaces). A job holds its key while its status is one of `states` (which
    must include "pending"); once it leaves them it gives the key up for
    good, even if it comes back later (a release, a requeue).

    `period` (whole seconds, at least 1) makes the key unique per time bucket
    of the database clock (floor(now / period) when enqueued): a job then
    also holds it once `completed`, so one job runs per key and bucket
    however fast it finishes (one report per hour). A dead or cancelled job
    frees its bucket unless `states` lists its status.

    Bad values raise `InvalidArgument` naming them."""

    key: str | None = None
    by_args: bool = False
    period: float | dt.timedelta | None = None
    states: Sequence[str] = UNIQUE_STATES

    def __post_init__(self) -> None:
        validate.key("unique.key", self.key)
        if not isinstance(self.by_args, bool):
            raise InvalidArgument(f"unique.by_args={self.by_args!r}: expected True or False")
        object.__setattr__(self, "period", _unique_period(self.period))
        object.__setattr__(self, "states", _unique_states(self.states))

    @property
    def held_states(self) -> tuple[str, ...]:
        """The statuses in which a job holds its key: `states`, and with a
        period `completed` too."""
        if self.period is None or JobStatus.COMPLETED in self.states:
            return tuple(self.states)
        return _in_status_order((*self.states, JobStatus.COMPLETED.value))

    def base_key(self, job_type: str, payload_json: str) -> str:
        """The key's text before its time bucket: a compact JSON object of
        the job type, `key`, the payload's hash and the period (those set), so
        two different requests never share it. The database appends
        `@<bucket start, UTC>` when there is a period."""
        parts: dict[str, Any] = {"job_type": job_type}
        if self.key is not None:
            parts["key"] = self.key
        if self.by_args:
            parts["args"] = args_digest(payload_json)
        if self.period is not None:
            parts["period"] = self.period
        text = json.dumps(parts, separators=(",", ":"), ensure_ascii=False)
        if len(text.encode("utf-8")) > MAX_UNIQUE_KEY_BYTES:
            digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
            text = json.dumps({"sha256": digest}, separators=(",", ":"))
        return text

    @classmethod
    def of(cls, value: object) -> Unique | None:
        """`value` as a `Unique`: one already, None, or a mapping of its
        fields (a JSON line of `jobvisor enqueue --file`)."""
        if value is None or isinstance(value, Unique):
            return value
        if isinstance(value, Mapping):
            try:
                return cls(**value)
            except TypeError as exc:
                raise InvalidArgument(f"unique={validate.short(value)}: {exc}") from None
        raise InvalidArgument(
            f"unique={validate.short(value)}: expected a jobvisor.Unique "
            "(or a mapping of its fields)"
        )


@dataclasses.dataclass(frozen=True, slots=True)
class UniqueKey:
    """What the insert of a job enqueued with `unique` needs: the key's text
    before its time bucket (`Unique.base_key`), the period, the statuses
    that hold the key, and what to do when a job holds it."""

    base: str
    period: int | None
    states: tuple[str, ...]
    on_conflict: OnConflict


def _unique_period(value: object) -> int | None:
    if value is None:
        return None
    seconds = validate.seconds("unique.period", value, low=1.0, high=validate.MAX_DELAY)
    if not seconds.is_integer():
        raise InvalidArgument(
            f"unique.period={validate.short(value)}: expected whole seconds, at least 1"
        )
    return int(seconds)


def _unique_states(value: object) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise InvalidArgument(
            f"unique.states={validate.short(value)}: expected a list of status names"
        )
    states = list(value)
    known = [s.value for s in JobStatus]
    for state in states:
        if state not in known:
            raise InvalidArgument(
                f"unique.states: {validate.short(state)} is not a job status; "
                f"expected some of {', '.join(known)}"
            )
    if JobStatus.PENDING.value not in states:
        raise InvalidArgument(
            f"unique.states={validate.short(value)}: expected a list that includes 'pending' "
            "(a new job is pending: it must hold its key)"
        )
    return _in_status_order(states)


def _in_status_order(states: Iterable[str]) -> tuple[str, ...]:
    chosen = {str(s) for s in states}
    return tuple(s.value for s in JobStatus if s.value in chosen)


def args_digest(payload_json: str) -> str:
    """The hash `Unique(by_args=True)` keys on: SHA-256 (128 bits, hex) of the
    payload's canonical JSON, keys sorted and no spaces, so the order a dict
    was built in does not matter (numbers are as JSON wrote them: 1 and 1.0
    differ)."""
    canonical = json.dumps(
        json.loads(payload_json), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:32]


_last_id = (0, 0)  # (milliseconds, 12-bit counter) of this process's last id
_id_lock = threading.Lock()


def new_job_id() -> uuid.UUID:
    """A version 7 UUID: 48 bits of Unix milliseconds, a 12-bit counter, then
    randomness, so ids sort by creation time and the primary key index stays
    append-mostly. Within one process ids strictly increase (the counter
    counts up inside a millisecond), so jobs that tie on priority and run_at
    (an `enqueue_many` batch) are claimed in the order they were enqueued."""
    return new_job_ids(1)[0]


def new_job_ids(count: int) -> list[uuid.UUID]:
    """`count` ids as `new_job_id` makes them, strictly increasing, drawn at
    once: one lock and one read of randomness for the whole batch."""
    stamps = _stamps(count)
    rand = os.urandom(8 * count)
    low = (1 << 62) - 1
    made = []
    for i, stamp in enumerate(stamps):
        tail = int.from_bytes(rand[8 * i : 8 * i + 8], "big") & low
        made.append(_uuid(stamp | tail))
    return made


def _uuid(value: int) -> uuid.UUID:
    """`uuid.UUID(int=value)` for a value built as a valid UUID, without the
    constructor's checks (a third of a bulk enqueue's per-row time): set as
    `UUID.__setstate__` sets an unpickled one."""
    made = object.__new__(uuid.UUID)
    object.__setattr__(made, "int", value)
    object.__setattr__(made, "is_safe", uuid.SafeUUID.unknown)
    return made


def _stamps(count: int) -> list[int]:
    """The upper 66 bits (milliseconds, version, counter, variant) of the
    next `count` ids, counting on from the last id of this process."""
    global _last_id
    with _id_lock:
        ms = time.time_ns() // 1_000_000
        last_ms, counter = _last_id
        if ms > last_ms:
            counter = (int.from_bytes(os.urandom(2), "big") & 0x7FF) - 1  # room to count up
        else:
            ms = last_ms
        stamps = []
        for _ in range(count):
            if counter < 0xFFF:
                counter += 1
            else:
                ms, counter = ms + 1, 0  # 4096 ids in one millisecond: borrow the next
            stamps.append(
                ((ms & ((1 << 48) - 1)) << 80) | (0x7 << 76) | (counter << 64) | (0b10 << 62)
            )
        _last_id = (ms, counter)
    return stamps


@dataclasses.dataclass(frozen=True, slots=True)
class NewJob:
    """A validated enqueue request. Construct through `NewJob.build`; the
    enqueue operations add `meta` (the trace context) themselves."""

    id: uuid.UUID
    job_type: str
    payload_json: str
    queue: str
    priority: int
    run_at: dt.datetime | None
    delay: float | None
    max_attempts: int
    dedupe_key: str | None
    correlation_id: str | None
    meta: dict[str, Any] | None = None
    concurrency_key: str | None = None
    unique: UniqueKey | None = None

    @classmethod
    def build(
        cls,
        job_type: str,
        payload: Any = None,
        *,
        queue: str = DEFAULT_QUEUE,
        priority: int = 0,
        run_at: dt.datetime | None = None,
        delay: float | dt.timedelta | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        dedupe_key: str | None = None,
        correlation_id: str | None = None,
        concurrency_key: str | None = None,
        unique: Unique | None = None,
        on_conflict: OnConflict | str = OnConflict.IGNORE,
    ) -> NewJob:
        """Check every argument and raise `InvalidArgument` naming the bad one.
        These keyword arguments are the enqueue signature: `enqueue` and the
        command line's JSON lines take the same names (`ENQUEUE_KEYS`)."""
        if run_at is not None and delay is not None:
            raise InvalidArgument(
                f"run_at={run_at!r} and delay={delay!r}: expected at most one of them"
            )
        job_type = validate.name("job_type", job_type)
        text = payload_json(payload)
        return cls(
            id=new_job_id(),
            job_type=job_type,
            payload_json=text,
            queue=validate.name("queue", queue),
            priority=validate.count("priority", priority, low=-(2**31), high=validate.MAX_INT32),
            run_at=None if run_at is None else validate.run_at("run_at", run_at),
            delay=None
            if delay is None
            else validate.seconds("delay", delay, high=validate.MAX_DELAY),
            max_attempts=validate.count("max_attempts", max_attempts, high=validate.MAX_INT32),
            dedupe_key=validate.key("dedupe_key", dedupe_key),
            correlation_id=validate.key("correlation_id", correlation_id),
            concurrency_key=validate.key("concurrency_key", concurrency_key),
            # A job without `unique` (most of them) skips its checks.
            unique=None
            if unique is None and on_conflict is OnConflict.IGNORE
            else _unique_key(job_type, text, unique, on_conflict, dedupe_key),
        )

    @property
    def payload_bytes(self) -> int:
        """The size of the payload's JSON in UTF-8 bytes."""
        return len(self.payload_json.encode("utf-8"))

    @property
    def placement_key(self) -> str | None:
        """The key whose jobs must live together on a cluster (its unique
        base, else its dedupe key, else its concurrency key): see
        `Dialect.keyed_id`."""
        if self.unique is not None:
            return self.unique.base
        return self.dedupe_key or self.concurrency_key


def _unique_key(
    job_type: str, text: str, unique: object, on_conflict: object, dedupe_key: object
) -> UniqueKey | None:
    """A new job's `UniqueKey` from `unique` and `on_conflict`, checked."""
    conflict = OnConflict.of(on_conflict)
    spec = Unique.of(unique)
    if spec is None:
        if conflict is not OnConflict.IGNORE:
            raise InvalidArgument(
                f"on_conflict={conflict.value!r}: expected unique=Unique(...) with it"
            )
        return None
    if dedupe_key is not None:
        raise InvalidArgument(
            f"dedupe_key={validate.short(dedupe_key)} and unique: expected at most one of "
            "them (Unique(key=...) covers a dedupe key)"
        )
    period = cast(int | None, spec.period)  # whole seconds once checked
    return UniqueKey(spec.base_key(job_type, text), period, spec.held_states, conflict)


ENQUEUE_KEYS: tuple[str, ...] = tuple(
    p for p in inspect.signature(NewJob.build).parameters if p not in ("cls", "self")
)
"""The arguments of an enqueue: `NewJob.build`'s, in order."""


@dataclasses.dataclass(frozen=True, slots=True)
class TypeRequeue:
    """What `dead.requeue_type` did: how many dead jobs went back to pending,
    and the ids of those it left dead because a live job holds their dedupe key."""

    requeued: int
    held: tuple[uuid.UUID, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class Schedule:
    """A periodic job as the database keeps it (`Queue.schedules`).

    `spec` is the cron expression, or `every Ns`; ticks are computed in
    `timezone`. `next_run_at` is the next tick not yet enqueued, `last_run_at`
    the last one enqueued (None before the first). A schedule the code no
    longer declares is kept with `enabled` False and no longer fires."""

    name: str
    spec: str
    timezone: str
    next_run_at: dt.datetime
    last_run_at: dt.datetime | None
    enabled: bool
    job_type: str
    queue: str
    priority: int
    payload: Any
    catch_up: str


class LimitScope(enum.StrEnum):
    """What a limit applies to: every job of a queue, or of a job type."""

    QUEUE = "queue"
    TYPE = "type"


class LimitSource(enum.StrEnum):
    """Who wrote a limit: a handler's declaration (written at each worker's
    boot, the code being the source of truth) or an operator (`set_limit`)."""

    CODE = "code"
    OPERATOR = "operator"


@dataclasses.dataclass(frozen=True, slots=True)
class Limit:
    """A fleet-wide limit as the database keeps it (`Queue.limits`).

    `concurrency`: at most this many running jobs of the group across every
    host; `key_concurrency` (job types only): at most this many per
    `concurrency_key`; `rate`: at most this many starts per second, minute or
    hour ("100/s"), from a token bucket of that many tokens; `key_rate` (job
    types only): such a rate for each `concurrency_key`, a bucket per key.
    None: no such limit."""

    scope: LimitScope
    name: str
    concurrency: int | None = None
    key_concurrency: int | None = None
    rate: str | None = None
    source: LimitSource = LimitSource.OPERATOR
    key_rate: str | None = None

    def describe(self) -> str:
        """The limits in one short phrase: "concurrency=3 key=1 rate=20/s"."""
        parts = [
            f"{label}={value}"
            for label, value in (
                ("concurrency", self.concurrency),
                ("key", self.key_concurrency),
                ("rate", self.rate),
                ("key_rate", self.key_rate),
            )
            if value is not None
        ]
        return " ".join(parts)
