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
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any, NoReturn, TextIO

from . import __version__
from .config import (
    EX_CONFIG,
    FLAG_DEST,
    Config,
    ConfigError,
    add_flags,
    database_url_from_hidden_flag,
    flag_overrides,
    hide_database_url_flag,
)
from .exitcodes import ExitCode
from .log import install_redacting_hooks, setup_logging
from .queue import (
    InvalidArgument,
    JobNotFound,
    JobStatus,
    JobvisorError,
    NewJob,
    Queue,
    connect,
    validate,
)
from .queue.internal import service_ops
from .queue.model import ENQUEUE_KEYS, Job, Limit, LimitScope
from .redact import redact_text

EXIT_OK = ExitCode.OK
EXIT_FAILED = ExitCode.FAILED
EXIT_USAGE = ExitCode.USAGE
EXIT_INTERRUPTED = ExitCode.INTERRUPTED

ENQUEUE_BATCH = 1000
# A JSON line holds the payload and the other enqueue arguments: room for those.
LINE_OVERHEAD = 64 * 1024
DEFAULT_WATCH_INTERVAL = 2.0

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


class UsageError(JobvisorError):
    """Bad input found after argument parsing: exit 2, nothing done."""


class OperationFailed(JobvisorError):
    """The operation could not be done: exit 1."""


# --- output helpers -------------------------------------------------------------


def _err(prog: str, message: str) -> None:
    print(f"{prog}: error: {redact_text(message)}", file=sys.stderr)


def _json_default(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID | JobStatus):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _print_json(value: Any) -> None:
    print(json.dumps(value, default=_json_default, indent=2, sort_keys=False))


def _job_dict(job: Job) -> dict[str, Any]:
    return {
        "id": str(job.id),
        "queue": job.queue,
        "job_type": job.job_type,
        "status": job.status.value,
        "priority": job.priority,
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "run_at": job.run_at,
        "created_at": job.created_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
        "correlation_id": job.correlation_id,
        "dedupe_key": job.dedupe_key,
        "unique_key": job.unique_key,
        "worker_id": job.worker_id,
        "last_error": job.last_error,
        "payload": job.payload,
        "result": job.result,
        "progress": job.progress,
        "errors": list(job.errors),
    }


def _when(value: dt.datetime | None) -> str:
    if value is None:
        return "-"
    return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _one_line(text: str | None, width: int) -> str:
    if not text:
        return "-"
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Aligned columns; every cell escaped (`validate.printable`), as cells
    hold names and errors read from the database."""
    rows = [[validate.printable(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(header, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)


class Progress:
    """A progress bar on stderr, drawn only when stderr is a terminal."""

    def __init__(self, total: int, stream: TextIO, *, label: str = "enqueued") -> None:
        self.total, self.stream, self.label = total, stream, label
        self.enabled = stream.isatty() and total > 0
        self._last = -1.0

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if done < self.total and now - self._last < 0.1:
            return
        self._last = now
        width = 30
        filled = width * done // self.total
        bar = "#" * filled + "." * (width - filled)
        percent = 100 * done // self.total
        self.stream.write(f"\r[{bar}] {percent:3d}% {done}/{self.total} {self.label}")
        self.stream.flush()

    def finish(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


# --- configuration and connection --------------------------------------------------------


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


# --- commands ---------------------------------------------------------------------


def cmd_run(args: argparse.Namespace, config: Config) -> int:
    # Imported here: the other commands need neither uvloop nor the worker code.
    from .supervisor import main  # noqa: PLC0415

    return int(main(config))


def cmd_web(args: argparse.Namespace, config: Config) -> int:
    if not config.web_addr:
        raise UsageError("JOBVISOR_WEB_ADDR is empty: expected host:port")
    # Imported here: only this command (and `run` with the dashboard on) needs it.
    from .web import serve  # noqa: PLC0415

    setup_logging(config.log_format, config.log_level)
    try:
        asyncio.run(serve.run(config))
    except OSError as exc:
        raise OperationFailed(f"cannot serve on {config.web_addr}: {exc}") from None
    return EXIT_OK


def cmd_migrate(args: argparse.Namespace, config: Config) -> int:
    with _queue(config) as q:
        applied = q.migrate()
        version = q.schema_version()
    if applied:
        print(f"applied migrations {', '.join(map(str, applied))}; schema version {version}")
    else:
        print(f"schema is up to date (version {version})")
    return EXIT_OK


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


def cmd_show(args: argparse.Namespace, config: Config) -> int:
    with _queue(config) as q:
        job = q.get(args.id)
    _show_job(job, as_json=args.json)
    return EXIT_OK


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


_SHOWN_APART = ("last_error", "payload", "result", "progress", "errors")


def _show_job(job: Job, *, as_json: bool) -> None:
    """One job: its fields, payload, result and progress, the last error and
    the error of every failed attempt kept, oldest first."""
    data = _job_dict(job)
    if as_json:
        _print_json(data)
        return
    for key, value in data.items():
        if key in _SHOWN_APART:
            continue
        shown = _when(value) if isinstance(value, dt.datetime) else value
        print(f"{key + ':':<16}{'-' if shown is None else validate.printable(str(shown))}")
    # json.dumps writes every control character as a \u escape.
    print(f"{'payload:':<16}{json.dumps(job.payload, sort_keys=True)}")
    result = "-" if job.result is None else json.dumps(job.result, sort_keys=True)
    print(f"{'result:':<16}{result}")
    print(f"{'progress:':<16}{validate.printable(_progress_text(job.progress))}")
    print("last_error:")
    print(validate.printable(job.last_error or "-", lines=True))
    _print_errors(job.errors)


def _progress_text(progress: dict[str, Any] | None) -> str:
    if progress is None:
        return "-"
    note = progress.get("note")
    return f"{progress['fraction']:.0%}" + (f" {note}" if note else "")


def _print_errors(errors: Sequence[dict[str, Any]]) -> None:
    """The error of every failed attempt kept, oldest first."""
    print(f"errors ({len(errors)} kept):" if errors else "errors: -")
    for entry in errors:
        worker = validate.printable(str(entry["worker_id"]))
        print(f"  attempt {entry['attempt']} at {_when(entry['at'])} on {worker}:")
        for line in validate.printable(str(entry["error"]), lines=True).splitlines() or [""]:
            print(f"    {line}")


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


# --- the parser ---------------------------------------------------------------------


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

    def command(name: str, help: str, func: Callable[..., int], **kw: Any) -> _Parser:
        return _subcommand(commands, name, help, func, **kw)

    run = command("run", "run the supervisor and its workers until SIGTERM", cmd_run)
    add_flags(run)

    web = command(
        "web", "serve the dashboard on JOBVISOR_WEB_ADDR (127.0.0.1:8080) until Ctrl-C", cmd_web
    )
    _database_flag(web)
    web.add_argument(
        "--web-addr", dest=FLAG_DEST + "web_addr", metavar="HOST:PORT", help="where to listen"
    )

    migrate = command("migrate", "create or upgrade the database schema", cmd_migrate)
    _database_flag(migrate)

    enqueue = command(
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

    status = command("status", "job counts by queue and status, oldest pending age", cmd_status)
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

    dead = command("dead", "inspect, requeue or discard jobs that ran out of attempts", _no_op)
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

    show = command(
        "show", "one job: status, result, progress and the error of every attempt", cmd_show
    )
    _database_flag(show)
    show.add_argument("id", metavar="ID")
    show.add_argument("--json", action="store_true", help="a JSON object")

    batch = command("batch", "inspect a batch (`Queue.batch`)", _no_op)
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

    queue = command("queue", "list queues, pause or resume one, limit one", _no_op)
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

    cancel = command(
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

    cleanup = command("cleanup", "delete finished jobs past their retention", cmd_cleanup)
    _database_flag(cleanup)
    cleanup.add_argument(
        "--older-than",
        type=_seconds,
        metavar="SECONDS",
        help="one age for completed, dead and cancelled jobs (default: JOBVISOR_RETENTION_*)",
    )

    schedules = command(
        "schedules", "the periodic jobs: spec, zone, next and last run, enabled", cmd_schedules
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

    config = command(
        "config", "the effective configuration and where each value came from", cmd_config
    )
    _database_flag(config)
    config.add_argument("--json", action="store_true", help="a JSON array")

    command("version", "the installed version", cmd_version)
    return parser


def _no_op(args: argparse.Namespace, config: Config) -> int:  # pragma: no cover
    return EXIT_USAGE


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
    action = {"dead": "dead_command", "queue": "queue_command", "schedules": "schedules_command"}
    sub = getattr(args, action[args.command], None) if args.command in action else None
    prog = "jobvisor " + args.command + (f" {sub}" if sub else "")
    if args.command == "version":
        return cmd_version(args, None)
    if argv is None:  # our own command line: keep a password out of `ps`
        _hide_database_url(args)
    try:
        config = _load_config(args)
    except ConfigError as exc:
        print(f"jobvisor: configuration error: {redact_text(str(exc))}", file=sys.stderr)
        return EX_CONFIG
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


if __name__ == "__main__":
    sys.exit(main())
