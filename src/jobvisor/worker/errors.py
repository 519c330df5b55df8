"""What a failed attempt records and the logs say of an error: one line
naming it, then the innermost frames of its traceback. An exception that
cannot be printed is named by its type alone: describing an error never
raises."""

from __future__ import annotations

import asyncio
import traceback
from typing import Final

from ..handler import AttemptFailed, Handler
from ..queue.model import Job

TRACEBACK_FRAMES: Final = 8  # frames kept in last_error


def message(exc: BaseException) -> str | None:
    """`str(exc)`, stripped; None when the exception cannot say it (its
    `__str__` raises, or returns something that is not a string)."""
    try:
        text = str(exc)
    except Exception:
        return None
    return text.strip()


def error_text(exc: BaseException) -> str:
    """One line naming the error, then the innermost frames of its traceback.
    An exception that cannot be printed is named by its type alone."""
    head = one_line(exc)
    try:
        frames = traceback.extract_tb(exc.__traceback__)[-TRACEBACK_FRAMES:]
        tail = "".join(traceback.format_list(frames)).rstrip()
    except Exception:
        tail = ""
    return head + ("\n" + tail if tail else "")


def failure_text(
    job: Job, handler: Handler, exc: BaseException, timer: asyncio.Timeout | None
) -> str:
    """What a failed attempt records: its timeout, or the exception."""
    if timer is not None and timer.expired():
        return f"TimeoutError: {job.job_type} ran past its {handler.timeout:g}s timeout"
    return exc.record if isinstance(exc, AttemptFailed) else error_text(exc)


def one_line(exc: BaseException) -> str:
    text = message(exc)
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__
