"""Every exit code a jobvisor process uses, in one place.

`jobvisor run` (the supervisor), `python -m jobvisor.worker` and the other
commands share this table; the exit-code table in docs/operations.md and the systemd unit's
`RestartPreventExitStatus` are written from it.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1  # an operation failed, the HTTP address could not be bound, or a bug
    USAGE = 2  # a bad argument or bad input; nothing was done
    BOOT_FAILED = 3  # a worker cannot boot (import error, bad app): a retry cannot fix it
    CRASH_LOOP = 4  # workers kept dying with no job to blame: the restart budget is spent
    UNAVAILABLE = 69  # a worker could not reach the database at boot: retried with backoff
    CONFIG = 78  # invalid configuration (EX_CONFIG from sysexits.h)
    INTERRUPTED = 130  # Ctrl-C on a command (128 + SIGINT)
