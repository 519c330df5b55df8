"""Bad input on the command line, values out of bounds included, is one line
on stderr naming the value and exit code 2, never a traceback, and nothing is
written; the same on both engines."""

from __future__ import annotations

import json
import resource
import subprocess
from pathlib import Path

import pytest

from jobvisor import Queue
from tests.support.cli import JOBVISOR, Cli, clean_env

DEEP = "[" * 3000 + "]" * 3000


def refused(cli: Cli, db: Queue, *argv: str, input: str | None = None, named: str,
            env: dict[str, str] | None = None) -> None:  # fmt: skip
    before = db.summary().total
    result = cli(*argv, input=input, env=env)
    assert result.code == 2, result
    lines = result.err.splitlines()
    assert len(lines) == 1, lines
    assert "Traceback" not in result.err
    assert named in lines[0] and "expected" in lines[0], lines[0]
    assert result.out == ""
    assert db.summary().total == before


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--run-at", "0001-01-01T00:00:00+14:00"], "run_at="),
        (["--run-at", "9999-12-31T23:00:00-05:00"], "run_at="),
        (["--delay", "1e12"], "delay=1000000000000.0"),
        (["--delay", "4e9"], "delay=4000000000.0"),
        (["--priority", str(2**63)], "priority=9223372036854775808"),
        (["--max-attempts", str(2**63)], "max_attempts=9223372036854775808"),
        (["--queue", "q" * 8000], "queue='qqqq"),
        (["--dedupe-key", "k" * 5000], "dedupe_key='kkkk"),
        (["--payload", DEEP], "--payload="),
        (["--payload", '{"n": 1' + "0" * 5000 + "}"], "--payload="),
        (["--payload", '"\\udc80"'], "payload='\\udc80'"),
        (["--queue", "q\x1b[2J"], "queue='q\\x1b[2J'"),
    ],
)
def test_enqueue_refuses_values_out_of_bounds(
    cli: Cli, db: Queue, argv: list[str], named: str
) -> None:
    refused(cli, db, "enqueue", "t", *argv, named=named)


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ({"job_type": "t", "run_at": "0001-01-01T00:00:00+14:00"}, "run_at="),
        ({"job_type": "t", "delay": 1e12}, "delay=1000000000000.0"),
        ({"job_type": "t", "priority": 2**63}, "priority=9223372036854775808"),
        ({"job_type": "t\udc80"}, "job_type='t\\udc80'"),
        ({"job_type": "t", "queue": "q" * 8000}, "queue='qqqq"),
        ({"job_type": "t", "payload": {"s": "\ud800"}}, "payload="),
        ({"job_type": "t\x1b]0;x\x07"}, "job_type='t\\x1b]0;x\\x07'"),
    ],
)
def test_a_file_line_out_of_bounds_names_its_number(
    cli: Cli, db: Queue, line: dict[str, object], named: str
) -> None:
    good = '{"job_type": "ok"}'
    text = f"{good}\n{json.dumps(line)}\n"
    refused(cli, db, "enqueue", "--file", "-", input=text, named=named)
    assert "line 2" in cli("enqueue", "--file", "-", input=text).err


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ('{"job_type": "t", "payload": ' + DEEP + "}", "expected JSON nested less deep"),
        ('{"job_type": "t", "payload": 1' + "0" * 5000 + "}", "not JSON"),
    ],
)
def test_a_file_line_that_json_cannot_read_is_one_line(
    cli: Cli, db: Queue, raw: str, named: str
) -> None:
    result = cli("enqueue", "--file", "-", input='{"job_type": "ok"}\n' + raw + "\n")
    assert result.code == 2, result
    assert result.err.splitlines() == [result.err.strip()]
    assert "line 2" in result.err and named in result.err
    assert db.summary().total == 0


def test_the_payload_size_limit_on_the_command_line(cli: Cli, db: Queue) -> None:
    env = clean_env(JOBVISOR_DATABASE_URL=cli.url, JOBVISOR_MAX_PAYLOAD_BYTES="2048")
    big = json.dumps("x" * 3000)
    refused(cli, db, "enqueue", "t", "--payload", big, env=env, named="at most 2048 bytes")
    line = json.dumps({"job_type": "t", "payload": "x" * 3000})
    refused(cli, db, "enqueue", "--file", "-", input=line + "\n", env=env,
            named="line 1: payload=")  # fmt: skip
    huge = json.dumps({"job_type": "t", "payload": "x" * 200_000})
    refused(cli, db, "enqueue", "--file", "-", input=huge + "\n", env=env,
            named="expected a payload of at most 2048 bytes")  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["dead", "list", "--limit", str(2**63)], "--limit=9223372036854775808"),
        (["dead", "list", "--limit", "0"], "--limit=0"),
        (["dead", "list", "--type", "a\x01" + "b" * 300], "job_type="),
        (["cleanup", "--older-than", "1e308"], "older_than=1e+308"),
        (["status", "--watch", "1e300"], "--watch=1e+300"),
        (["queue", "pause", "q\x1b[2J"], "queue='q\\x1b[2J'"),
        (["queue", "limit", "q\x9b", "--concurrency", "1"], "queue='q\\x9b'"),
        (["queue", "limit", "--type", "t\u202e", "--concurrency", "1"], "job_type='t\\u202e'"),
        (["cancel", "--queue", "q\x07", "--yes"], "queue='q\\x07'"),
    ],
)
def test_other_commands_refuse_values_out_of_bounds(
    cli: Cli, db: Queue, argv: list[str], named: str
) -> None:
    refused(cli, db, *argv, named=named)


def _limited_memory() -> None:
    """Run the child under a 1 GiB address-space cap: reading an endless line
    whole fails there at once, not after filling the machine's memory."""
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


@pytest.mark.parametrize("source", ["/dev/zero", "long"])
def test_an_endless_file_line_is_refused_after_the_bound(
    cli: Cli, db: Queue, tmp_path: Path, source: str
) -> None:
    """`--file` reads a line at most one character past the longest a payload
    allows: `/dev/zero` (no newline ever) or a huge line is refused as too
    long, in bounded memory, naming the line, and nothing is written."""
    path = source
    if source == "long":
        long = tmp_path / "long.jsonl"
        long.write_text('{"job_type": "ok"}\n' + " " * 3_000_000 + "x\n")
        path = str(long)
    env = clean_env(JOBVISOR_DATABASE_URL=cli.url, JOBVISOR_MAX_PAYLOAD_BYTES="2048")
    done = subprocess.run(
        [str(JOBVISOR), "enqueue", "--file", path],
        capture_output=True, text=True, timeout=120, check=False, cwd=cli.cwd, env=env,
        preexec_fn=_limited_memory,
    )  # fmt: skip
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    line = "line 1" if source == "/dev/zero" else "line 2"
    assert f"{line}: more than 67584 characters" in done.stderr, done.stderr
    assert "expected a payload of at most 2048 bytes" in done.stderr
    assert done.stdout == ""
    assert db.summary().total == 0
