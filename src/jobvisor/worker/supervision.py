"""The names of a worker's loops and the state of their failures.

Every loop of a worker is supervised (`Worker._supervise`). An error is
classified (`queue.faults`): an unreachable database is waited out with
backoff for as long as it lasts; an error that may pass (a read-only server,
a full disk) is retried with backoff for at most `FAULT_LIMIT` seconds;
anything else, or an error that escapes a loop, stops the worker.
"""

from __future__ import annotations

import enum
from typing import Final

from ..queue.faults import Fault

# How long a loop may keep failing with an error that may pass (a read-only
# server, a full disk) before the worker gives up and exits for a fresh one.
FAULT_LIMIT: Final = 60.0
RETRY_BASE: Final = 0.05  # a loop's first retry after an error, in seconds
RETRY_CAP: Final = 2.0  # and its longest wait between two retries


class Loop(enum.StrEnum):
    """The long-running tasks of a worker, by the names the logs and the
    heartbeat use."""

    CLAIM = "claim"
    FLUSH = "flush"
    RENEW = "renew"
    LISTEN = "listen"
    HEARTBEAT = "heartbeat"


class LoopFailed(Exception):
    """A loop cannot go on: its error will not pass, or did not in time.
    The error is the `__cause__`; it has been logged."""


class Failing:
    """A loop's current run of failures (none when its last try passed)."""

    __slots__ = ("fault", "since", "tries")

    def __init__(self, since: float) -> None:
        self.since = since
        self.tries = 0
        self.fault = Fault.UNREACHABLE
