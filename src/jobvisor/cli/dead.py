"""The `dead` group: list and show jobs that ran out of attempts, requeue or
discard them by id or by type.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from ..config import Config
from ..queue import InvalidArgument, JobNotFound, Queue, validate
from .args import _database_flag, _no_op, _Parser, _subcommand
from .common import EXIT_FAILED, EXIT_OK, UsageError, _confirm, _job_id, _queue
from .output import _job_dict, _one_line, _print_json, _show_job, _table, _when


def cmd_dead_list(args: argparse.Namespace, config: Config) -> int:
    try:
        validate.count("--limit", args.limit, high=validate.MAX_LIST_LIMIT)
    except InvalidArgument as exc:
        raise UsageError(str(exc)) from None
    with _queue(config) as q:
        jobs = q.dead.list(args.limit, job_type=args.type)
        total = q.dead.count()
    if args.json:
        _print_json([_job_dict(j) for j in jobs])
        return EXIT_OK
    if not jobs:
        print("no dead jobs" + (f" of type {args.type!r}" if args.type else ""))
        return EXIT_OK
    rows = [
        [
            str(j.id),
            j.job_type,
            j.queue,
            f"{j.attempts}/{j.max_attempts}",
            _when(j.finished_at),
            _one_line(j.last_error, 60),
        ]
        for j in jobs
    ]
    print(_table(["id", "type", "queue", "attempts", "died", "last error"], rows))
    print(f"\nshowing {len(jobs)} of {total} dead job{'s' if total != 1 else ''}")
    return EXIT_OK


def cmd_dead_show(args: argparse.Namespace, config: Config) -> int:
    with _queue(config) as q:
        job = q.dead.get(args.id)
    _show_job(job, as_json=args.json)
    return EXIT_OK


def _bulk(
    args: argparse.Namespace,
    config: Config,
    *,
    verb: str,
    action: Callable[[Queue, uuid.UUID], None],
    of_type: Callable[[Queue, str], tuple[int, Sequence[uuid.UUID]]],
) -> int:
    """Requeue or discard dead jobs by id, or every dead job of a type after
    a confirmation that shows how many. `of_type` does a whole type at once
    and returns how many it did and the ids it left, which are tried one by
    one so that each refusal is named."""
    if bool(args.ids) == bool(args.type):
        raise UsageError("give job ids or --type TYPE (one of them)")
    past = "requeued" if verb == "requeue" else "discarded"
    with _queue(config) as q:
        done = 0
        if args.ids:
            ids: Sequence[uuid.UUID] = [_job_id(text) for text in args.ids]
        else:
            count = q.dead.count(job_type=args.type)
            if not count:
                print(f"no dead jobs of type {args.type!r}")
                return EXIT_OK
            what = f"{count} dead job{'s' if count != 1 else ''} of type {args.type!r}"
            if not args.yes:
                _confirm(f"{verb.capitalize()} {what}?", what=what, verb=verb)
            done, ids = of_type(q, args.type)
        failed = _each(q, ids, action)
        done += len(ids) - len(failed)
    print(f"{past} {done} dead job{'s' if done != 1 else ''}")
    for message in failed:
        print(f"jobvisor dead {verb}: {message}", file=sys.stderr)
    return EXIT_OK if not failed else EXIT_FAILED


def _each(
    q: Queue, ids: Sequence[uuid.UUID], action: Callable[[Queue, uuid.UUID], None]
) -> list[str]:
    """`action` on every job of `ids`; the refusals' messages (not dead any
    more, or a live job holds its dedupe key), said at the end while the
    others are still done."""
    failed = []
    for job_id in ids:
        try:
            action(q, job_id)
        except (JobNotFound, InvalidArgument) as exc:
            failed.append(str(exc))
    return failed


def cmd_dead_requeue(args: argparse.Namespace, config: Config) -> int:
    def of_type(q: Queue, job_type: str) -> tuple[int, Sequence[uuid.UUID]]:
        result = q.dead.requeue_type(job_type)
        return result.requeued, result.held

    return _bulk(
        args, config, verb="requeue", action=lambda q, i: q.dead.requeue(i), of_type=of_type
    )


def cmd_dead_discard(args: argparse.Namespace, config: Config) -> int:
    return _bulk(
        args,
        config,
        verb="discard",
        action=lambda q, i: q.dead.discard(i),
        of_type=lambda q, t: (q.dead.discard_type(t), ()),
    )


def add_dead(commands: Any) -> None:
    """Add `jobvisor dead` to the top-level parser."""
    dead = _subcommand(
        commands, "dead", "inspect, requeue or discard jobs that ran out of attempts", _no_op
    )
    dead_commands = dead.add_subparsers(dest="dead_command", metavar="ACTION", parser_class=_Parser)
    dead_commands.required = True

    def dead_command(name: str, help: str, func: Callable[..., int]) -> _Parser:
        sub = _subcommand(dead_commands, name, help, func)
        _database_flag(sub)
        return sub

    dead_list = dead_command("list", "dead jobs, oldest first", cmd_dead_list)
    dead_list.add_argument("--type", metavar="TYPE", help="only this job type")
    dead_list.add_argument("--limit", type=int, default=100, metavar="N", help="at most N (100)")
    dead_list.add_argument("--json", action="store_true", help="a JSON array")
    dead_show = dead_command(
        "show", "one dead job with its payload, last error and error history", cmd_dead_show
    )
    dead_show.add_argument("id", metavar="ID")
    dead_show.add_argument("--json", action="store_true", help="a JSON object")
    for name, func, help in (
        ("requeue", cmd_dead_requeue, "back to pending with attempts reset"),
        ("discard", cmd_dead_discard, "delete for good"),
    ):
        sub = dead_command(name, f"{help}: by id, or every dead job of --type", func)
        sub.add_argument("ids", nargs="*", metavar="ID")
        sub.add_argument("--type", metavar="TYPE", help="every dead job of this type")
        sub.add_argument("--yes", "-y", action="store_true", help="do not ask to confirm")
