"""The `batch` group: `batch show`, a batch's counts and callbacks."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..config import Config
from .args import _database_flag, _no_op, _Parser, _subcommand
from .common import EXIT_OK, _queue
from .output import _print_json


def cmd_batch_show(args: argparse.Namespace, config: Config) -> int:
    """One batch: its members' counts by status, closed and finished, and its
    callbacks' job ids (read their results with `Queue.batch_results`)."""
    with _queue(config) as q:
        batch = q.get_batch(args.id)
    data = {
        "id": str(batch.id),
        "closed": batch.closed,
        "finished": batch.finished,
        "total": batch.total,
        "unfinished": batch.unfinished,
        "counts": dict(batch.counts),
        "callbacks": {kind: str(job_id) for kind, job_id in batch.callbacks.items()},
        "meta": batch.meta,
        "created_at": batch.created_at,
        "closed_at": batch.closed_at,
        "finished_at": batch.finished_at,
    }
    if args.json:
        _print_json(data)
        return EXIT_OK
    state = "finished" if batch.finished else "closed" if batch.closed else "open"
    print(f"batch {batch.id}: {state}, {batch.total} members, {batch.unfinished} unfinished")
    for status, count in batch.counts.items():
        print(f"  {status + ':':<12}{count}")
    for kind, job_id in batch.callbacks.items():
        print(f"  on_{kind + ':':<9} {job_id}")
    if batch.meta is not None:
        print(f"  meta:       {json.dumps(batch.meta, sort_keys=True)}")
    return EXIT_OK


def add_batch(commands: Any) -> None:
    """Add `jobvisor batch` to the top-level parser."""
    batch = _subcommand(commands, "batch", "inspect a batch (`Queue.batch`)", _no_op)
    batch_commands = batch.add_subparsers(
        dest="batch_command", metavar="ACTION", parser_class=_Parser
    )
    batch_commands.required = True
    batch_show = _subcommand(
        batch_commands, "show", "one batch: counts by status, finished, callbacks", cmd_batch_show
    )
    _database_flag(batch_show)
    batch_show.add_argument("id", metavar="ID")
    batch_show.add_argument("--json", action="store_true", help="a JSON object")
