"""Single jobs and their counts: `enqueue` (one from arguments, or many from
JSON lines in one transaction), `status` (counts, once or --watch), `show`
(one job whole) and `cancel` (by id, or by type and queue after a
confirmation).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from typing import IO, Any

from ..config import Config
from ..queue import InvalidArgument, JobNotFound, JobStatus, NewJob, Queue, validate
from ..queue.internal import dashboard_ops
from ..queue.model import ENQUEUE_KEYS
from .args import _database_flag, _seconds, _subcommand
from .common import EXIT_FAILED, EXIT_OK, UsageError, _confirm, _job_id, _queue
from .output import Progress, _err, _show_job

ENQUEUE_BATCH = 1000
# A JSON line holds the payload and the other enqueue arguments: room for those.
LINE_OVERHEAD = 64 * 1024
DEFAULT_WATCH_INTERVAL = 2.0


def _parse_run_at(text: str, where: str) -> dt.datetime:
    try:
        value = dt.datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"{where}={text!r}: expected an ISO 8601 date and time") from None
    if value.tzinfo is None:
        raise UsageError(f"{where}={text!r}: expected a time zone (for example Z or +02:00)")
    return value


def _parse_payload(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise UsageError(f"{where}={_short(text)}: expected JSON nested less deep") from None
    except ValueError as exc:
        raise UsageError(f"{where}={_short(text)}: expected JSON ({exc})") from None


def _short(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _job_from_line(line: str, number: int, max_payload_bytes: int) -> NewJob:
    where = f"line {number}"
    if len(line) > max_payload_bytes + LINE_OVERHEAD:  # too long whatever its encoding
        raise UsageError(
            f"{where}: more than {max_payload_bytes + LINE_OVERHEAD} characters; expected a "
            f"payload of at most {max_payload_bytes} bytes (JOBVISOR_MAX_PAYLOAD_BYTES)"
        )
    try:
        item = json.loads(line)
    except RecursionError:
        raise UsageError(f"{where}: expected JSON nested less deep") from None
    except ValueError as exc:
        raise UsageError(f"{where}: not JSON ({exc})") from None
    if not isinstance(item, dict):
        raise UsageError(f"{where}: expected a JSON object with a job_type, got {_short(line)}")
    unknown = sorted(set(item) - set(ENQUEUE_KEYS))
    if unknown:
        raise UsageError(
            f"{where}: unknown key {unknown[0]!r}; expected some of {', '.join(ENQUEUE_KEYS)}"
        )
    if "job_type" not in item:
        raise UsageError(f"{where}: missing 'job_type'")
    if isinstance(item.get("run_at"), str):
        item["run_at"] = _parse_run_at(item["run_at"], f"{where}: run_at")
    try:
        job = NewJob.build(**item)
        validate.payload_size("payload", item.get("payload"), job.payload_bytes, max_payload_bytes)
    except InvalidArgument as exc:
        raise UsageError(f"{where}: {exc}") from None
    return job


def _read_jobs(stream: IO[str], max_payload_bytes: int) -> list[NewJob]:
    """Every line of `stream` as a job. A line is read at most one character
    past the longest a payload allows, so an endless one (`/dev/zero`, a
    file without newlines) is refused after that much, not held in memory."""
    bound = max_payload_bytes + LINE_OVERHEAD + 1
    jobs = []
    number = 0
    while line := stream.readline(bound):
        number += 1
        if line.strip() or len(line) == bound:  # a cut line is refused, blank or not
            jobs.append(_job_from_line(line, number, max_payload_bytes))
    return jobs


def cmd_enqueue(args: argparse.Namespace, config: Config) -> int:
    if args.file is not None:
        _check_file_alone(args)
        return _enqueue_file(args, config)
    if args.job_type is None:
        raise UsageError("give a job type, or --file PATH (- for stdin) with JSON lines")
    options: dict[str, Any] = {
        name: getattr(args, name)
        for name in (
            "queue",
            "priority",
            "delay",
            "max_attempts",
            "dedupe_key",
            "correlation_id",
            "concurrency_key",
            "on_conflict",
        )
        if getattr(args, name) is not None
    }
    options.update(_unique_option(args))
    if args.payload is not None:
        options["payload"] = _parse_payload(args.payload, "--payload")
    if args.run_at is not None:
        options["run_at"] = _parse_run_at(args.run_at, "--run-at")
    try:
        job = NewJob.build(args.job_type, **options)
        validate.payload_size(
            "payload", options.get("payload"), job.payload_bytes, config.max_payload_bytes
        )
    except InvalidArgument as exc:
        raise UsageError(str(exc)) from None
    with _queue(config) as q:
        (job_id,) = q.enqueue_many([job])
    print(job_id)
    return EXIT_OK


def _unique_option(args: argparse.Namespace) -> dict[str, Any]:
    """`unique` for `NewJob.build` from the --unique flags (its fields as a
    mapping, checked there), or nothing when none was given."""
    fields: dict[str, Any] = {}
    if args.unique_key is not None:
        fields["key"] = args.unique_key
    if args.unique_by_args:
        fields["by_args"] = True
    if args.unique_period is not None:
        fields["period"] = args.unique_period
    if args.unique_states is not None:
        fields["states"] = [s.strip() for s in args.unique_states.split(",") if s.strip()]
    return {"unique": fields} if fields or args.unique else {}


def _check_file_alone(args: argparse.Namespace) -> None:
    """`enqueue --file` takes every job's options from its lines, none from flags."""
    if args.job_type is not None:
        raise UsageError("give a job type or --file, not both")
    single_options = (
        "payload",
        "run_at",
        "delay",
        "dedupe_key",
        "correlation_id",
        "concurrency_key",
        "on_conflict",
    )
    given = [o for o in single_options if getattr(args, o) is not None]
    if given or args.queue is not None or args.priority is not None or _unique_option(args):
        raise UsageError("with --file, each line carries its own options")


def _enqueue_file(args: argparse.Namespace, config: Config) -> int:
    if args.file == "-":
        jobs = _read_jobs(sys.stdin, config.max_payload_bytes)
    else:
        try:
            with open(args.file, encoding="utf-8") as stream:
                jobs = _read_jobs(stream, config.max_payload_bytes)
        except OSError as exc:
            raise UsageError(f"--file {args.file!r}: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise UsageError(f"--file {args.file!r}: not UTF-8 text ({exc.reason})") from None
    progress = Progress(len(jobs), sys.stderr)
    with _queue(config) as q, q.transaction() as conn:  # all batches, or none
        done = 0
        progress.update(0)
        for start in range(0, len(jobs), ENQUEUE_BATCH):
            batch = jobs[start : start + ENQUEUE_BATCH]
            q.enqueue_many(batch, conn=conn)
            done += len(batch)
            progress.update(done)
    progress.finish()
    print(f"enqueued {len(jobs)} job{'s' if len(jobs) != 1 else ''}")
    return EXIT_OK


def cmd_status(args: argparse.Namespace, config: Config) -> int:
    with _queue(config) as q:
        if args.watch is None:
            _show_status(q, as_json=args.json, clear=False)
            return EXIT_OK
        try:
            validate.seconds("--watch", args.watch, positive=True, high=validate.MAX_INTERVAL)
        except InvalidArgument as exc:
            raise UsageError(str(exc)) from None
        clear = sys.stdout.isatty() and not args.json
        try:
            while True:
                _show_status(q, as_json=args.json, clear=clear)
                time.sleep(args.watch)
        except KeyboardInterrupt:
            return EXIT_OK


def _show_status(q: Queue, *, as_json: bool, clear: bool) -> None:
    summary = q.summary()
    if as_json:
        print(json.dumps(summary.to_dict()), flush=True)
        return
    if clear:
        sys.stdout.write("\x1b[H\x1b[2J")
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    print(f"{summary}\n{stamp}", flush=True)
    if not clear:
        print(flush=True)


def cmd_show(args: argparse.Namespace, config: Config) -> int:
    with _queue(config) as q:
        job = q.get(args.id)
        history = dashboard_ops(q).step_history(job.id)
    _show_job(job, as_json=args.json, history=history)
    return EXIT_OK


def cmd_signal(args: argparse.Namespace, config: Config) -> int:
    """`jobvisor signal ID NAME [JSON]`: send a job the signal its
    `job.wait_signal(NAME)` waits for (kept until then if it is not waiting yet)."""
    payload = None if args.payload is None else _parse_payload(args.payload, "payload")
    with _queue(config) as q:
        q.signal(args.id, args.name, payload)
    print(f"signal {args.name!r} sent to job {args.id}")
    return EXIT_OK


def cmd_cancel(args: argparse.Namespace, config: Config) -> int:
    """Cancel jobs by id, or every live job of --type and/or --queue (after a
    confirmation). A running job is asked to stop: its worker ends it."""
    bulk = args.type is not None or args.queue is not None
    if bool(args.ids) == bulk:
        usage = args.usage().rstrip()
        raise UsageError(f"give job ids, or --type TYPE and/or --queue QUEUE\n{usage}")
    if bulk:
        return _cancel_bulk(args, config)
    job_ids = [_job_id(text) for text in args.ids]
    failed = 0
    with _queue(config) as q:
        for job_id in job_ids:
            try:
                status = q.cancel(job_id, reason=args.reason)
            except JobNotFound as exc:
                _err("jobvisor cancel", str(exc))
                failed += 1
                continue
            if status is JobStatus.RUNNING:
                print(f"cancel requested {job_id} (running: its worker stops it)")
            else:
                print(f"cancelled {job_id}")
    return EXIT_FAILED if failed else EXIT_OK


def _cancel_bulk(args: argparse.Namespace, config: Config) -> int:
    parts = [
        f"type {args.type!r}" if args.type is not None else "",
        f"queue {args.queue!r}" if args.queue is not None else "",
    ]
    what = "every live job of " + " on ".join(p for p in parts if p)
    if not args.yes:
        _confirm(f"Cancel {what}?", what=what, verb="cancel")
    with _queue(config) as q:
        done = q.cancel_many(job_type=args.type, queue=args.queue, reason=args.reason)
    print(
        f"cancelled {done.cancelled} job{'s' if done.cancelled != 1 else ''}; "
        f"cancel requested for {done.requested} running"
    )
    return EXIT_OK


def add_enqueue(commands: Any) -> None:
    """Add `jobvisor enqueue` to the top-level parser."""
    enqueue = _subcommand(
        commands,
        "enqueue",
        "add one job from arguments, or many from JSON lines (--file, - for stdin)",
        cmd_enqueue,
    )
    _database_flag(enqueue)
    enqueue.add_argument("job_type", nargs="?", metavar="TYPE", help="the handler's name")
    enqueue.add_argument("--payload", metavar="JSON", help="the job's payload (default {})")
    enqueue.add_argument("--queue", metavar="NAME", help="the queue (default 'default')")
    enqueue.add_argument("--priority", type=int, metavar="N", help="higher runs first (0)")
    when = enqueue.add_mutually_exclusive_group()
    when.add_argument(
        "--delay",
        type=_seconds,
        metavar="SECONDS",
        help="run no sooner than this",
    )
    when.add_argument("--run-at", metavar="ISO8601", help="run no sooner than this time (with tz)")
    enqueue.add_argument("--max-attempts", type=int, metavar="N", help="attempts (default 20)")
    enqueue.add_argument("--dedupe-key", metavar="KEY", help="at most one live job per key")
    enqueue.add_argument("--correlation-id", metavar="ID", help="carried into logs")
    enqueue.add_argument(
        "--concurrency-key", metavar="KEY", help="the key its type's key_concurrency counts by"
    )
    enqueue.add_argument(
        "--unique",
        action="store_true",
        help="at most one job of the type at a time (the --unique-* options narrow the key)",
    )
    enqueue.add_argument("--unique-key", metavar="KEY", help="at most one job of the type per key")
    enqueue.add_argument(
        "--unique-by-args", action="store_true", help="the payload is part of the unique key"
    )
    enqueue.add_argument(
        "--unique-period",
        type=_seconds,
        metavar="SECONDS",
        help="one job per key in each period, finished ones included",
    )
    enqueue.add_argument(
        "--unique-states",
        metavar="LIST",
        help="the statuses that hold the key, comma-separated (default pending,running,retryable)",
    )
    enqueue.add_argument(
        "--on-conflict",
        choices=["ignore", "replace"],
        help="when a job holds the key: print its id (ignore, the default) or also give a "
        "pending one this payload and run time (replace)",
    )
    enqueue.add_argument(
        "--file",
        metavar="PATH",
        help="JSON lines, one job per line with the keys "
        + ", ".join(ENQUEUE_KEYS)
        + "; - reads stdin. Every line is checked before anything is written, and all "
        "go in one transaction",
    )


def add_status(commands: Any) -> None:
    """Add `jobvisor status` to the top-level parser."""
    status = _subcommand(
        commands, "status", "job counts by queue and status, oldest pending age", cmd_status
    )
    _database_flag(status)
    status.add_argument("--json", action="store_true", help="one JSON object")
    status.add_argument(
        "--watch",
        type=_seconds,
        nargs="?",
        const=DEFAULT_WATCH_INTERVAL,
        metavar="SECONDS",
        help=f"repeat every SECONDS (default {DEFAULT_WATCH_INTERVAL:g}) until Ctrl-C",
    )


def add_show(commands: Any) -> None:
    """Add `jobvisor show` to the top-level parser."""
    show = _subcommand(
        commands,
        "show",
        "one job: status, result, progress and the error of every attempt",
        cmd_show,
    )
    _database_flag(show)
    show.add_argument("id", metavar="ID")
    show.add_argument("--json", action="store_true", help="a JSON object")


def add_signal(commands: Any) -> None:
    """Add `jobvisor signal` to the top-level parser."""
    signal = _subcommand(
        commands, "signal", "send a job a signal its wait_signal(NAME) takes", cmd_signal
    )
    _database_flag(signal)
    signal.add_argument("id", metavar="ID")
    signal.add_argument("name", metavar="NAME", help="the signal's name")
    signal.add_argument("payload", nargs="?", metavar="JSON", help="its payload (default none)")


def add_cancel(commands: Any) -> None:
    """Add `jobvisor cancel` to the top-level parser."""
    cancel = _subcommand(
        commands,
        "cancel",
        "cancel jobs by id, or by --type/--queue; a running job's worker is asked to stop it",
        cmd_cancel,
    )
    _database_flag(cancel)
    cancel.add_argument("ids", nargs="*", metavar="ID")
    cancel.add_argument("--type", metavar="TYPE", help="every live job of this type")
    cancel.add_argument("--queue", metavar="QUEUE", help="every live job on this queue")
    cancel.add_argument("--reason", metavar="TEXT", help="why, kept in the job's last error")
    cancel.add_argument("--yes", "-y", action="store_true", help="do not ask to confirm")
    cancel.set_defaults(usage=cancel.format_usage)
