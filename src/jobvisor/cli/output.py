"""What the commands print: the one-line error, JSON (times and ids as text),
aligned tables whose every cell is escaped with `validate.printable` (cells
hold names and errors read from the database), short times and one-line
excerpts, a job shown whole with its error history, and the progress bar.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import sys
import time
import uuid
from collections.abc import Sequence
from typing import Any, TextIO

from ..queue import JobStatus, ops, validate
from ..queue.model import Job
from ..redact import redact_text


def _err(prog: str, message: str) -> None:
    print(f"{prog}: error: {redact_text(message)}", file=sys.stderr)


def _json_default(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID | JobStatus):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _print_json(value: Any) -> None:
    print(json.dumps(value, default=_json_default, indent=2, sort_keys=False))


def _job_dict(job: Job) -> dict[str, Any]:
    return {
        "id": str(job.id),
        "queue": job.queue,
        "job_type": job.job_type,
        "status": job.status.value,
        "priority": job.priority,
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "run_at": job.run_at,
        "created_at": job.created_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
        "correlation_id": job.correlation_id,
        "dedupe_key": job.dedupe_key,
        "unique_key": job.unique_key,
        "worker_id": job.worker_id,
        "last_error": job.last_error,
        "payload": job.payload,
        "result": job.result,
        "progress": job.progress,
        "errors": list(job.errors),
    }


def _when(value: dt.datetime | None) -> str:
    if value is None:
        return "-"
    return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _one_line(text: str | None, width: int) -> str:
    if not text:
        return "-"
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Aligned columns; every cell escaped (`validate.printable`), as cells
    hold names and errors read from the database."""
    rows = [[validate.printable(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(header, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)


class Progress:
    """A progress bar on stderr, drawn only when stderr is a terminal."""

    def __init__(self, total: int, stream: TextIO, *, label: str = "enqueued") -> None:
        self.total, self.stream, self.label = total, stream, label
        self.enabled = stream.isatty() and total > 0
        self._last = -1.0

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if done < self.total and now - self._last < 0.1:
            return
        self._last = now
        width = 30
        filled = width * done // self.total
        bar = "#" * filled + "." * (width - filled)
        percent = 100 * done // self.total
        self.stream.write(f"\r[{bar}] {percent:3d}% {done}/{self.total} {self.label}")
        self.stream.flush()

    def finish(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


_SHOWN_APART = ("last_error", "payload", "result", "progress", "errors")


def _show_job(job: Job, *, as_json: bool, history: ops.StepHistory | None = None) -> None:
    """One job: its fields, payload, result and progress, the last error and
    the error of every failed attempt kept, oldest first; then a durable
    job's step log, signals and events."""
    data = _job_dict(job)
    durable = history is not None and bool(history.steps or history.signals or history.events)
    if as_json:
        if durable:
            assert history is not None
            data["steps"] = [_step_dict(step) for step in history.steps]
            data["signals"] = [dataclasses.asdict(signal) for signal in history.signals]
            data["events"] = {e.key: {"value": e.value, "set_at": e.set_at} for e in history.events}
        _print_json(data)
        return
    for key, value in data.items():
        if key in _SHOWN_APART:
            continue
        shown = _when(value) if isinstance(value, dt.datetime) else value
        print(f"{key + ':':<16}{'-' if shown is None else validate.printable(str(shown))}")
    # json.dumps writes every control character as a \u escape.
    print(f"{'payload:':<16}{json.dumps(job.payload, sort_keys=True)}")
    result = "-" if job.result is None else json.dumps(job.result, sort_keys=True)
    print(f"{'result:':<16}{result}")
    print(f"{'progress:':<16}{validate.printable(_progress_text(job.progress))}")
    print("last_error:")
    print(validate.printable(job.last_error or "-", lines=True))
    _print_errors(job.errors)
    if durable:
        assert history is not None
        _print_steps(history)


def _step_dict(step: ops.StepRecord) -> dict[str, Any]:
    data = dataclasses.asdict(step)
    data["duration"] = _step_duration(step)
    return data


def _step_duration(step: ops.StepRecord) -> float | None:
    if step.finished_at is None:
        return None
    return round((step.finished_at - step.started_at).total_seconds(), 6)


def _print_steps(history: ops.StepHistory) -> None:
    """A durable job's step log (name, status, duration, result or error),
    its signals (taken or not) and its events (key and latest value)."""
    print(f"steps ({len(history.steps)}):")
    for step in history.steps:
        name = validate.printable(step.name)
        took = _step_duration(step)
        line = f"  {step.seq:>3} {name:<24} {step.status:<10}"
        line += "-" if took is None else f"{took:.3f}s"
        if step.status == "waiting":
            line += f"  until {_when(step.wake_at) if step.wake_at else 'a signal'}"
        elif step.error:
            line += "  " + validate.printable(step.error.split("\n", 1)[0])
        else:
            line += "  " + json.dumps(step.result, sort_keys=True)
        print(line)
    for signal in history.signals:
        taken = f"taken {_when(signal.taken_at)}" if signal.taken_at else "not taken yet"
        print(f"  signal {validate.printable(signal.name)}: sent {_when(signal.sent_at)}, {taken}")
    for event in history.events:
        value = json.dumps(event.value, sort_keys=True)
        print(f"  event {validate.printable(event.key)} = {value}, set {_when(event.set_at)}")


def _progress_text(progress: dict[str, Any] | None) -> str:
    if progress is None:
        return "-"
    note = progress.get("note")
    return f"{progress['fraction']:.0%}" + (f" {note}" if note else "")


def _print_errors(errors: Sequence[dict[str, Any]]) -> None:
    """The error of every failed attempt kept, oldest first."""
    print(f"errors ({len(errors)} kept):" if errors else "errors: -")
    for entry in errors:
        worker = validate.printable(str(entry["worker_id"]))
        print(f"  attempt {entry['attempt']} at {_when(entry['at'])} on {worker}:")
        for line in validate.printable(str(entry["error"]), lines=True).splitlines() or [""]:
            print(f"    {line}")
