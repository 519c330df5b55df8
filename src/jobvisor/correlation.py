"""The correlation id travels from the code that enqueues a job to the handler
that runs it, through a context variable on both sides."""

from __future__ import annotations

import contextlib
import contextvars
import uuid
from collections.abc import Iterator
from typing import Final

correlation_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "jobvisor_correlation_id", default=None
)


def current_correlation_id() -> str | None:
    """The correlation id of the current context, or None."""
    return correlation_id_var.get()


def own_correlation_id(job_id: uuid.UUID) -> str:
    """The correlation id of a job enqueued without one: its own id, as 32
    hex digits. It is not stored (the column holds NULL), so the correlation
    index holds only the ids callers gave; a job it enqueues while it runs
    carries it, stored."""
    return job_id.hex


def job_of_correlation(correlation_id: str) -> uuid.UUID | None:
    """The job whose own id a correlation id is, when it has that form."""
    if len(correlation_id) != 32 or correlation_id.strip(_HEX):
        return None
    return uuid.UUID(hex=correlation_id)


_HEX: Final = "0123456789abcdef"


@contextlib.contextmanager
def correlation_scope(correlation_id: str | None) -> Iterator[None]:
    """Set the correlation id for the duration of the block."""
    token = correlation_id_var.set(correlation_id)
    try:
        yield
    finally:
        correlation_id_var.reset(token)
