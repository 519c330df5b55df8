"""`jobvisor run`: the supervisor and its workers, with a flag for every
setting.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..config import Config, add_flags
from .args import _subcommand


def cmd_run(args: argparse.Namespace, config: Config) -> int:
    # Imported here: the other commands need neither uvloop nor the worker code.
    from ..supervisor import main  # noqa: PLC0415

    return int(main(config))


def add_run(commands: Any) -> None:
    """Add `jobvisor run` to the top-level parser."""
    run = _subcommand(commands, "run", "run the supervisor and its workers until SIGTERM", cmd_run)
    add_flags(run)
