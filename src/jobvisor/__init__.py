"""jobvisor: a durable background-job queue on PostgreSQL or SQLite, and the
service that runs the jobs."""

from .handler import Cancel, JobContext, Snooze
from .queue import (
    AsyncQueue,
    BatchFinished,
    BatchNotFound,
    InvalidArgument,
    Job,
    JobNotFound,
    JobStatus,
    JobvisorError,
    LeaseLost,
    Limit,
    MissingCorrelationId,
    Queue,
    RetryPolicy,
    Schedule,
    Summary,
    Unique,
    connect,
    connect_async,
    correlation_scope,
    current_correlation_id,
)
from .queue.errors import SignalTimeout, StepMismatch
from .version import __version__
from .worker.registry import Registry
from .workflows import Workflow, WorkflowStatus, chain, group

__all__ = [
    "AsyncQueue",
    "BatchFinished",
    "BatchNotFound",
    "Cancel",
    "InvalidArgument",
    "Job",
    "JobContext",
    "JobNotFound",
    "JobStatus",
    "JobvisorError",
    "LeaseLost",
    "Limit",
    "MissingCorrelationId",
    "Queue",
    "Registry",
    "RetryPolicy",
    "Schedule",
    "SignalTimeout",
    "Snooze",
    "StepMismatch",
    "Summary",
    "Unique",
    "Workflow",
    "WorkflowStatus",
    "__version__",
    "chain",
    "connect",
    "connect_async",
    "correlation_scope",
    "current_correlation_id",
    "group",
]
