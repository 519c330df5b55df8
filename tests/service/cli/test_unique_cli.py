"""`jobvisor enqueue` with a unique key (flags and JSON lines) and `jobvisor
show` printing it, through the real console script on both engines."""

from __future__ import annotations

import json
import uuid

import pytest

from jobvisor import Job, JobStatus, Queue
from tests.support.cli import Cli
from tests.support.queue import row_count


def test_enqueue_with_a_unique_key_prints_the_holders_id(cli: Cli, db: Queue) -> None:
    first = cli.ok("enqueue", "sync", "--unique-key", "account:1", "--payload", '{"v": 1}')
    again = cli.ok("enqueue", "sync", "--unique-key", "account:1", "--payload", '{"v": 2}')
    assert again == first
    assert db.get(first.strip()).payload == {"v": 1}
    replaced = cli.ok(
        "enqueue", "sync", "--unique-key", "account:1", "--payload", '{"v": 3}',
        "--on-conflict", "replace", "--delay", "60",
    )  # fmt: skip
    assert replaced == first
    job = db.get(first.strip())
    assert job.payload == {"v": 3} and job.status is JobStatus.PENDING
    other = cli.ok("enqueue", "sync", "--unique", "--unique-by-args", "--unique-period", "3600")
    assert other != first
    assert row_count(cli.url) == 2


def test_show_prints_the_unique_key(cli: Cli, db: Queue) -> None:
    job_id = cli.ok("enqueue", "report", "--unique-period", "3600").strip()
    shown = cli.ok("show", job_id)
    line = next(ln for ln in shown.splitlines() if ln.startswith("unique_key:"))
    assert line.split(None, 1)[1].startswith('{"job_type":"report","period":3600}@')
    data = json.loads(cli.ok("show", job_id, "--json"))
    assert data["unique_key"] == db.get(job_id).unique_key
    plain = cli.ok("enqueue", "report").strip()
    assert json.loads(cli.ok("show", plain, "--json"))["unique_key"] is None


def test_json_lines_carry_unique_and_on_conflict(cli: Cli, db: Queue) -> None:
    lines = [
        {"job_type": "sync", "payload": {"v": 1}, "unique": {"key": "k"}},
        {"job_type": "sync", "payload": {"v": 2}, "unique": {"key": "k"}, "on_conflict": "replace"},
        {"job_type": "sync", "payload": {"v": 3}},
    ]
    cli.ok("enqueue", "--file", "-", input="".join(json.dumps(x) + "\n" for x in lines))
    assert row_count(cli.url) == 2
    (held,) = [j for j in _all(db) if j.unique_key is not None]
    assert held.payload == {"v": 2}


def _all(db: Queue) -> list[Job]:
    jobs = db.claim("reader", limit=10)
    return [db.get(j.id) for j in jobs]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--unique-states", "running"], "includes 'pending'"),
        (["--unique-states", "pending,soon"], "'soon' is not a job status"),
        (["--unique-period", "1.5"], "whole seconds"),
        (["--unique-period", "0"], "unique.period=0"),
        (["--unique-key", ""], "unique.key=''"),
        (["--on-conflict", "replace"], "expected unique=Unique"),
        (["--unique", "--dedupe-key", "d"], "at most one of them"),
    ],
)
def test_bad_unique_options_are_usage_errors(
    cli: Cli, db: Queue, args: list[str], message: str
) -> None:
    result = cli("enqueue", "sync", *args)
    assert result.code == 2, result
    assert message in result.err
    assert len(result.err.strip().splitlines()) == 1
    assert row_count(cli.url) == 0


def test_a_bad_unique_line_is_named_and_nothing_written(cli: Cli, db: Queue) -> None:
    lines = '{"job_type": "a", "unique": {"key": "k"}}\n{"job_type": "a", "unique": {"when": 1}}\n'
    result = cli("enqueue", "--file", "-", input=lines)
    assert result.code == 2, result
    assert "line 2" in result.err and "when" in result.err
    assert row_count(cli.url) == 0
    assert cli("enqueue", "--file", "-", "--unique-key", "k").code == 2
    assert uuid.UUID(cli.ok("enqueue", "a", "--unique").strip())
