"""What every command shares: the exit codes and the errors that map to them
(`UsageError` exit 2, `OperationFailed` exit 1), the configuration and the
one-connection queue a command opens, job ids read from arguments, and the
confirmation asked before a bulk change.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import uuid
from collections.abc import Iterator

from ..config import Config, flag_overrides
from ..exitcodes import ExitCode
from ..queue import JobvisorError, Queue, connect

EXIT_OK = ExitCode.OK
EXIT_FAILED = ExitCode.FAILED
EXIT_USAGE = ExitCode.USAGE
EXIT_INTERRUPTED = ExitCode.INTERRUPTED


class UsageError(JobvisorError):
    """Bad input found after argument parsing: exit 2, nothing done."""


class OperationFailed(JobvisorError):
    """The operation could not be done: exit 1."""


def _load_config(args: argparse.Namespace) -> Config:
    return Config.load(overrides=flag_overrides(args))


@contextlib.contextmanager
def _queue(config: Config) -> Iterator[Queue]:
    q = connect(
        config.database_url,
        pool_size=1,
        max_payload_bytes=config.max_payload_bytes,
        **config.connection(),
    )
    try:
        yield q
    finally:
        q.close()


def _job_id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise UsageError(f"job id {text!r}: expected a UUID") from None


def _confirm(question: str, *, what: str, verb: str) -> None:
    if not sys.stdin.isatty():
        raise UsageError(
            f"refusing to {verb} {what} without confirmation: stdin is not a terminal; pass --yes"
        )
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    answer = sys.stdin.readline().strip().lower()
    if answer not in ("y", "yes"):
        raise OperationFailed(f"not confirmed; nothing was done ({what})")
