"""The signals the supervisor handles, and how it lets go of them.

The handlers only record the signal and wake the loop; what a signal means
is `decisions.escalate` (the stops) and the arbiter's `_handle_signal`."""

from __future__ import annotations

import signal
from typing import Final

HANDLED_SIGNALS: Final = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGQUIT,
    signal.SIGHUP,
    signal.SIGTTIN,
    signal.SIGTTOU,
)


def ignore_signals() -> None:
    """Hand the signals back from the loop, ignored. Removing a loop's handler
    restores the default action, and a SIGTERM arriving then, while the
    process winds down after a clean stop (a storm of them, an impatient
    operator), would kill it and turn exit code 0 into death by SIGTERM (or
    SIGINT into a KeyboardInterrupt). Blocking the signals meanwhile is not
    enough: the mask is the calling thread's, and the kernel hands a signal
    to any thread that does not block it (a pool's, an executor's). So each
    signal goes straight from the loop's handler to SIG_IGN, never through
    the default action; the loop keeps its record of the handler, and
    uvloop's close, which finds its signal handling already paused, leaves
    the disposition as it is."""
    for signum in HANDLED_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
