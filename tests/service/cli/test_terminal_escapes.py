"""Text read from the database (names written before they were checked,
error texts, payloads, keys, progress notes, worker names) is printed with
its control characters escaped: an escape sequence in a job's error cannot
retitle or clear the operator's terminal. The same on both engines."""

from __future__ import annotations

import json
import sqlite3
import uuid

import psycopg

from jobvisor import Queue
from jobvisor.queue.api import parse_url
from jobvisor.queue.jsonvalue import progress_json
from tests.support.cli import Cli
from tests.support.invariants import query_all

RETITLE = "\x1b]0;owned\x07\x1b[2J"
SHOWN = "\\x1b]0;owned\\x07\\x1b[2J"


def _write_raw(url: str, job_id: uuid.UUID, **columns: str) -> None:
    """Set text columns of a job as an older version (or a hand-written
    statement) could have left them, past today's checks."""
    engine, target = parse_url(url)
    sets = ", ".join(f"{name} = ?" for name in columns)
    if engine == "postgres":
        casts = ", ".join(
            f"{name} = %s" + ("::jsonb" if name == "errors" else "") for name in columns
        )
        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute(
                f"UPDATE jobvisor_jobs SET {casts} WHERE id = %s",
                [*columns.values(), job_id],
            )
        return
    lite = sqlite3.connect(target)
    try:
        with lite:
            lite.execute(
                f"UPDATE jobvisor_jobs SET {sets} WHERE id = ?", [*columns.values(), str(job_id)]
            )
    finally:
        lite.close()


def _hostile_dead_job(cli: Cli, db: Queue) -> uuid.UUID:
    job_id = db.enqueue(
        "t", {"s": RETITLE}, queue="q", dedupe_key="k" + RETITLE, correlation_id="c" + RETITLE,
        max_attempts=1,
    )  # fmt: skip
    (job,) = db.claim("w")
    db.renew_many([job], progress={job.id: progress_json(0.5, "half" + RETITLE)})
    db.fail(job, f"boom{RETITLE}\nsecond line{RETITLE}")
    _write_raw(cli.url, job_id, job_type="t" + RETITLE, queue="q" + RETITLE)
    return job_id


def _assert_escaped(out: str, *expected: str) -> None:
    assert "\x1b" not in out and "\x07" not in out, repr(out)
    for text in expected:
        assert text in out, (text, out)


def test_status_and_lists_escape_names(cli: Cli, db: Queue) -> None:
    _hostile_dead_job(cli, db)
    _assert_escaped(cli.ok("status"), "q" + SHOWN)
    _assert_escaped(cli.ok("queue", "list"), "q" + SHOWN)
    _assert_escaped(cli.ok("dead", "list"), "t" + SHOWN, "q" + SHOWN, "boom" + SHOWN)


def test_show_escapes_every_field(cli: Cli, db: Queue) -> None:
    job_id = _hostile_dead_job(cli, db)
    for argv in (["show", str(job_id)], ["dead", "show", str(job_id)]):
        out = cli.ok(*argv)
        _assert_escaped(
            out,
            "t" + SHOWN, "q" + SHOWN, "k" + SHOWN, "c" + SHOWN, "half" + SHOWN,
            "boom" + SHOWN, "second line" + SHOWN,
        )  # fmt: skip
        # The error's own lines stay lines; its payload is JSON's escapes.
        assert ("boom" + SHOWN + "\nsecond line") in out
        assert "\\u001b" in out


def test_a_worker_name_in_the_errors_is_escaped(cli: Cli, db: Queue) -> None:
    job_id = db.enqueue("t", max_attempts=1)
    (job,) = db.claim("w")
    db.fail(job, "boom")
    ((raw,),) = query_all(cli.url, ["SELECT errors FROM jobvisor_jobs"])[0]
    (entry,) = json.loads(raw) if isinstance(raw, str) else raw
    entry.update(worker_id="w\x1b[2J", error="e\x07")
    _write_raw(cli.url, job_id, worker_id="w" + RETITLE, errors=json.dumps([entry]))
    _assert_escaped(cli.ok("show", str(job_id)), "w" + SHOWN, "w\\x1b[2J", "e\\x07")
