"""Exceptions raised by the queue. Every one derives from `JobvisorError`."""

from __future__ import annotations

import enum
import uuid

from ..redact import redact_text


class JobvisorError(Exception):
    """Base class of every error jobvisor raises on purpose.

    Its text never shows a database password, even when the message quotes
    the driver's (libpq quotes the token of a URL it cannot read)."""

    def __str__(self) -> str:
        return redact_text(super().__str__())


class DatabaseUnavailable(JobvisorError):
    """The database could not be reached or the connection broke; a retry may pass.

    The driver's exception is kept as `__cause__`.
    """


class DatabaseError(JobvisorError):
    """The database refused a statement for a reason a retry will not fix
    (a read-only server, a constraint, a bad value). `__cause__` is the driver's."""


class DatabaseRefused(DatabaseError):
    """The server refused the connection for a reason a retry will not fix: a
    wrong password, an unknown role or database. The message is the server's."""


class SchemaMissing(JobvisorError):
    """The database answers but jobvisor's schema is absent or older than the
    code: run `jobvisor migrate` (or `Queue.migrate()`)."""


class InvalidArgument(JobvisorError, ValueError):
    """A call was refused before anything was written; the message names the value."""


class JobNotFound(JobvisorError, LookupError):
    """No job with this id exists (or none in the status the call needs)."""

    def __init__(self, job_id: uuid.UUID | str, detail: str = "") -> None:
        self.job_id = job_id
        super().__init__(f"job {job_id} not found{': ' + detail if detail else ''}")


class LeaseLost(JobvisorError):
    """The caller no longer holds the job's claim; nothing was changed.

    The lease expired and the reaper took the job back, or another worker
    claimed it since. The job's outcome belongs to whoever holds it now.
    """

    def __init__(self, job_id: uuid.UUID) -> None:
        self.job_id = job_id
        super().__init__(f"lease lost on job {job_id}: it is no longer held by this claim")


class MissingCorrelationId(JobvisorError):
    """The queue requires a correlation id and the enqueue had none."""


class BatchNotFound(JobvisorError, LookupError):
    """No batch with this id exists (it may have passed its retention)."""

    def __init__(self, batch_id: uuid.UUID | str) -> None:
        self.batch_id = batch_id
        super().__init__(f"batch {batch_id} not found")


class BatchFinished(InvalidArgument):
    """A job was added to a batch that has finished (its callbacks are
    enqueued); nothing was written."""

    def __init__(self, batch_id: uuid.UUID | str) -> None:
        self.batch_id = batch_id
        super().__init__(
            f"batch {batch_id} has finished: expected a batch whose callbacks are not "
            "enqueued yet (open a new batch for more jobs)"
        )


class StepMismatch(JobvisorError):
    """A handler asked for its steps in another order than its job's step
    log records (its code changed under a job in flight): the attempt fails,
    and no stored result is handed to the wrong step."""

    def __init__(self, job_id: uuid.UUID, seq: int, asked: str, recorded: str) -> None:
        self.job_id, self.seq, self.asked, self.recorded = job_id, seq, asked, recorded
        super().__init__(
            f"job {job_id}: step {seq} is {asked!r} in the handler but {recorded!r} in the "
            "job's step log (did the code change while the job was in flight?)"
        )


class SignalTimeout(JobvisorError, TimeoutError):
    """Raised in a handler by `job.wait_signal(name, timeout=...)` when no
    signal of that name came within the timeout."""

    def __init__(self, name: str, timeout: float | None) -> None:
        self.name, self.timeout = name, timeout
        super().__init__(f"no signal {name!r} came within {timeout:g}s" if timeout else name)


class EventNotSet(JobvisorError, LookupError):
    """`wait_event`: the job ended without publishing the key waited for."""

    def __init__(self, job_id: uuid.UUID, key: str, status: str) -> None:
        self.job_id, self.key = job_id, key
        super().__init__(f"job {job_id} ended {status} without setting event {key!r}")


class Fault(enum.StrEnum):
    """What an error from the database means for a retry (see `queue.faults`)."""

    UNREACHABLE = "unreachable"
    MAY_PASS = "may_pass"
    PERMANENT = "permanent"
