"""Logs are events: one line per thing that happened, with fields.

    log = get_logger("worker")
    log.info("job.completed", job_id=job.id, job_type=job.job_type, attempt=1)

On a terminal (or with `text`) a line reads
`2026-11-29T16:32:18.123Z info  worker job.completed job_id=… attempt=1`;
with `json` it is one JSON object per line. The current correlation id is
added to every line logged while it is set. Never pass a payload or a password:
even so, every line (its message, fields and traceback, whoever logged it)
passes through `RedactFilter`, which masks database passwords, and so do
uncaught exceptions and warnings once `setup_logging` has run.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys
import threading
import traceback
import warnings
from types import TracebackType
from typing import Any, TextIO

from .correlation import current_correlation_id
from .redact import RedactFilter, install_library_filters, redact_text

_ROOT = "jobvisor"


class EventLogger:
    """A thin face over `logging` that takes an event name and fields."""

    def __init__(self, name: str) -> None:
        self._logger = logging.getLogger(f"{_ROOT}.{name}")
        self.name = name

    def _log(self, level: int, event: str, fields: dict[str, Any]) -> None:
        if self._logger.isEnabledFor(level):
            correlation_id = current_correlation_id()
            if correlation_id is not None and "correlation_id" not in fields:
                fields["correlation_id"] = correlation_id
            self._logger.log(level, event, extra={"jv_fields": fields}, stacklevel=3)

    def enabled_for(self, level: int) -> bool:
        """True when an event at `level` (`logging.DEBUG`...) would be written:
        a caller skips building the fields of one that would not."""
        return self._logger.isEnabledFor(level)

    def debug(self, event: str, **fields: Any) -> None:
        self._log(logging.DEBUG, event, fields)

    def info(self, event: str, **fields: Any) -> None:
        self._log(logging.INFO, event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        self._log(logging.WARNING, event, fields)

    def error(self, event: str, **fields: Any) -> None:
        self._log(logging.ERROR, event, fields)


def get_logger(name: str) -> EventLogger:
    return EventLogger(name)


def _value(value: Any) -> str:
    text = str(value)
    if not text or any(c in text for c in ' "=\n'):
        return json.dumps(text)
    return text


def _timestamp(record: logging.LogRecord) -> str:
    when = dt.datetime.fromtimestamp(record.created, dt.UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, Any] = getattr(record, "jv_fields", {})
        name = record.name.removeprefix(_ROOT + ".")
        parts = [_timestamp(record), f"{record.levelname.lower():<7}", name, record.getMessage()]
        parts += [f"{k}={_value(v)}" for k, v in fields.items() if v is not None]
        line = " ".join(parts)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        elif record.exc_text:  # already formatted (and masked) by RedactFilter
            line += "\n" + record.exc_text
        return line


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, Any] = getattr(record, "jv_fields", {})
        out: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name.removeprefix(_ROOT + "."),
            "event": record.getMessage(),
        }
        out.update({k: v for k, v in fields.items() if v is not None})
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:  # already formatted (and masked) by RedactFilter
            out["exception"] = record.exc_text
        return json.dumps(out, default=str)


LIBRARY_LEVEL = logging.WARNING  # what the libraries (psycopg's pool, asyncio) may log


def setup_logging(fmt: str = "auto", level: str = "info", stream: TextIO | None = None) -> None:
    """Send jobvisor's events to `stream` (stderr) as text or JSON lines, and
    the libraries' warnings and errors in the same format (a JSON log stays
    one object per line).

    `auto` picks text on a terminal and JSON otherwise."""
    stream = stream or sys.stderr
    if fmt == "auto":
        fmt = "text" if stream.isatty() else "json"
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(RedactFilter())
    ours = logging.getLogger(_ROOT)
    ours.handlers[:] = [handler]
    ours.setLevel(level.upper())
    ours.propagate = False
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(LIBRARY_LEVEL)
    install_library_filters()
    install_redacting_hooks()


def _print_masked(text: str) -> None:
    try:
        sys.stderr.write(redact_text(text))
        sys.stderr.flush()
    except (OSError, ValueError):  # stderr closed: nowhere left to report
        pass


def _excepthook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    _print_masked("".join(traceback.format_exception(kind, exc, tb)))


def _thread_excepthook(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit or args.exc_value is None:
        return
    name = args.thread.name if args.thread is not None else "?"
    text = "".join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback))
    _print_masked(f"Exception in thread {name}:\n{text}")


def _showwarning(  # noqa: PLR0917 - the signature of warnings.showwarning
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    _print_masked(warnings.formatwarning(message, category, filename, lineno, line))


def install_redacting_hooks() -> None:
    """Mask passwords in what Python itself prints on stderr: an uncaught
    exception's traceback (main thread or another) and a warning."""
    sys.excepthook = _excepthook
    threading.excepthook = _thread_excepthook
    warnings.showwarning = _showwarning
