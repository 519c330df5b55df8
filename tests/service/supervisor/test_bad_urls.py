"""A configuration no retry can fix stops every entry point at once: a
database URL whose password holds a raw `@` (libpq would send the rest of the
password to DNS as a host name), a URL option libpq cannot use, a listen
address that does not parse, a queue name the queue refuses, a server that
refuses us. One line, no part of a password, exit 78, nothing started."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import jobvisor
from jobvisor.queue import InvalidArgument
from jobvisor.settings import EX_CONFIG
from tests.support.service import COMMAND, clean_env

JOBVISOR = (sys.executable, "-m", "jobvisor.cli")
PASSWORD_HEAD, PASSWORD_TAIL = "Xy7", "Qp9zSECRET"
RAW_AT = f"postgresql://app:{PASSWORD_HEAD}@{PASSWORD_TAIL}@127.0.0.1:55499/jv"

# Every command that opens the database, and the service.
COMMANDS = [
    ("run",),
    ("status",),
    ("migrate",),
    ("enqueue", "noop"),
    ("dead", "list"),
    ("queue", "list"),
    ("show", "00000000-0000-0000-0000-000000000000"),
    ("cleanup",),
]


def run(args: tuple[str, ...], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, env=env, cwd=cwd, capture_output=True, text=True, timeout=90, check=False
    )


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: "-".join(c[:2]))
def test_a_password_with_a_raw_at_is_refused_without_showing_it(
    command: tuple[str, ...], tmp_path: Path
) -> None:
    env = clean_env(RAW_AT, {"JOBVISOR_HTTP_ADDR": "127.0.0.1:0"})
    done = run((*JOBVISOR, *command), env, tmp_path)

    assert done.returncode == EX_CONFIG, done.stdout + done.stderr
    (line,) = done.stderr.splitlines()
    assert "JOBVISOR_DATABASE_URL" in line and "%40" in line
    for part in (PASSWORD_HEAD, PASSWORD_TAIL):
        assert part not in done.stdout + done.stderr
    assert not (tmp_path / "jobvisor.db").exists()


def test_the_library_refuses_a_password_with_a_raw_at() -> None:
    with pytest.raises(InvalidArgument, match="%40") as info:
        jobvisor.connect(RAW_AT)
    assert PASSWORD_HEAD not in str(info.value) and PASSWORD_TAIL not in str(info.value)
    with pytest.raises(InvalidArgument, match="%40"):
        jobvisor.connect_async(RAW_AT)


def test_a_percent_encoded_at_is_taken(pg_url: str) -> None:
    # A password (trust authentication takes any) with an encoded `@` connects.
    scheme, _, rest = pg_url.partition("://")
    userinfo, at, host = rest.rpartition("@")
    user = userinfo.split(":", 1)[0] if at else "postgres"
    q = jobvisor.connect(f"{scheme}://{user}:{PASSWORD_HEAD}%40{PASSWORD_TAIL}@{host}")
    try:
        assert q.check() is not None
    finally:
        q.close()


BAD_OPTIONS = [
    ("?sslmode=bogus", "sslmode"),
    ("?connect_timeout=abc", "connect_timeout"),
    ("?target_session_attrs=sometimes", "target_session_attrs"),
]


def _with(pg_url: str, query: str) -> str:
    base = pg_url.split("?", 1)[0]
    return base + query


@pytest.mark.parametrize(("query", "option"), BAD_OPTIONS, ids=[o for _, o in BAD_OPTIONS])
@pytest.mark.parametrize("command", [("run",), ("status",)], ids=["run", "status"])
def test_a_url_option_libpq_cannot_use_is_a_config_error(
    query: str, option: str, command: tuple[str, ...], pg_url: str, tmp_path: Path
) -> None:
    env = clean_env(_with(pg_url, query), {"JOBVISOR_HTTP_ADDR": "127.0.0.1:0"})
    done = run((*JOBVISOR, *command), env, tmp_path)

    assert done.returncode == EX_CONFIG, done.stdout + done.stderr
    (line,) = done.stderr.splitlines()
    assert "JOBVISOR_DATABASE_URL" in line and option in line


@pytest.mark.parametrize("command", [("run",), ("status",)], ids=["run", "status"])
def test_a_port_that_is_not_a_number_is_a_config_error(
    command: tuple[str, ...], pg_url: str, tmp_path: Path
) -> None:
    scheme, _, rest = pg_url.partition("://")
    authority, slash, path = rest.partition("/")
    host = authority.rsplit(":", 1)[0] if "]" not in authority.rsplit(":", 1)[-1] else authority
    url = f"{scheme}://{host}:notaport{slash}{path}"
    done = run((*JOBVISOR, *command), clean_env(url, {"JOBVISOR_HTTP_ADDR": ""}), tmp_path)

    assert done.returncode == EX_CONFIG, done.stdout + done.stderr
    (line,) = done.stderr.splitlines()
    assert "port" in line and "notaport" in line


@pytest.mark.parametrize("bad", ["?sslmode=bogus", "?connect_timeout=abc", ":notaport"])
def test_the_library_refuses_a_url_option_it_cannot_use(bad: str) -> None:
    url = "postgresql://u@db.example" + (bad if bad.startswith(":") else "/app" + bad)
    with pytest.raises(InvalidArgument, match="expected"):
        jobvisor.connect(url)


def test_an_unknown_database_stops_the_service_with_78(pg_url: str, tmp_path: Path) -> None:
    base, _, _ = pg_url.split("?", 1)[0].rpartition("/")
    env = clean_env(f"{base}/jobvisor_no_such_database", {"JOBVISOR_HTTP_ADDR": ""})
    done = run(COMMAND, env, tmp_path)

    assert done.returncode == EX_CONFIG, done.stdout[-2000:] + done.stderr[-2000:]
    assert "supervisor.database_failed" in done.stdout + done.stderr
    assert "worker.spawned" not in done.stdout + done.stderr


@pytest.mark.parametrize("addr", ["[::1", "[nonsense]:9090", "two words:9090"])
def test_an_http_address_that_does_not_parse_is_a_config_error(addr: str, tmp_path: Path) -> None:
    env = clean_env(f"sqlite:///{tmp_path / 'jobvisor.db'}", {"JOBVISOR_HTTP_ADDR": addr})
    done = run(COMMAND, env, tmp_path)

    assert done.returncode == EX_CONFIG, done.stdout + done.stderr
    (line,) = done.stderr.splitlines()
    assert "JOBVISOR_HTTP_ADDR" in line and repr(addr) in line
    assert not (tmp_path / "jobvisor.db").exists()


def test_a_queue_name_over_200_bytes_is_a_config_error(tmp_path: Path) -> None:
    long_name = "q" * 201
    env = clean_env(
        f"sqlite:///{tmp_path / 'jobvisor.db'}", {"JOBVISOR_QUEUES": f"default,{long_name}"}
    )
    done = run(COMMAND, env, tmp_path)

    assert done.returncode == EX_CONFIG, done.stdout[-2000:] + done.stderr[-2000:]
    (line,) = done.stderr.splitlines()
    assert "JOBVISOR_QUEUES" in line and "200" in line
    assert not (tmp_path / "jobvisor.db").exists()
