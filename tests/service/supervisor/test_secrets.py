"""The database password never appears in what the real processes print: the
`jobvisor config` table, the supervisor's log (its start line, psycopg's pool
retrying a malformed URL), the exit-78 line, the CLI's errors, nor in `ps`
(the command line of the supervisor and its workers)."""

from __future__ import annotations

import getpass
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from jobvisor.settings import EX_CONFIG
from tests.support.service import COMMAND, Service, clean_env
from tests.support.wait import wait_until

SECRET = "Tr0ub4dor-S3cret"
JOBVISOR = Path(sys.executable).with_name("jobvisor")
MODULE = (sys.executable, "-m", "jobvisor.supervisor")


def with_password(url: str, *, in_query: bool = False) -> str:
    """`url` (trust authentication: any password is accepted) carrying SECRET."""
    base, _, query = url.partition("?")
    scheme, _, rest = base.partition("://")
    authority, _, path = rest.partition("/")
    userinfo, at, host = authority.rpartition("@")
    if ":" in userinfo:
        pytest.skip("the test server's URL already holds a password")
    user = userinfo if at else os.environ.get("PGUSER", getpass.getuser())
    params = [p for p in query.split("&") if p]
    if in_query:
        params.append(f"password={SECRET}")
        authority = f"{user}@{host}"
    else:
        authority = f"{user}:{SECRET}@{host}"
    secret_url = f"{scheme}://{authority}/{path}" + (f"?{'&'.join(params)}" if params else "")
    try:
        psycopg.connect(secret_url, connect_timeout=10).close()
    except psycopg.OperationalError as exc:
        pytest.skip(f"the test server wants a real password: {exc}")
    return secret_url


def env_without_url(**extra: str) -> dict[str, str]:
    env = clean_env("unused")
    del env["JOBVISOR_DATABASE_URL"]
    env.update(extra)
    return env


def cmdlines(pids: set[int]) -> dict[int, str]:
    """What `ps` shows of each live process: /proc/PID/cmdline."""
    found = {}
    for pid in pids:
        try:
            found[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
    return found


# --- jobvisor config -------------------------------------------------------------

MALFORMED_FORMS = [
    f"postgresql://u:{SECRET}%zz@db.example/app",
    f"postgresql:/u:{SECRET}@db.example/app",
    f"postgresql://u:{SECRET}@[::1/app",
]
FORMS = [
    f"postgresql://u:{SECRET}@db.example/app",
    f"postgresql://u@db.example/app?sslmode=require&password={SECRET}",
    *MALFORMED_FORMS,
]


@pytest.mark.parametrize("given_by", ["flag", "env", "file"])
@pytest.mark.parametrize("url", FORMS)
def test_jobvisor_config_masks_the_password(url: str, given_by: str, tmp_path: Path) -> None:
    if not JOBVISOR.exists():
        pytest.skip(f"no jobvisor console script beside {sys.executable}")
    args, env = [str(JOBVISOR), "config"], env_without_url()
    if given_by == "flag":
        args += ["--database-url", url]
    elif given_by == "env":
        env["JOBVISOR_DATABASE_URL"] = url
    else:
        (tmp_path / "url").write_text(url + "\n")
        env["JOBVISOR_DATABASE_URL_FILE"] = str(tmp_path / "url")
    for extra in ([], ["--json"]):
        done = subprocess.run(
            [*args, *extra], env=env, cwd=tmp_path, capture_output=True, text=True,
            timeout=60, check=False,
        )  # fmt: skip
        assert SECRET not in done.stdout + done.stderr
        if url in MALFORMED_FORMS and done.returncode == EX_CONFIG:  # refused: libpq's check
            (line,) = done.stderr.splitlines()
            assert "database_url" in line.lower().replace("-", "_")  # the flag, variable or file
            continue
        assert done.returncode == 0, done.stderr
        assert "JOBVISOR_DATABASE_URL" in done.stdout and "***" in done.stdout
        assert given_by in done.stdout  # the source


# --- the exit-78 line --------------------------------------------------------------

KV_DSN = f"host=db.example password={SECRET} dbname=app"


@pytest.mark.parametrize(
    ("command", "flag"),
    [(COMMAND, False), (COMMAND, True), (MODULE, False), (MODULE, True),
     ((str(JOBVISOR), "status"), True), ((str(JOBVISOR), "migrate"), False)],
    ids=["run-env", "run-flag", "module-env", "module-flag", "status-flag", "migrate-env"],
)  # fmt: skip
def test_the_exit_78_line_masks_a_key_value_dsn(
    command: tuple[str, ...], flag: bool, tmp_path: Path
) -> None:
    env = env_without_url()
    args = [*command]
    if flag:
        args += ["--database-url", KV_DSN]
    else:
        env["JOBVISOR_DATABASE_URL"] = KV_DSN
    done = subprocess.run(
        args, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == EX_CONFIG
    (line,) = done.stderr.splitlines()
    assert "DATABASE" in line.upper() and "password=***" in line
    assert SECRET not in done.stdout + done.stderr


# --- a running supervisor: its log and `ps` ------------------------------------------


@pytest.mark.parametrize(
    ("command", "in_query"), [(COMMAND, False), (MODULE, True)], ids=["jobvisor-run", "module"]
)
def test_a_running_supervisor_shows_no_password_in_ps_nor_its_log(
    command: tuple[str, ...], in_query: bool, pg_url: str, tmp_path: Path,
    start_service: Callable[..., Service],
) -> None:  # fmt: skip
    url = with_password(pg_url, in_query=in_query)
    service = Service(pg_url, tmp_path)
    del service.env["JOBVISOR_DATABASE_URL"]
    with service.log_path.open("ab") as log:
        service.proc = subprocess.Popen(
            [*command, "--database-url", url], env=service.env, cwd=tmp_path,
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    try:
        service.wait_ready()
        wait_until(lambda: len(service.live_workers()) >= 2, what="two workers")
        shown = cmdlines({service.pid, *service.live_workers()})
        assert service.pid in shown and len(shown) >= 3
        for pid, cmdline in shown.items():
            assert SECRET not in cmdline, (pid, cmdline)
        (starting,) = service.events("supervisor.starting")
        assert "***" in starting["database"]
        assert service.stop() == 0
    finally:
        service.kill_everything()
    assert SECRET not in service.log_path.read_text()


# --- psycopg's pool retrying a malformed URL -------------------------------------


MALFORMED = [
    f"postgresql://postgres:{SECRET}%zz@127.0.0.1/app",
    f"postgresql:/postgres:{SECRET}@127.0.0.1/app",
    f"postgresql://postgres:{SECRET}@[::1/app",
]


def read_until(proc: subprocess.Popen[str], lines: list[str], done: Callable[[], bool]) -> None:
    """Collect `proc`'s output lines until `done()` or its end, in a thread."""

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        wait_until(lambda: done() or proc.poll() is not None, timeout=60, what="pool warnings")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        reader.join(30)
        assert proc.stdout is not None
        proc.stdout.close()


@pytest.mark.parametrize("url", MALFORMED)
@pytest.mark.parametrize("entry", ["run", "cli"])
def test_a_malformed_url_retried_or_refused_is_never_printed(
    url: str, entry: str, tmp_path: Path
) -> None:
    """Both through the supervisor's JSON log and through the CLI's plain stderr
    (where no logging is set up): while the pool retries (several warnings
    quoting what libpq could not read), or when the URL is refused at once."""
    if entry == "run":
        args = [*COMMAND, "--database-url", url]
        env = env_without_url()
    else:
        args = [str(JOBVISOR), "status"]
        env = env_without_url(JOBVISOR_DATABASE_URL=url)
    proc = subprocess.Popen(
        args, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    lines: list[str] = []
    read_until(proc, lines, lambda: sum("error connecting" in x for x in lines) >= 3)
    out = "".join(lines)
    retried = sum("error connecting" in x for x in lines) >= 3
    assert retried or proc.returncode not in (0, None), out
    assert "***" in out  # the URL, or what libpq quoted of it, is shown masked
    assert SECRET not in out


def test_the_cli_error_after_the_pool_gave_up_shows_no_password(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(JOBVISOR), "status", "--database-url", MALFORMED[0]],
        env=env_without_url(), cwd=tmp_path, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert done.returncode in (1, EX_CONFIG)  # the pool gave up, or libpq refused it at once
    assert "***" in done.stderr
    assert SECRET not in done.stdout + done.stderr


@pytest.mark.parametrize("command", [COMMAND, MODULE], ids=["jobvisor-run", "module"])
def test_a_missing_url_file_is_one_line_and_exit_78(
    command: tuple[str, ...], tmp_path: Path
) -> None:
    missing = tmp_path / "no-such-url"
    env = env_without_url(JOBVISOR_DATABASE_URL_FILE=str(missing))
    done = subprocess.run(
        command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == EX_CONFIG
    (line,) = done.stderr.splitlines()
    assert "JOBVISOR_DATABASE_URL_FILE" in line and str(missing) in line
    assert not (tmp_path / "jobvisor.db").exists()  # not the default database instead
