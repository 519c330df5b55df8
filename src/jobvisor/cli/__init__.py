"""The `jobvisor` command line.

Every command reads the same `JOBVISOR_*` environment as `jobvisor run`
(`Config.load`), so an operator's shell, a systemd `EnvironmentFile=` and a
Kubernetes ConfigMap all mean the same thing; the commands that use the
database also take `--database-url`. Results go to stdout, errors to stderr
as one line, and the exit code says what happened:

    0   done
    1   the operation failed: no such job, a job in the wrong status, the
        database refused or could not be reached
    2   usage: a bad argument or bad input; nothing was done
    3   `run`: a worker cannot boot (its app does not load); a retry cannot fix it
    4   `run`: workers kept dying with no job to blame; the restart budget is spent
    78  the configuration is invalid (EX_CONFIG); systemd does not restart
    130 interrupted (Ctrl-C) during a one-shot command

The package has one module per command group, each owning its commands'
functions and their arguments (an `add_*` function that registers them on
the top-level parser), so a command is read and changed in one place:

    run          `jobvisor run`, the supervisor
    web          `jobvisor web`, the dashboard alone
    jobs         enqueue, status, show and cancel: single jobs and their counts
    dead         the `dead` group: list, show, requeue, discard
    queues       the `queue` group: list, pause, resume, limit, limits
    schedules    `schedules` and `schedules run`
    batches      the `batch` group
    workflows    the `workflow` group: show, cancel, retry
    maintenance  migrate, cleanup, config, version

and three that every group shares: `common` (the exit codes, the errors that
map to them, the connection, job ids, confirmation), `output` (tables with
every database text escaped by `validate.printable`, JSON, a job shown whole)
and `args` (the parser class, the shared flags and how a command is added).
This module builds the parser in the order `--help` lists the commands and
runs one: parsing, configuration, and the mapping of errors to exit codes.
The helpers' names keep their leading underscore: they are the package's
own, not an API.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence

from .. import __version__
from ..config import (
    EX_CONFIG,
    FLAG_DEST,
    Config,
    ConfigError,
    database_url_from_hidden_flag,
    hide_database_url_flag,
)
from ..log import install_redacting_hooks
from ..queue import InvalidArgument, JobvisorError
from ..redact import redact_text
from . import batches, dead, jobs, maintenance, queues, run, schedules, web, workflows
from .args import EXIT_CODES_HELP, _Parser
from .common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    OperationFailed,
    UsageError,
    _load_config,
)
from .output import _err

__all__ = ["build_parser", "main"]

# In the order `jobvisor --help` lists them.
_COMMANDS = (
    run.add_run,
    web.add_web,
    maintenance.add_migrate,
    jobs.add_enqueue,
    jobs.add_status,
    dead.add_dead,
    jobs.add_show,
    jobs.add_signal,
    batches.add_batch,
    workflows.add_workflow,
    queues.add_queue,
    jobs.add_cancel,
    maintenance.add_cleanup,
    schedules.add_schedules,
    maintenance.add_config,
    maintenance.add_version,
)

# The commands with actions, and where argparse keeps the action's name.
_ACTIONS = {
    "dead": "dead_command",
    "queue": "queue_command",
    "schedules": "schedules_command",
    "workflow": "workflow_command",
}


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="jobvisor",
        description="A durable background-job queue on PostgreSQL or SQLite, and the service "
        "that runs the jobs. Every command reads the JOBVISOR_* environment.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"jobvisor {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True
    for add in _COMMANDS:
        add(commands)
    return parser


def _hide_database_url(args: argparse.Namespace) -> None:
    """Mask secrets in what Python prints, and move a `--database-url` holding
    a password out of the process's command line (see `config`)."""
    install_redacting_hooks()
    dest = FLAG_DEST + "database_url"
    hide_database_url_flag(getattr(args, dest, None))
    hidden = database_url_from_hidden_flag()
    if hidden is not None and getattr(args, dest, None) is None:
        setattr(args, dest, hidden)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit code (see the module docstring)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors
        code: object = exc.code
        return code if isinstance(code, int) else EXIT_USAGE
    sub = getattr(args, _ACTIONS[args.command], None) if args.command in _ACTIONS else None
    prog = "jobvisor " + args.command + (f" {sub}" if sub else "")
    if args.command == "version":
        return maintenance.cmd_version(args, None)
    if argv is None:  # our own command line: keep a password out of `ps`
        _hide_database_url(args)
    try:
        config = _load_config(args)
    except ConfigError as exc:
        print(f"jobvisor: configuration error: {redact_text(str(exc))}", file=sys.stderr)
        return EX_CONFIG
    return _run(args, config, prog)


def _run(args: argparse.Namespace, config: Config, prog: str) -> int:
    """The command's function, its errors mapped to exit codes."""
    try:
        return int(args.func(args, config))
    except (UsageError, InvalidArgument) as exc:
        _err(prog, str(exc))
        return EXIT_USAGE
    except (OperationFailed, JobvisorError) as exc:
        _err(prog, str(exc))
        return EXIT_FAILED
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # stdout closed early (`jobvisor dead list | head`): not an error.
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
