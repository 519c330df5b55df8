"""The housekeeping commands: `migrate` (the schema), `cleanup` (finished jobs
and batches past their retention), `config` (the effective settings and
their sources) and `version`.
"""

from __future__ import annotations

import argparse
from typing import Any

from .. import __version__
from ..config import Config
from ..queue import JobStatus
from ..queue.internal import service_ops
from .args import _database_flag, _seconds, _subcommand
from .common import EXIT_OK, _queue
from .output import _print_json, _table


def cmd_migrate(args: argparse.Namespace, config: Config) -> int:
    with _queue(config) as q:
        applied = q.migrate()
        version = q.schema_version()
    if applied:
        print(f"applied migrations {', '.join(map(str, applied))}; schema version {version}")
    else:
        print(f"schema is up to date (version {version})")
    return EXIT_OK


def cmd_cleanup(args: argparse.Namespace, config: Config) -> int:
    older_than: Any
    if args.older_than is not None:
        older_than = args.older_than
    else:
        older_than = {
            JobStatus.COMPLETED: config.retention_completed,
            JobStatus.CANCELLED: config.retention_cancelled,
            JobStatus.DEAD: config.retention_dead,
        }
    with _queue(config) as q:
        deleted = q.cleanup(older_than)
        batches = service_ops(q).batch_cleanup(older_than)
    print(f"deleted {deleted} finished job{'s' if deleted != 1 else ''}")
    if batches:
        print(f"deleted {batches} finished batch{'es' if batches != 1 else ''} with their jobs")
    return EXIT_OK


def cmd_config(args: argparse.Namespace, config: Config) -> int:
    rows = config.describe()
    if args.json:
        _print_json([{"variable": v, "value": value, "source": s} for v, value, s in rows])
        return EXIT_OK
    print(_table(["variable", "value", "source"], [list(r) for r in rows]))
    return EXIT_OK


def cmd_version(args: argparse.Namespace, config: Config | None) -> int:
    print(f"jobvisor {__version__}")
    return EXIT_OK


def add_migrate(commands: Any) -> None:
    """Add `jobvisor migrate` to the top-level parser."""
    migrate = _subcommand(commands, "migrate", "create or upgrade the database schema", cmd_migrate)
    _database_flag(migrate)


def add_cleanup(commands: Any) -> None:
    """Add `jobvisor cleanup` to the top-level parser."""
    cleanup = _subcommand(
        commands, "cleanup", "delete finished jobs past their retention", cmd_cleanup
    )
    _database_flag(cleanup)
    cleanup.add_argument(
        "--older-than",
        type=_seconds,
        metavar="SECONDS",
        help="one age for completed, dead and cancelled jobs (default: JOBVISOR_RETENTION_*)",
    )


def add_config(commands: Any) -> None:
    """Add `jobvisor config` to the top-level parser."""
    config = _subcommand(
        commands, "config", "the effective configuration and where each value came from", cmd_config
    )
    _database_flag(config)
    config.add_argument("--json", action="store_true", help="a JSON array")


def add_version(commands: Any) -> None:
    """Add `jobvisor version` to the top-level parser."""
    _subcommand(commands, "version", "the installed version", cmd_version)
