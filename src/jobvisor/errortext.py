"""An exception as text, one way everywhere: what a log line's `error` field,
a failed attempt's `last_error` and a wrapped driver error say of it.
Describing an error never raises: an exception that cannot be printed is
named by its type alone."""

from __future__ import annotations

import traceback
from typing import Final

TRACEBACK_FRAMES: Final = 8  # innermost frames kept by `error_text`


def message(exc: BaseException) -> str | None:
    """`str(exc)`, stripped; None when the exception cannot say it (its
    `__str__` raises, or returns something that is not a string)."""
    try:
        text = str(exc)
    except Exception:
        return None
    return text.strip()


def describe(exc: BaseException) -> str:
    """`Type: message`, the message whole; the type alone when there is none."""
    text = message(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def one_line(exc: BaseException) -> str:
    """`Type: first line of the message`, for a log line's `error` field."""
    text = message(exc)
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def error_text(exc: BaseException) -> str:
    """`one_line`, then the innermost frames of the traceback: what a failed
    attempt records."""
    head = one_line(exc)
    try:
        frames = traceback.extract_tb(exc.__traceback__)[-TRACEBACK_FRAMES:]
        tail = "".join(traceback.format_list(frames)).rstrip()
    except Exception:
        tail = ""
    return head + ("\n" + tail if tail else "")


def flat_message(exc: BaseException) -> str:
    """The message alone, its whitespace (newlines too) collapsed."""
    return " ".join((message(exc) or "").split()) or "(no message)"


def driver_text(exc: BaseException) -> str:
    """A driver's error as a wrapped error's message ends: its qualified
    class and its message on one line."""
    return f"{type(exc).__module__}.{type(exc).__qualname__}: {flat_message(exc)}"
