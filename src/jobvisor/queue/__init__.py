"""The durable queue: jobs as rows in PostgreSQL or SQLite."""

from ..correlation import correlation_scope, current_correlation_id
from ..redact import redact_url
from .api import AsyncQueue, Queue, connect, connect_async
from .batches import BatchPage, BatchStatus
from .errors import (
    BatchFinished,
    BatchNotFound,
    DatabaseError,
    DatabaseRefused,
    DatabaseUnavailable,
    InvalidArgument,
    JobNotFound,
    JobvisorError,
    LeaseLost,
    MissingCorrelationId,
    SchemaMissing,
)
from .model import (
    Job,
    JobStatus,
    Limit,
    LimitScope,
    LimitSource,
    NewJob,
    OnConflict,
    RetryPolicy,
    Schedule,
    TypeRequeue,
    Unique,
)
from .notices import Notice, NoticeKind
from .reports import Cancelled, Readiness, Renewal, Summary, XminHolder

__all__ = [
    "AsyncQueue",
    "BatchFinished",
    "BatchNotFound",
    "BatchPage",
    "BatchStatus",
    "Cancelled",
    "DatabaseError",
    "DatabaseRefused",
    "DatabaseUnavailable",
    "InvalidArgument",
    "Job",
    "JobNotFound",
    "JobStatus",
    "JobvisorError",
    "LeaseLost",
    "Limit",
    "LimitScope",
    "LimitSource",
    "MissingCorrelationId",
    "NewJob",
    "Notice",
    "NoticeKind",
    "OnConflict",
    "Queue",
    "Readiness",
    "Renewal",
    "RetryPolicy",
    "Schedule",
    "SchemaMissing",
    "Summary",
    "TypeRequeue",
    "Unique",
    "XminHolder",
    "connect",
    "connect_async",
    "correlation_scope",
    "current_correlation_id",
    "redact_url",
]
