"""The signals the supervisor handles, and how it lets go of them.

The handlers only record the signal and wake the loop; what a signal means
is `decisions.escalate` (the stops) and the arbiter's `_handle_signal`."""

from __future__ import annotations

import asyncio
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


def ignore_signals(loop: asyncio.AbstractEventLoop) -> None:
    """Hand the signals back from the loop, ignored. Removing a loop's handler
    restores the default action, and a SIGTERM arriving then, while the
    process winds down after a clean stop (a storm of them, an impatient
    operator), would kill it and turn exit code 0 into death by SIGTERM (or
    SIGINT into a KeyboardInterrupt). Blocked meanwhile, so none slips through
    between the two steps; one pending is discarded by SIG_IGN."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED_SIGNALS)
    try:
        for signum in HANDLED_SIGNALS:
            loop.remove_signal_handler(signum)
            signal.signal(signum, signal.SIG_IGN)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
