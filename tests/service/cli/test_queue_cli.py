"""`jobvisor queue list|pause|resume` through the real console script."""

from __future__ import annotations

import json

import pytest

from jobvisor import Queue
from tests.support.cli import Cli


def test_pause_and_resume_change_what_claims_get(cli: Cli, db: Queue) -> None:
    db.enqueue("t", queue="mail")
    assert cli.ok("queue", "pause", "mail").startswith("paused mail")
    assert db.paused() == ["mail"]
    assert db.claim("w") == []
    assert cli.ok("queue", "pause", "mail").startswith("paused mail")  # again: no change
    assert cli.ok("queue", "resume", "mail").strip() == "resumed mail"
    assert db.paused() == []
    assert len(db.claim("w")) == 1


def test_list_shows_counts_and_paused_for_every_queue(cli: Cli, db: Queue) -> None:
    assert cli.ok("queue", "list").strip() == "no queues: no job, nothing paused or limited"
    assert json.loads(cli.ok("queue", "list", "--json")) == []
    db.enqueue("t", queue="mail")
    db.enqueue("t", queue="mail")
    (job,) = db.claim("w")
    db.complete(job)
    db.pause("mail")
    db.pause("idle")
    db.enqueue("t", queue="images")

    lines = cli.ok("queue", "list").splitlines()
    statuses = ["pending", "running", "retryable", "completed", "dead", "cancelled", "waiting"]
    assert lines[0].split() == ["queue", *statuses, "paused", "limits"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:]}
    assert rows == {
        "idle": ["0", "0", "0", "0", "0", "0", "0", "yes", "-"],
        "images": ["1", "0", "0", "0", "0", "0", "0", "no", "-"],
        "mail": ["1", "0", "0", "1", "0", "0", "0", "yes", "-"],
    }
    listed = {e["queue"]: e for e in json.loads(cli.ok("queue", "list", "--json"))}
    counts = dict.fromkeys(statuses, 0) | {"pending": 1, "completed": 1}
    assert listed["mail"] == {"queue": "mail", **counts, "paused": True, "limits": None}
    assert (listed["idle"]["paused"], listed["images"]["paused"]) == (True, False)


@pytest.mark.parametrize("action", ["pause", "resume"])
def test_a_bad_name_is_a_usage_error_and_nothing_changes(cli: Cli, db: Queue, action: str) -> None:
    db.pause("kept")
    result = cli("queue", action, " ")
    assert result.code == 2
    assert result.err.startswith(f"jobvisor queue {action}: ")
    assert "queue=' '" in result.err
    assert result.out == ""
    assert db.paused() == ["kept"]


def test_an_action_is_required(cli: Cli) -> None:
    result = cli("queue")
    assert result.code == 2
    assert "ACTION" in result.err


def test_an_unmigrated_database_is_an_error(cli: Cli) -> None:
    result = cli("queue", "pause", "mail")
    assert result.code == 1
    assert result.err.startswith("jobvisor queue pause: ")


def test_limit_sets_lists_and_clears_a_limit(cli: Cli, db: Queue) -> None:
    assert cli.ok("queue", "limits").strip() == "no limits"
    out = cli.ok("queue", "limit", "mail", "--concurrency", "2", "--rate", "10/s")
    assert out.strip() == "limited queue mail: concurrency=2 rate=10/s"
    out = cli.ok("queue", "limit", "sync", "--type", "--key-concurrency", "1", "--key-rate", "5/m")
    assert out.strip() == "limited type sync: key=1 key_rate=5/m"
    db.enqueue_many([{"job_type": "t", "queue": "mail"}] * 4)
    assert len(db.claim("w", limit=10)) == 2

    lines = cli.ok("queue", "list").splitlines()
    assert lines[2].split()[0] == "mail" and lines[2].endswith("concurrency=2 rate=10/s")
    (listed,) = json.loads(cli.ok("queue", "list", "--json"))
    assert listed["limits"] == {
        "concurrency": 2,
        "key_concurrency": None,
        "rate": "10/s",
        "key_rate": None,
        "source": "operator",
    }
    limits = json.loads(cli.ok("queue", "limits", "--json"))
    assert [(e["scope"], e["name"], e["key_concurrency"], e["key_rate"]) for e in limits] == [
        ("queue", "mail", None, None),
        ("type", "sync", 1, "5/m"),
    ]
    table = cli.ok("queue", "limits").splitlines()
    assert table[0].split() == [
        *("scope", "name", "concurrency", "per", "key", "rate"),
        *("rate", "per", "key", "set", "by"),
    ]
    assert table[-1].split() == ["type", "sync", "-", "1", "-", "5/m", "operator"]

    assert cli.ok("queue", "limit", "mail", "--clear").strip() == "cleared the limits of queue mail"
    assert cli.ok("queue", "limit", "mail", "--clear").strip() == "queue mail had no limits"
    assert [lim.name for lim in db.limits()] == ["sync"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["mail", "--rate", "lots"], "rate='lots'"),
        (["mail", "--concurrency", "0"], "concurrency=0"),
        (["mail"], "expected concurrency, key_concurrency, rate or key_rate"),
        (["mail", "--key-concurrency", "2"], "key_concurrency=2 for queue 'mail'"),
        (["mail", "--key-rate", "2/s"], "key_rate='2/s' for queue 'mail'"),
        (["sync", "--type", "--key-rate", "2/week"], "key_rate='2/week'"),
        (["mail", "--clear", "--key-rate", "2/s"], "--clear takes no"),
        (["mail", "--clear", "--concurrency", "2"], "--clear takes no"),
    ],
)
def test_a_bad_limit_is_a_usage_error_and_nothing_changes(
    cli: Cli, db: Queue, argv: list[str], message: str
) -> None:
    db.set_limit(queue="kept", concurrency=1)
    result = cli("queue", "limit", *argv)
    assert result.code == 2, result.err
    assert message in result.err
    assert [lim.name for lim in db.limits()] == ["kept"]


def test_enqueue_takes_a_concurrency_key(cli: Cli, db: Queue) -> None:
    db.set_limit(job_type="sync", key_concurrency=1)
    for _ in range(2):
        cli.ok("enqueue", "sync", "--concurrency-key", "tenant:1")
    cli.ok("enqueue", "sync", "--concurrency-key", "tenant:2")
    assert len(db.claim("w", limit=10)) == 2  # one per key
