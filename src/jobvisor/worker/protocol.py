"""The control channel between the supervisor and one worker process.

The supervisor starts each worker as a fresh interpreter:

    python -m jobvisor.worker

with the service's settings in its environment (`Config.to_env()`), plus:

- `JOBVISOR_WORKER_ID`: the random id of this incarnation (`new_worker_id()`);
  every claim the worker makes carries it, so `requeue_crashed` finds its jobs.
- `JOBVISOR_CONTROL_FD`: the write end of a pipe inherited by the worker.

The worker writes one JSON object per line to that pipe, each one of the
`TypedDict`s below (`ControlMessage`). Messages are small
(well under PIPE_BUF, so each write is atomic) and written from the event loop,
so a heartbeat proves the loop is turning:

    {"t": "ready"}                          booted: pool open, handlers loaded
    {"t": "ready", "schedules": [...]}      the same, with the app's declared
                                            schedules (the leader writes them)
    {"t": "hb"}                             heartbeat, every HEARTBEAT_INTERVAL
    {"t": "hb", "unhealthy": ["flush"]}     the same, naming the loops that are
                                            failing for a reason other than an
                                            unreachable database (`/healthz`
                                            answers 503 while any does)
    {"t": "job", "id": "<uuid>", "hard": 12.5}
                                            a job with a hard time limit started;
                                            the parent kills the worker if it has
                                            not ended `hard` seconds from now
                                            (sent again, with a tiny `hard`, for
                                            a thread handler past its cancel grace)
    {"t": "end", "id": "<uuid>"}            that job ended (any outcome)
    {"t": "metrics", ...}                   counts since the last one, about once
                                            a second; the shape is documented in
                                            `jobvisor.metrics` (`WorkerMetrics`)
    {"t": "fatal", "error": "..."}          cannot boot; the exit code follows

A worker with no `JOBVISOR_CONTROL_FD` runs standalone (tests, debugging).
A worker notices its parent is gone when `os.getppid()` changes and stops.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Mapping
from typing import Any, Final, Literal, NotRequired, TypedDict

from ..exitcodes import ExitCode
from ..metrics import MetricsMessage

HEARTBEAT_INTERVAL: Final = 1.0
WORKER_ID_ENV: Final = "JOBVISOR_WORKER_ID"
CONTROL_FD_ENV: Final = "JOBVISOR_CONTROL_FD"

# Exit codes of a worker process, read by the supervisor (see `ExitCode`).
EXIT_OK: Final = ExitCode.OK
EXIT_BOOT_FAILED: Final = ExitCode.BOOT_FAILED  # could not import the app
EXIT_CONFIG: Final = ExitCode.CONFIG


class Ready(TypedDict):
    t: Literal["ready"]
    schedules: NotRequired[list[dict[str, Any]]]  # the app's, as ScheduleSpec.message()


class Heartbeat(TypedDict):
    t: Literal["hb"]
    unhealthy: NotRequired[list[str]]


class JobStarted(TypedDict):
    t: Literal["job"]
    id: str
    hard: float


class JobEnded(TypedDict):
    t: Literal["end"]
    id: str


class Fatal(TypedDict):
    t: Literal["fatal"]
    error: str


ControlMessage = Ready | Heartbeat | JobStarted | JobEnded | MetricsMessage | Fatal


def new_worker_id() -> str:
    """A random id per worker incarnation, never a host or pod name."""
    return "w-" + secrets.token_hex(6)


def encode(message: Mapping[str, Any]) -> bytes:
    return (json.dumps(message, separators=(",", ":")) + "\n").encode()


def decode_lines(buffer: bytearray) -> list[dict[str, Any]]:
    """Pop every complete line from `buffer` and decode it; skip garbage.
    What a child wrote is not trusted: each value is a plain dict, to be
    checked field by field."""
    messages = []
    while (end := buffer.find(b"\n")) >= 0:
        line = bytes(buffer[:end])
        del buffer[: end + 1]
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict):
            messages.append(message)
    return messages


def unhealthy_loops(heartbeat: Mapping[str, Any]) -> list[str]:
    """The loops a heartbeat names as failing (none when it names none, or
    names them in a shape this version does not know)."""
    loops = heartbeat.get("unhealthy")
    return [str(name) for name in loops] if isinstance(loops, list) else []


class ControlChannel:
    """The worker's side of the pipe; a no-op when running standalone."""

    def __init__(self, fd: int | None) -> None:
        self.fd = fd

    @classmethod
    def from_env(cls) -> ControlChannel:
        raw = os.environ.get(CONTROL_FD_ENV)
        return cls(int(raw) if raw else None)

    def send(self, message: ControlMessage) -> None:
        if self.fd is None:
            return
        try:
            os.write(self.fd, encode(message))
        except (BrokenPipeError, OSError):
            self.fd = None  # the parent is gone; the worker's parent check stops it
