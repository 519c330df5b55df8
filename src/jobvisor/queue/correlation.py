"""The correlation id travels from the code that enqueues a job to the handler
that runs it, through a context variable on both sides."""

from __future__ import annotations

import contextlib
import contextvars
import uuid
from collections.abc import Iterator

correlation_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "jobvisor_correlation_id", default=None
)


def current_correlation_id() -> str | None:
    """The correlation id of the current context, or None."""
    return correlation_id_var.get()


def new_correlation_id() -> str:
    return uuid.uuid4().hex


@contextlib.contextmanager
def correlation_scope(correlation_id: str | None) -> Iterator[None]:
    """Set the correlation id for the duration of the block."""
    token = correlation_id_var.set(correlation_id)
    try:
        yield
    finally:
        correlation_id_var.reset(token)
