"""The command line, end to end: the real console script as a subprocess,
against a real SQLite file and a real PostgreSQL database."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import select
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import jobvisor
import jobvisor.settings
from jobvisor import JobStatus, Queue
from jobvisor.cli import build_parser
from jobvisor.queue.internal import service_ops
from tests.support.cli import JOBVISOR, Cli, clean_env


def make_dead(q: Queue, job_type: str, n: int) -> list[uuid.UUID]:
    ids = [q.enqueue(job_type, {"n": i}, max_attempts=1) for i in range(n)]
    for job in q.claim("w-test", job_types=[job_type], limit=n):
        q.fail(job, RuntimeError(f"boom {job.payload['n']}"))
    assert all(q.get(i).status == JobStatus.DEAD for i in ids)
    return ids


# --- help, version, exit codes ------------------------------------------------------


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.update(action.choices)
    return found


def command_paths() -> list[list[str]]:
    """Every command and sub-command of the real parser."""
    paths: list[list[str]] = [[]]
    for name, sub in _subcommands(build_parser()).items():
        paths.append([name])
        paths += [[name, inner] for inner in _subcommands(sub)]
    return paths


@pytest.mark.parametrize("path", command_paths(), ids=lambda p: " ".join(p) or "jobvisor")
def test_help_on_every_command(path: list[str], tmp_path: Path) -> None:
    done = subprocess.run(
        [str(JOBVISOR), *path, "--help"], capture_output=True, text=True, timeout=60,
        check=False, cwd=tmp_path, env=clean_env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: jobvisor")
    assert "exit codes:" in done.stdout
    assert not (tmp_path / "jobvisor.db").exists()  # help touches no database


def test_every_command_has_help() -> None:
    names = {p[0] for p in command_paths() if p}
    assert names == {
        "run", "migrate", "enqueue", "status", "show", "dead", "cancel", "cleanup", "config",
        "version", "queue", "schedules", "web", "batch", "workflow", "signal",
    }  # fmt: skip
    assert {tuple(p) for p in command_paths() if len(p) == 2} == {
        ("dead", "list"), ("dead", "show"), ("dead", "requeue"), ("dead", "discard"),
        ("queue", "list"), ("queue", "pause"), ("queue", "resume"), ("queue", "limit"),
        ("queue", "limits"), ("schedules", "run"), ("batch", "show"),
        ("workflow", "show"), ("workflow", "cancel"), ("workflow", "retry"),
    }  # fmt: skip


def test_run_has_a_flag_for_every_setting(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(JOBVISOR), "run", "--help"], capture_output=True, text=True, timeout=60,
        check=False, cwd=tmp_path, env=clean_env(),
    )  # fmt: skip
    for setting in jobvisor.settings.SETTINGS:
        assert setting.flag in done.stdout
        assert setting.env in done.stdout


def test_version(tmp_path: Path) -> None:
    for argv in (["version"], ["--version"]):
        done = subprocess.run(
            [str(JOBVISOR), *argv], capture_output=True, text=True, timeout=60, check=False,
            cwd=tmp_path, env=clean_env(JOBVISOR_WORKERS="not a number"),
        )  # fmt: skip
        assert (done.returncode, done.stdout) == (0, f"jobvisor {jobvisor.__version__}\n")


def test_python_dash_m_runs_the_same_cli(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "jobvisor.cli", "version"], capture_output=True, text=True,
        timeout=60, check=False, cwd=tmp_path, env=clean_env(),
    )  # fmt: skip
    assert done.stdout == f"jobvisor {jobvisor.__version__}\n"


def test_usage_errors_exit_2(cli: Cli) -> None:
    for argv in (["nonsense"], [], ["dead"], ["status", "--watch", "soon"], ["cancel"]):
        result = cli(*argv)
        assert result.code == 2, (argv, result)
        assert "usage:" in result.err


def test_a_bad_setting_exits_78_with_one_line_naming_it(cli: Cli) -> None:
    for command in (["status"], ["config"], ["migrate"], ["run"]):
        result = cli(*command, env=clean_env(JOBVISOR_DATABASE_URL=cli.url, JOBVISOR_WORKERS="0"))
        assert result.code == 78, (command, result)
        assert result.err.count("\n") == 1
        assert "JOBVISOR_WORKERS='0'" in result.err
    result = cli("run", "--lease", "-1")
    assert result.code == 78
    assert "--lease='-1'" in result.err


def test_a_bad_database_url_flag_exits_78(cli: Cli) -> None:
    result = cli("status", "--database-url", "mysql://root:hunter2@db/x")
    assert result.code == 78
    assert "hunter2" not in result.err
    assert "--database-url" in result.err


def test_an_unmigrated_database_says_to_migrate(cli: Cli) -> None:
    result = cli("status")
    assert result.code == 1
    assert "jobvisor migrate" in result.err


def test_a_database_that_refuses_the_connection_fails_with_the_servers_words(
    pg_url: str, tmp_path: Path
) -> None:
    cli = Cli(pg_url.rsplit("/", 1)[0] + "/jv_no_such_database", tmp_path)
    result = cli("status")
    assert result.code == 1
    assert result.err.count("\n") == 1
    assert 'database "jv_no_such_database" does not exist' in result.err
    assert "Traceback" not in result.err


def test_a_url_option_libpq_does_not_know_exits_78(cli: Cli) -> None:
    result = cli("status", "--database-url", "postgresql://u:hunter2@127.0.0.1/x?no_such_option=1")
    assert result.code == 78
    assert "no_such_option" in result.err
    assert "hunter2" not in result.err


# --- migrate and enqueue --------------------------------------------------------------


def test_migrate_is_idempotent(cli: Cli) -> None:
    assert "applied migrations" in cli.ok("migrate")
    assert "up to date" in cli.ok("migrate")


def test_enqueue_one_job_with_every_option(cli: Cli, db: Queue) -> None:
    out = cli.ok(
        "enqueue", "send_email", "--payload", '{"to": "a@example.org"}', "--queue", "mail",
        "--priority", "7", "--run-at", "2030-01-02T03:04:05+02:00", "--max-attempts", "4",
        "--dedupe-key", "welcome-42", "--correlation-id", "req-1",
    )  # fmt: skip
    job = db.get(uuid.UUID(out.strip()))
    assert (job.job_type, job.payload, job.queue, job.priority) == (
        "send_email", {"to": "a@example.org"}, "mail", 7,
    )  # fmt: skip
    assert job.run_at == dt.datetime(2030, 1, 2, 1, 4, 5, tzinfo=dt.UTC)
    assert (job.max_attempts, job.dedupe_key, job.correlation_id) == (4, "welcome-42", "req-1")
    assert job.status == JobStatus.PENDING
    # The same dedupe key while the job is live: the same job, nothing new.
    again = cli.ok("enqueue", "send_email", "--dedupe-key", "welcome-42")
    assert again.strip() == str(job.id)
    assert db.summary().total == 1


def test_enqueue_with_a_delay_and_defaults(cli: Cli, db: Queue) -> None:
    job = db.get(cli.ok("enqueue", "resize", "--delay", "3600").strip())
    assert (job.queue, job.priority, job.payload, job.max_attempts) == ("default", 0, {}, 20)
    assert job.run_at > job.created_at + dt.timedelta(seconds=3500)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["enqueue", "t", "--payload", "{nope"], "--payload"),
        (["enqueue", "t", "--run-at", "tomorrow"], "--run-at='tomorrow'"),
        (["enqueue", "t", "--run-at", "2030-01-01T00:00:00"], "time zone"),
        (["enqueue", "t", "--max-attempts", "0"], "max_attempts=0"),
        (["enqueue", " "], "job_type"),
        (["enqueue"], "give a job type"),
        (["enqueue", "t", "--file", "-"], "not both"),
        (["enqueue", "t", "--delay", "-1"], "--delay"),
        (["enqueue", "--file", "/nonexistent/jobs.jsonl"], "/nonexistent/jobs.jsonl"),
    ],
)
def test_enqueue_refuses_bad_arguments(cli: Cli, db: Queue, argv: list[str], message: str) -> None:
    result = cli(*argv)
    assert result.code == 2, result
    assert message in result.err
    assert db.summary().total == 0


def test_enqueue_json_lines_from_a_file_and_from_stdin(cli: Cli, db: Queue) -> None:
    lines = [
        {"job_type": "send_email", "payload": {"n": i}, "queue": "mail", "priority": i % 3}
        for i in range(2500)
    ]
    lines.append({"job_type": "report", "run_at": "2030-01-01T00:00:00Z", "max_attempts": 2,
                  "dedupe_key": "r-1", "correlation_id": "c-1"})  # fmt: skip
    path = cli.cwd / "jobs.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n")
    assert cli.ok("enqueue", "--file", str(path)).strip() == "enqueued 2501 jobs"
    assert db.summary().count(JobStatus.PENDING, "mail") == 2500

    stdin = '{"job_type": "ping"}\n{"job_type": "ping", "delay": 60}\n'
    assert cli.ok("enqueue", "--file", "-", input=stdin).strip() == "enqueued 2 jobs"
    assert db.summary().count(JobStatus.PENDING) == 2503
    assert db.claim("w", job_types=["report"], limit=5) == []  # due in 2030, not yet


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("{not json", "not JSON"),
        ('{"payload": {}}', "missing 'job_type'"),
        ('{"job_type": "x", "prio": 1}', "unknown key 'prio'"),
        ('{"job_type": "x", "max_attempts": 0}', "max_attempts=0"),
        ('{"job_type": "x", "run_at": "2030-01-01"}', "time zone"),
        ('["job_type", "x"]', "expected a JSON object"),
    ],
)
def test_a_bad_line_names_its_number_and_nothing_is_written(
    cli: Cli, db: Queue, bad: str, message: str
) -> None:
    good = '{"job_type": "send_email"}'
    result = cli("enqueue", "--file", "-", input=f"{good}\n{good}\n\n{bad}\n{good}\n")
    assert result.code == 2, result
    assert "line 4" in result.err
    assert message in result.err
    assert result.out == ""
    assert db.summary().total == 0


def test_progress_bar_on_a_terminal(cli: Cli, db: Queue) -> None:
    path = cli.cwd / "jobs.jsonl"
    path.write_text("".join('{"job_type": "t"}\n' for _ in range(3000)))
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen(
            [str(JOBVISOR), "enqueue", "--file", str(path)], stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=slave, cwd=cli.cwd,
            env=clean_env(JOBVISOR_DATABASE_URL=cli.url),
        )  # fmt: skip
        os.close(slave)
        slave = -1
        seen = b""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                seen += chunk
            elif proc.poll() is not None:
                break
        out, _ = proc.communicate(timeout=60)
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)
    assert proc.returncode == 0
    assert out.strip() == b"enqueued 3000 jobs"
    assert b"100% 3000/3000 enqueued" in seen
    assert b"[" + b"#" * 30 + b"]" in seen
    assert db.summary().total == 3000


def test_no_progress_bar_when_stderr_is_not_a_terminal(cli: Cli, db: Queue) -> None:
    result = cli("enqueue", "--file", "-", input='{"job_type": "t"}\n')
    assert result.code == 0
    assert result.err == ""


# --- status ----------------------------------------------------------------------------


def test_status_table_and_json_agree_with_the_database(cli: Cli, db: Queue) -> None:
    for i in range(4):
        db.enqueue("send_email", {"n": i}, queue="mail")
    db.enqueue("resize", queue="images")
    db.claim("w-test", queues=["mail"])  # one running
    (done,) = db.claim("w-test", queues=["mail"])
    db.complete(done)
    make_dead(db, "broken", 2)
    summary = db.summary()

    data = json.loads(cli.ok("status", "--json"))
    assert data["total"] == summary.total == 7
    for name, counts in data["queues"].items():
        for status in JobStatus:
            assert counts[status.value] == summary.count(status, name), (name, status)
    assert data["queues"]["mail"]["running"] == 1
    assert data["queues"]["default"]["dead"] == 2
    assert data["queues"]["mail"]["oldest_pending_age_seconds"] >= 0

    table = cli.ok("status").splitlines()
    header = table[0].split()
    assert header[: len(JobStatus) + 1] == ["queue", *[s.value for s in JobStatus]]
    rows = {line.split()[0]: line.split() for line in table[2:] if line and line[0] != "-"}
    for name in ("mail", "images", "default"):
        for i, status in enumerate(JobStatus, start=1):
            assert int(rows[name][i]) == summary.count(status, name)
    assert int(rows["total"][1]) == summary.count(JobStatus.PENDING)


def test_status_watch_repeats_until_interrupted(cli: Cli, db: Queue) -> None:
    with subprocess.Popen(
        [str(JOBVISOR), "status", "--json", "--watch", "0.1"], stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True, cwd=cli.cwd,
        env=clean_env(JOBVISOR_DATABASE_URL=cli.url),
    ) as proc:  # fmt: skip
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())
        assert first["total"] == 0
        db.enqueue("late")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if json.loads(proc.stdout.readline())["total"] == 1:
                break
        else:
            pytest.fail("the watch never showed the new job")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0


# --- dead jobs ---------------------------------------------------------------------------


def test_dead_list_and_show(cli: Cli, db: Queue) -> None:
    ids = make_dead(db, "broken", 3)
    make_dead(db, "flaky", 1)
    out = cli.ok("dead", "list")
    assert all(str(i) in out for i in ids)
    assert "showing 4 of 4 dead jobs" in out
    assert "boom" in out
    listed = json.loads(cli.ok("dead", "list", "--type", "broken", "--json"))
    assert sorted(j["id"] for j in listed) == sorted(map(str, ids))
    assert {j["status"] for j in listed} == {"dead"}
    assert len(json.loads(cli.ok("dead", "list", "--limit", "2", "--json"))) == 2

    shown = cli.ok("dead", "show", str(ids[0]))
    assert "RuntimeError" in shown and '{"n": 0}' in shown
    data = json.loads(cli.ok("dead", "show", str(ids[0]), "--json"))
    assert (data["id"], data["status"], data["attempts"]) == (str(ids[0]), "dead", 1)

    pending = db.enqueue("fine")
    result = cli("dead", "show", str(pending))
    assert result.code == 1
    assert "pending, not dead" in result.err
    assert cli("dead", "show", "not-a-uuid").code == 2


def test_dead_requeue_and_discard_by_id(cli: Cli, db: Queue) -> None:
    a, b, c = make_dead(db, "broken", 3)
    assert cli.ok("dead", "requeue", str(a), str(b)).strip() == "requeued 2 dead jobs"
    assert db.get(a).status == db.get(b).status == JobStatus.PENDING
    assert db.get(a).attempts == 0
    assert cli.ok("dead", "discard", str(c)).strip() == "discarded 1 dead job"
    with pytest.raises(jobvisor.JobNotFound):
        db.get(c)
    # Not dead any more: reported, exit 1, the others still done.
    (d,) = make_dead(db, "other", 1)
    result = cli("dead", "requeue", str(a), str(d))
    assert result.code == 1
    assert f"job {a} not found" in result.err
    assert db.get(d).status == JobStatus.PENDING


def test_dead_bulk_by_type_needs_yes_off_a_terminal(cli: Cli, db: Queue) -> None:
    broken = make_dead(db, "broken", 3)
    other = make_dead(db, "other", 1)
    result = cli("dead", "requeue", "--type", "broken")
    assert result.code == 2
    assert "3 dead jobs of type 'broken'" in result.err and "--yes" in result.err
    assert all(db.get(i).status == JobStatus.DEAD for i in broken)

    assert cli.ok("dead", "requeue", "--type", "broken", "--yes").strip() == "requeued 3 dead jobs"
    assert all(db.get(i).status == JobStatus.PENDING for i in broken)
    assert db.get(other[0]).status == JobStatus.DEAD

    assert cli.ok("dead", "discard", "--type", "other", "-y").strip() == "discarded 1 dead job"
    assert db.dead.count() == 0
    assert cli.ok("dead", "discard", "--type", "other", "--yes").strip() == (
        "no dead jobs of type 'other'"
    )
    assert cli("dead", "requeue").code == 2  # neither ids nor --type
    assert cli("dead", "requeue", str(broken[0]), "--type", "broken").code == 2


def test_dead_bulk_requeue_reports_a_job_it_cannot_requeue_and_does_the_rest(
    cli: Cli, db: Queue
) -> None:
    held = db.enqueue("broken", {"n": 9}, max_attempts=1, dedupe_key="report-7")
    (job,) = db.claim("w-test", job_types=["broken"])
    db.fail(job, RuntimeError("boom"))
    live = db.enqueue("report", dedupe_key="report-7")  # a live job now holds the key
    others = make_dead(db, "broken", 2)
    result = cli("dead", "requeue", "--type", "broken", "--yes")
    assert result.code == 1
    assert result.out.strip() == "requeued 2 dead jobs"
    assert f"live job {live} holds its dedupe_key='report-7'" in result.err
    assert db.get(held).status == JobStatus.DEAD
    assert all(db.get(i).status == JobStatus.PENDING for i in others)


@pytest.mark.parametrize(("answer", "code"), [("n", 1), ("y", 0)])
def test_dead_bulk_by_type_asks_on_a_terminal(cli: Cli, db: Queue, answer: str, code: int) -> None:
    ids = make_dead(db, "broken", 2)
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen(
            [str(JOBVISOR), "dead", "discard", "--type", "broken"], stdin=slave,
            stdout=subprocess.DEVNULL, stderr=slave, cwd=cli.cwd,
            env=clean_env(JOBVISOR_DATABASE_URL=cli.url),
        )  # fmt: skip
        os.write(master, answer.encode() + b"\n")
        prompt = b""
        deadline = time.monotonic() + 60
        while b"[y/N]" not in prompt and time.monotonic() < deadline:
            if select.select([master], [], [], 1.0)[0]:
                prompt += os.read(master, 4096)
        assert proc.wait(timeout=60) == code
    finally:
        os.close(master)
        os.close(slave)
    assert b"Discard 2 dead jobs of type 'broken'?" in prompt
    left = db.dead.count()
    assert left == (2 if answer == "n" else 0), ids


# --- cancel, cleanup, config -------------------------------------------------------------


def test_cancel(cli: Cli, db: Queue) -> None:
    a, b = db.enqueue("t"), db.enqueue("t")
    out = cli.ok("cancel", str(a), str(b))
    assert out.splitlines() == [f"cancelled {a}", f"cancelled {b}"]
    assert db.get(a).status == db.get(b).status == JobStatus.CANCELLED
    result = cli("cancel", str(a))
    assert result.code == 1
    assert "it is cancelled, not pending, retryable or running" in result.err
    result = cli("cancel", str(uuid.uuid4()))
    assert (result.code, "not found" in result.err) == (1, True)


def test_cancel_of_a_running_job_asks_its_worker(cli: Cli, db: Queue) -> None:
    jid = db.enqueue("t")
    (held,) = db.claim("w")
    out = cli.ok("cancel", str(jid), "--reason", "wrong input")
    assert out.splitlines() == [f"cancel requested {jid} (running: its worker stops it)"]
    assert service_ops(db).renew_held([held]).cancel_requested == {jid}
    db.complete(held)  # the worker's completion, after the request: cancelled
    done = db.get(jid)
    assert done.status is JobStatus.CANCELLED
    assert done.last_error is not None and done.last_error.endswith(": wrong input")


def test_cancel_by_type_and_queue_in_bulk(cli: Cli, db: Queue) -> None:
    db.enqueue("report")
    (held,) = db.claim("w")
    pending = [db.enqueue("report") for _ in range(3)]
    other = db.enqueue("mail", queue="slow")
    result = cli("cancel", "--type", "report")
    assert result.code == 2 and "pass --yes" in result.err  # no terminal to confirm on
    assert db.get(pending[0]).status is JobStatus.PENDING
    out = cli.ok("cancel", "--type", "report", "--yes")
    assert out.strip() == "cancelled 3 jobs; cancel requested for 1 running"
    assert all(db.get(j).status is JobStatus.CANCELLED for j in pending)
    assert service_ops(db).renew_held([held]).cancel_requested == {held.id}
    assert cli.ok("cancel", "--queue", "slow", "-y").startswith("cancelled 1 job;")
    assert db.get(other).status is JobStatus.CANCELLED
    for argv in (["cancel", str(other), "--type", "t"], ["cancel", "--yes"]):
        result = cli(*argv)
        assert result.code == 2 and "give job ids, or --type" in result.err


def test_cleanup_uses_the_retention_settings_or_older_than(cli: Cli, db: Queue) -> None:
    long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(days=2)
    past = jobvisor.connect(cli.url, clock=lambda: long_ago)
    try:
        old_completed = past.enqueue("t")
        old_cancelled = past.enqueue("t")
        past.complete(past.claim("w", limit=1)[0])
        past.cancel(old_cancelled)
    finally:
        past.close()
    fresh = db.enqueue("t")
    db.complete(db.claim("w", limit=1)[0])
    pending = db.enqueue("t")

    # Defaults: completed kept 1 day (deleted), cancelled kept 7 days (kept).
    assert cli.ok("cleanup").strip() == "deleted 1 finished job"
    with pytest.raises(jobvisor.JobNotFound):
        db.get(old_completed)
    assert db.get(old_cancelled).status == JobStatus.CANCELLED

    env = clean_env(JOBVISOR_DATABASE_URL=cli.url, JOBVISOR_RETENTION_CANCELLED="3600")
    assert cli("cleanup", env=env).out.strip() == "deleted 1 finished job"
    assert cli.ok("cleanup", "--older-than", "86400").strip() == "deleted 0 finished jobs"
    assert db.get(fresh).status == JobStatus.COMPLETED
    assert db.get(pending).status == JobStatus.PENDING
    assert cli("cleanup", "--older-than", "-5").code == 2


def test_config_shows_sources_and_never_the_password(cli: Cli) -> None:
    url = "postgresql://jobvisor:s3cr3t-pw@db.internal:5432/jobs"
    env = clean_env(JOBVISOR_DATABASE_URL=url, JOBVISOR_WORKERS="6")
    result = cli("config", env=env)
    assert result.code == 0, result
    assert "s3cr3t-pw" not in result.out + result.err
    rows = {line.split()[0]: line.split() for line in result.out.splitlines()[2:]}
    assert rows["JOBVISOR_DATABASE_URL"][1:] == ["postgresql://jobvisor:***@db.internal:5432/jobs",
                                                 "env"]  # fmt: skip
    assert rows["JOBVISOR_WORKERS"][1:] == ["6", "env"]
    assert rows["JOBVISOR_CONCURRENCY"][1:] == ["auto", "default"]
    data = json.loads(cli("config", "--json", "--database-url", url, env=env).out)
    by_var = {row["variable"]: row for row in data}
    assert by_var["JOBVISOR_DATABASE_URL"]["source"] == "flag"
    assert "s3cr3t-pw" not in json.dumps(data)
    assert len(data) == len(jobvisor.settings.SETTINGS)


def test_show_prints_result_progress_and_every_error(cli: Cli, db: Queue) -> None:
    jid = db.enqueue("flaky", {"n": 1}, max_attempts=3)
    for attempt in (1, 2):
        (job,) = db.claim(f"w{attempt}")
        db.fail(job, f"ValueError: try {attempt}\n  second line", retry_in=0)
    (job,) = db.claim("w3")
    db.renew_many([job], progress={job.id: '{"fraction":0.5,"note":"halfway"}'})
    db.complete(job, {"rows": 12})

    shown = cli.ok("show", str(jid))
    assert "completed" in shown
    assert 'result:         {"rows": 12}' in shown
    assert "progress:       50% halfway" in shown
    assert "errors (2 kept):" in shown
    assert "attempt 1 at " in shown and " on w1:" in shown
    assert "\n    ValueError: try 2\n      second line\n" in shown  # each line indented
    data = json.loads(cli.ok("show", str(jid), "--json"))
    assert data["result"] == {"rows": 12}
    assert data["progress"] == {"fraction": 0.5, "note": "halfway"}
    assert [(e["attempt"], e["worker_id"]) for e in data["errors"]] == [(1, "w1"), (2, "w2")]
    assert data["errors"][0]["error"].startswith("ValueError: try 1")

    missing = cli("show", str(uuid.uuid4()))
    assert missing.code == 1
    assert "no job" in missing.err.lower() or "not found" in missing.err.lower()
    assert cli("show", "not-a-uuid").code == 2


def test_dead_show_prints_the_error_history(cli: Cli, db: Queue) -> None:
    (dead,) = make_dead(db, "broken", 1)
    shown = cli.ok("dead", "show", str(dead))
    assert "errors (1 kept):" in shown
    assert "attempt 1 at " in shown


def test_batch_show_prints_counts_and_callbacks(cli: Cli, db: Queue) -> None:
    with db.batch(on_finish="report", on_failure="alert", meta={"run": 3}) as b:
        b.enqueue("member", {"n": 1}, max_attempts=1)
        b.enqueue("member", {"n": 2})
    open_batch = cli.ok("batch", "show", str(b.id))
    assert f"batch {b.id}: closed, 2 members, 2 unfinished" in open_batch
    for job in db.claim("w", job_types=["member"], limit=2):
        if job.payload["n"] == 1:
            db.fail(job, "boom")
        else:
            db.complete(job)
    shown = cli.ok("batch", "show", str(b.id))
    assert f"batch {b.id}: finished, 2 members, 0 unfinished" in shown
    assert "completed:  1" in shown and "dead:       1" in shown
    data = json.loads(cli.ok("batch", "show", str(b.id), "--json"))
    assert data["counts"] == {"completed": 1, "dead": 1}
    assert set(data["callbacks"]) == {"finish", "failure"}
    assert data["meta"] == {"run": 3}
    assert db.get(data["callbacks"]["finish"]).job_type == "report"

    missing = cli("batch", "show", str(uuid.uuid4()))
    assert missing.code == 1 and "not found" in missing.err
    assert cli("batch", "show", "not-a-uuid").code == 2
