"""`jobvisor queue list|pause|resume` through the real console script."""

from __future__ import annotations

import json

import pytest

from jobvisor import Queue
from tests.cli.conftest import Cli


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
    assert cli.ok("queue", "list").strip() == "no queues: no job and nothing paused"
    assert json.loads(cli.ok("queue", "list", "--json")) == []
    db.enqueue("t", queue="mail")
    db.enqueue("t", queue="mail")
    (job,) = db.claim("w")
    db.complete(job)
    db.pause("mail")
    db.pause("idle")
    db.enqueue("t", queue="images")

    lines = cli.ok("queue", "list").splitlines()
    statuses = ["pending", "running", "retryable", "completed", "dead", "cancelled"]
    assert lines[0].split() == ["queue", *statuses, "paused", "limits"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:]}
    assert rows == {
        "idle": ["0", "0", "0", "0", "0", "0", "yes", "-"],
        "images": ["1", "0", "0", "0", "0", "0", "no", "-"],
        "mail": ["1", "0", "0", "1", "0", "0", "yes", "-"],
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
