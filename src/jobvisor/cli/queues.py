"""The `queue` group: list queues with their counts, pause and resume one,
set, clear and list fleet-wide limits of queues and job types.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..config import Config
from ..queue import JobStatus
from ..queue.model import Limit, LimitScope
from .args import _database_flag, _no_op, _Parser, _subcommand
from .common import EXIT_OK, UsageError, _queue
from .output import _print_json, _table


def cmd_queue_pause(args: argparse.Namespace, config: Config) -> int:
    with _queue(config) as q:
        q.pause(args.name)
    print(f"paused {args.name}: no job of it starts until it is resumed")
    return EXIT_OK


def cmd_queue_resume(args: argparse.Namespace, config: Config) -> int:
    with _queue(config) as q:
        q.resume(args.name)
    print(f"resumed {args.name}")
    return EXIT_OK


def _limit_json(limit: Limit | None) -> dict[str, Any] | None:
    if limit is None:
        return None
    return {
        "concurrency": limit.concurrency,
        "key_concurrency": limit.key_concurrency,
        "rate": limit.rate,
        "key_rate": limit.key_rate,
        "source": limit.source.value,
    }


def cmd_queue_list(args: argparse.Namespace, config: Config) -> int:
    with _queue(config) as q:
        summary = q.summary()
        limited = {lim.name: lim for lim in q.limits() if lim.scope is LimitScope.QUEUE}
    names = sorted(set(summary.queues()) | set(limited))
    statuses = list(JobStatus)
    if args.json:
        _print_json(
            [
                {
                    "queue": name,
                    **{s.value: summary.count(s, name) for s in statuses},
                    "paused": name in summary.paused,
                    "limits": _limit_json(limited.get(name)),
                }
                for name in names
            ]
        )
        return EXIT_OK
    if not names:
        print("no queues: no job, nothing paused or limited")
        return EXIT_OK
    rows = [
        [
            name,
            *[str(summary.count(s, name)) for s in statuses],
            "yes" if name in summary.paused else "no",
            limited[name].describe() if name in limited else "-",
        ]
        for name in names
    ]
    print(_table(["queue", *[s.value for s in statuses], "paused", "limits"], rows))
    return EXIT_OK


def cmd_queue_limits(args: argparse.Namespace, config: Config) -> int:
    with _queue(config) as q:
        limits = q.limits()
    if args.json:
        _print_json(
            [
                {"scope": lim.scope.value, "name": lim.name, **(_limit_json(lim) or {})}
                for lim in limits
            ]
        )
        return EXIT_OK
    if not limits:
        print("no limits")
        return EXIT_OK
    rows = [
        [
            lim.scope.value,
            lim.name,
            *(str(v) if v is not None else "-" for v in (lim.concurrency, lim.key_concurrency)),
            lim.rate or "-",
            lim.key_rate or "-",
            lim.source.value,
        ]
        for lim in limits
    ]
    print(
        _table(["scope", "name", "concurrency", "per key", "rate", "rate per key", "set by"], rows)
    )
    return EXIT_OK


def cmd_queue_limit(args: argparse.Namespace, config: Config) -> int:
    """Set (replacing) or clear the limits of a queue, or with --type a job type."""
    scope = {"job_type": args.name} if args.type else {"queue": args.name}
    what = f"{'type' if args.type else 'queue'} {args.name}"
    values = (args.concurrency, args.key_concurrency, args.rate, args.key_rate)
    with _queue(config) as q:
        if args.clear:
            if any(v is not None for v in values):
                raise UsageError(
                    "--clear takes no --concurrency, --key-concurrency, --rate or --key-rate"
                )
            had = q.clear_limit(**scope)
            print(f"cleared the limits of {what}" if had else f"{what} had no limits")
            return EXIT_OK
        q.set_limit(
            **scope,
            concurrency=args.concurrency,
            key_concurrency=args.key_concurrency,
            rate=args.rate,
            key_rate=args.key_rate,
        )
        kind = LimitScope.TYPE if args.type else LimitScope.QUEUE
        (limit,) = [lim for lim in q.limits() if (lim.scope, lim.name) == (kind, args.name)]
    print(f"limited {what}: {limit.describe()}")
    return EXIT_OK


def add_queue(commands: Any) -> None:
    """Add `jobvisor queue` to the top-level parser."""
    queue = _subcommand(commands, "queue", "list queues, pause or resume one, limit one", _no_op)
    queue_commands = queue.add_subparsers(
        dest="queue_command", metavar="ACTION", parser_class=_Parser
    )
    queue_commands.required = True
    queue_list = _subcommand(
        queue_commands, "list", "every queue: job counts by status, paused, limits", cmd_queue_list
    )
    _database_flag(queue_list)
    queue_list.add_argument("--json", action="store_true", help="a JSON array")
    for name, func, help in (
        ("pause", cmd_queue_pause, "no claim takes a job of the queue until it is resumed"),
        ("resume", cmd_queue_resume, "let claims take jobs of the queue again"),
    ):
        sub = _subcommand(queue_commands, name, help, func)
        _database_flag(sub)
        sub.add_argument("name", metavar="NAME", help="the queue")
    queue_limits = _subcommand(
        queue_commands,
        "limits",
        "every fleet-wide limit, of queues and job types",
        cmd_queue_limits,
    )
    _database_flag(queue_limits)
    queue_limits.add_argument("--json", action="store_true", help="a JSON array")
    limit = _subcommand(
        queue_commands,
        "limit",
        "set (replacing) or --clear the fleet-wide limits of a queue, or of a type with --type",
        cmd_queue_limit,
    )
    _database_flag(limit)
    limit.add_argument("name", metavar="NAME", help="the queue (the job type with --type)")
    limit.add_argument("--type", action="store_true", help="NAME is a job type")
    limit.add_argument("--concurrency", type=int, metavar="N", help="running jobs, every host")
    limit.add_argument(
        "--key-concurrency", type=int, metavar="N", help="running jobs per concurrency key (types)"
    )
    limit.add_argument("--rate", metavar="N/UNIT", help='starts per s, m or h: "100/s"')
    limit.add_argument(
        "--key-rate", metavar="N/UNIT", help='starts per concurrency key (types): "10/s"'
    )
    limit.add_argument("--clear", action="store_true", help="remove every limit of NAME")
