"""The durable queue: jobs as rows in PostgreSQL or SQLite."""

from .api import AsyncQueue, Queue, connect, connect_async
from .correlation import correlation_scope, current_correlation_id
from .errors import (
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
    Cancelled,
    Job,
    JobStatus,
    Limit,
    LimitScope,
    LimitSource,
    NewJob,
    Readiness,
    Renewal,
    RetryPolicy,
    Schedule,
    Summary,
    TypeRequeue,
    XminHolder,
)
from .notices import Notice, NoticeKind
from .redact import redact_url

__all__ = [
    "AsyncQueue",
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
    "Queue",
    "Readiness",
    "Renewal",
    "RetryPolicy",
    "Schedule",
    "SchemaMissing",
    "Summary",
    "TypeRequeue",
    "XminHolder",
    "connect",
    "connect_async",
    "correlation_scope",
    "current_correlation_id",
    "redact_url",
]
