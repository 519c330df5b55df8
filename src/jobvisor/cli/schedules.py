"""`jobvisor schedules`: the periodic jobs, and `schedules run NAME` to
enqueue one now.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..config import Config
from .args import _database_flag, _Parser, _subcommand
from .common import EXIT_OK, _queue
from .output import _print_json, _table, _when


def cmd_schedules(args: argparse.Namespace, config: Config) -> int:
    with _queue(config) as q:
        schedules = q.schedules()
    if args.json:
        _print_json(
            [
                {
                    "name": s.name,
                    "spec": s.spec,
                    "timezone": s.timezone,
                    "next_run_at": s.next_run_at.isoformat(),
                    "last_run_at": s.last_run_at.isoformat() if s.last_run_at else None,
                    "enabled": s.enabled,
                    "job_type": s.job_type,
                    "queue": s.queue,
                }
                for s in schedules
            ]
        )
        return EXIT_OK
    if not schedules:
        print("no schedules (a supervisor writes the app's at start)")
        return EXIT_OK
    rows = [
        [
            s.name,
            s.spec,
            s.timezone,
            _when(s.next_run_at) if s.enabled else "-",
            _when(s.last_run_at),
            "yes" if s.enabled else "no",
        ]
        for s in schedules
    ]
    print(_table(["name", "spec", "zone", "next run", "last run", "enabled"], rows))
    return EXIT_OK


def cmd_schedule_run(args: argparse.Namespace, config: Config) -> int:
    with _queue(config) as q:
        job_id = q.schedule_run(args.name)
    print(f"enqueued {job_id} for schedule {args.name!r}")
    return EXIT_OK


def add_schedules(commands: Any) -> None:
    """Add `jobvisor schedules` to the top-level parser."""
    schedules = _subcommand(
        commands,
        "schedules",
        "the periodic jobs: spec, zone, next and last run, enabled",
        cmd_schedules,
    )
    _database_flag(schedules)
    schedules.add_argument("--json", action="store_true", help="a JSON array")
    schedule_commands = schedules.add_subparsers(
        dest="schedules_command", metavar="ACTION", parser_class=_Parser
    )
    schedule_run = _subcommand(
        schedule_commands, "run", "enqueue one job of schedule NAME now", cmd_schedule_run
    )
    _database_flag(schedule_run)
    schedule_run.add_argument("name", metavar="NAME")
