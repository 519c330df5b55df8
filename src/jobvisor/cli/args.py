"""The parser's building blocks: the parser class that exits 2 on a usage
error and lists the exit codes in every --help, the `--database-url` flag,
the seconds type, and how a command module adds a command (`_subcommand`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from ..config import FLAG_DEST, Config
from ..queue import InvalidArgument, validate
from .common import EXIT_USAGE

EXIT_CODES_HELP = """\
exit codes:
  0   done
  1   the operation failed (no such job, wrong status, database error)
  2   usage: a bad argument or bad input; nothing was done
  3   run: a worker cannot boot (its app does not load)
  4   run: a crash loop (the restart budget is spent)
  78  invalid configuration (EX_CONFIG)
  130 interrupted
"""


class _Parser(argparse.ArgumentParser):
    """argparse with our usage exit code and the exit codes in every --help."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _seconds(text: str) -> float:
    """An argparse type: a non-negative number of seconds. Its upper bound is
    checked by the command (one line, exit 2), as for any other value."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected seconds") from None
    try:
        return validate.seconds("", value, high=sys.float_info.max)
    except InvalidArgument:
        raise argparse.ArgumentTypeError(f"{text!r}: expected seconds >= 0") from None


def _database_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--database-url",
        dest=FLAG_DEST + "database_url",
        metavar="URL",
        help="the database (default: $JOBVISOR_DATABASE_URL, else sqlite:///jobvisor.db)",
    )


def _subcommand(parent: Any, name: str, help: str, func: Callable[..., int], **kw: Any) -> _Parser:
    """A command under `parent` (an argparse subparsers action) that runs `func`."""
    sub: _Parser = parent.add_parser(
        name,
        help=help,
        description=help,
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        **kw,
    )
    sub.set_defaults(func=func)
    return sub


def _no_op(args: argparse.Namespace, config: Config) -> int:  # pragma: no cover
    return EXIT_USAGE
