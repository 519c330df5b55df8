"""The durable queue: jobs as rows in PostgreSQL or SQLite."""

from .api import AsyncQueue, Queue, connect, connect_async, redact_url
from .correlation import correlation_scope, current_correlation_id
from .errors import (
    DatabaseError,
    DatabaseUnavailable,
    InvalidArgument,
    JobNotFound,
    JobvisorError,
    LeaseLost,
    MissingCorrelationId,
    SchemaMissing,
)
from .model import Job, JobStatus, NewJob, RetryPolicy, Summary, TypeRequeue

__all__ = [
    "AsyncQueue",
    "DatabaseError",
    "DatabaseUnavailable",
    "InvalidArgument",
    "Job",
    "JobNotFound",
    "JobStatus",
    "JobvisorError",
    "LeaseLost",
    "MissingCorrelationId",
    "NewJob",
    "Queue",
    "RetryPolicy",
    "SchemaMissing",
    "Summary",
    "TypeRequeue",
    "connect",
    "connect_async",
    "correlation_scope",
    "current_correlation_id",
    "redact_url",
]
