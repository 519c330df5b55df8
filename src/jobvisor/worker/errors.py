"""What a failed attempt records: its timeout, the handler's own record, or
the exception as `jobvisor.errortext` writes it."""

from __future__ import annotations

import asyncio

from ..errortext import error_text
from ..handler import AttemptFailed, Handler
from ..queue.model import Job


def failure_text(
    job: Job, handler: Handler, exc: BaseException, timer: asyncio.Timeout | None
) -> str:
    """What a failed attempt records: its timeout, or the exception."""
    if timer is not None and timer.expired():
        return f"TimeoutError: {job.job_type} ran past its {handler.timeout:g}s timeout"
    return exc.record if isinstance(exc, AttemptFailed) else error_text(exc)
