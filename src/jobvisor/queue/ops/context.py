"""What every operation needs (`Ctx`: the engine's dialect and the queue's
settings), and the argument checks and job preparations the domains share."""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, LiteralString

from ... import tracing
from ...correlation import current_correlation_id
from .. import validate
from ..errors import InvalidArgument, MissingCorrelationId
from ..model import (
    DEFAULT_RETRY,
    Job,
    NewJob,
    RetryPolicy,
)
from ..plan import COMMIT, Dialect, Steps, Stmt
from .hints import BucketHints, ClaimBounds, LimitsSeen

DEFAULT_LEASE = validate.DEFAULT_LEASE
DEFAULT_CLEANUP_BATCH = 1000
# How long a pause waits for the claims in flight (PostgreSQL). They take
# milliseconds; what holds the lock longer is a long transaction that read the
# pause table (pg_dump), and every claim waits behind the pause meanwhile.
PAUSE_LOCK_TIMEOUT_MS = 5000


@dataclasses.dataclass(frozen=True, slots=True)
class Ctx:
    """What every operation needs: the engine's dialect and the queue's settings."""

    dialect: Dialect
    clock: Callable[[], dt.datetime] | None = None
    require_correlation_id: bool = False
    retry: Mapping[str, RetryPolicy] = dataclasses.field(default_factory=dict)
    default_retry: RetryPolicy = DEFAULT_RETRY
    lease: float = DEFAULT_LEASE
    max_payload_bytes: int = validate.DEFAULT_MAX_PAYLOAD_BYTES
    max_result_bytes: int = validate.DEFAULT_MAX_RESULT_BYTES
    limits_seen: LimitsSeen = dataclasses.field(default_factory=LimitsSeen)
    claim_bounds: ClaimBounds = dataclasses.field(default_factory=ClaimBounds)
    bucket_hints: BucketHints = dataclasses.field(default_factory=BucketHints)

    def now(self) -> Any:
        """The injected clock's time in the engine's form, or None for the database's."""
        return None if self.clock is None else self.dialect.time(self.clock())

    def retry_policy(self, job_type: str) -> RetryPolicy:
        return self.retry.get(job_type, self.default_retry)


def _names(name: str, values: Iterable[str] | None) -> list[str] | None:
    if values is None:
        return None
    if isinstance(values, str):
        raise InvalidArgument(f"{name}={values!r}: expected a list of names, not one string")
    items = [validate.name(f"{name}[{i}]", item) for i, item in enumerate(values)]
    return items or None


def queue_names(name: str, values: Iterable[str] | None) -> list[str] | None:
    """Queue names as a list, or None for every queue."""
    return _names(name, values)


def uuid_of(what: str, value: uuid.UUID | str) -> uuid.UUID:
    """An id (`what`: "job id", "batch id", ...) from a UUID or its text;
    `InvalidArgument` naming it otherwise."""
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise InvalidArgument(f"{what} {value!r}: expected a UUID") from None


def _job_id(value: uuid.UUID | str) -> uuid.UUID:
    return uuid_of("job id", value)


def _held(name: str, jobs: Sequence[Job]) -> None:
    for job in jobs:
        if not isinstance(job, Job) or job.claim_token is None:
            raise InvalidArgument(f"{name}: {job!r} is not a claimed job")


def _sized(ctx: Ctx, job: NewJob) -> NewJob:
    """Refuse a job whose payload is over the queue's size limit."""
    if len(job.payload_json) * 4 > ctx.max_payload_bytes:  # else it fits for sure
        validate.payload_size("payload", job.payload_json, job.payload_bytes, ctx.max_payload_bytes)
    return job


def _with_correlation(ctx: Ctx, job: NewJob) -> NewJob:
    """The context's correlation id for a job without one. With none either,
    the job's is stored NULL and reads as its own id (`own_correlation_id`):
    the correlation index then holds only the ids that were given."""
    if job.correlation_id is not None:
        return job
    correlation_id = current_correlation_id()
    if correlation_id is None:
        if ctx.require_correlation_id:
            raise MissingCorrelationId(
                f"enqueue of {job.job_type!r}: this queue requires a correlation id and "
                "none was given or set in the context"
            )
        return job
    return dataclasses.replace(job, correlation_id=correlation_id)


def _trace_meta() -> dict[str, Any] | None:
    """`{"trace": carrier}` when a span is active (the `otel` extra is
    installed: `tracing` checks that once per process), else None."""
    carrier = tracing.inject()
    return {"trace": carrier} if carrier else None


def _with_meta(job: NewJob, meta: dict[str, Any] | None) -> NewJob:
    if meta is None or job.meta is not None:
        return job
    return dataclasses.replace(job, meta=meta)


def _check_batch_size(batch_size: int) -> None:
    validate.count("batch_size", batch_size, high=validate.MAX_BATCH_SIZE)


def _delete_in_batches(sql: LiteralString, params: dict[str, Any], batch_size: int) -> Steps[int]:
    """Run a DELETE of at most `batch_size` rows until it deletes fewer, each
    batch committed on its own (no long lock); returns how many went."""
    total = 0
    while True:
        deleted: int = yield Stmt(sql, params)
        total += deleted
        yield COMMIT
        if deleted < batch_size:
            return total


def one_database(ctx: Ctx, what: str) -> None:
    """Refuse, writing nothing, what Citus mode does not run: work that ties
    jobs of different buckets together (workflows, batches) or keeps
    rows about a job in tables of their own (durable steps, signals, events).
    See docs/design.md, "Scale-out"."""
    if ctx.dialect.bucket_count:
        raise InvalidArgument(
            f"{what}: not available in Citus mode (JOBVISOR_CITUS=on), where each"
            " statement reaches one bucket of jobs; run it on a single PostgreSQL database"
        )
