"""The dashboard as the real processes serve it: `jobvisor web` and
`jobvisor run` with the dashboard on warn when it listens beyond loopback,
refuse a bad setting or token at start with exit code 78, and mark the
session cookie `Secure` as their settings say."""

from __future__ import annotations

import http.client
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import jobvisor
from tests.support.cli import JOBVISOR, clean_env
from tests.support.service import services
from tests.support.web import TOKEN


@pytest.fixture
def migrated(url: str) -> str:
    with jobvisor.connect(url) as q:
        q.migrate()
    return url


@pytest.fixture
def web(migrated: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment of a `jobvisor web` on the test's database."""
    yield clean_env(JOBVISOR_DATABASE_URL=migrated, JOBVISOR_LOG_FORMAT="json")


def _serve(env: dict[str, str], cwd: Path) -> tuple[int, str]:
    """Start `jobvisor web`, read its address, stop it; (port, its log)."""
    with subprocess.Popen(
        [str(JOBVISOR), "web"], cwd=cwd, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    ) as proc:  # fmt: skip
        try:
            assert proc.stdout is not None and proc.stderr is not None
            line = proc.stdout.readline()
            found = re.search(r"dashboard on http://[^:]+:(\d+)/", line)
            assert found, line + proc.stderr.read()
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0
            return int(found.group(1)), proc.stderr.read()
        finally:
            proc.kill()


def test_jobvisor_web_warns_when_it_listens_beyond_loopback(
    web: dict[str, str], tmp_path: Path
) -> None:
    _, log = _serve({**web, "JOBVISOR_WEB_ADDR": "0.0.0.0:0"}, tmp_path)
    assert '"event": "web.exposed"' in log and "read-only" in log
    _, log = _serve({**web, "JOBVISOR_WEB_ADDR": "127.0.0.1:0"}, tmp_path)
    assert "web.exposed" not in log


def test_jobvisor_run_warns_when_its_dashboard_listens_beyond_loopback(
    migrated: str, tmp_path: Path
) -> None:
    settings = {"JOBVISOR_HTTP_ADDR": "0.0.0.0:0", "JOBVISOR_DASHBOARD": "on"}
    with services() as start:
        service = start(migrated, tmp_path, settings)
        (event,) = service.wait_event("web.exposed")
        assert event["actions"] == "none (read-only)"
        assert service.stop() == 0


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("JOBVISOR_ADMIN_TOKEN", "pässwört-geheim-0123456789", "printable ASCII"),
        ("JOBVISOR_DASHBOARD_SECURE_COOKIE", "always", "auto or on"),
        ("JOBVISOR_DASHBOARD_TRUST_PROXY", "maybe", "1 or 0"),
    ],
)
def test_a_bad_dashboard_setting_stops_start_up(
    web: dict[str, str], tmp_path: Path, name: str, value: str, expected: str
) -> None:
    done = subprocess.run(
        [str(JOBVISOR), "web"], cwd=tmp_path, env={**web, name: value}, capture_output=True,
        text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 78
    (line,) = done.stderr.splitlines()
    assert name in line and expected in line
    assert (value in line) is (name != "JOBVISOR_ADMIN_TOKEN")  # a token is never shown


def _login_cookie(port: int) -> str:
    """Log in to the dashboard on `port`; the Set-Cookie header it answers."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        return _log_in(conn)
    finally:
        conn.close()


def _log_in(conn: http.client.HTTPConnection) -> str:
    conn.request("GET", "/login")
    response = conn.getresponse()
    page = response.read().decode()
    cookie = response.getheader("set-cookie", "").split(";", 1)[0]
    csrf = re.search(r'name="csrf" value="([^"]+)"', page)
    assert csrf, page
    body = f"csrf={csrf.group(1)}&token={TOKEN}&next=/"
    headers = {"Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded"}
    conn.request("POST", "/login", body=body, headers=headers)
    response = conn.getresponse()
    response.read()
    assert response.status == 303
    return response.getheader("set-cookie", "")


def test_the_session_cookie_is_secure_as_the_setting_says(
    web: dict[str, str], tmp_path: Path
) -> None:
    env = {**web, "JOBVISOR_ADMIN_TOKEN": TOKEN, "JOBVISOR_WEB_ADDR": "127.0.0.1:0"}
    for setting, secure in (("auto", False), ("on", True)):
        with subprocess.Popen(
            [str(JOBVISOR), "web"], cwd=tmp_path, text=True, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, env={**env, "JOBVISOR_DASHBOARD_SECURE_COOKIE": setting},
        ) as proc:  # fmt: skip
            try:
                assert proc.stdout is not None
                found = re.search(r":(\d+)/", proc.stdout.readline())
                assert found
                cookie = _login_cookie(int(found.group(1)))
                assert cookie.startswith("jobvisor_session=")
                assert ("; secure" in cookie.lower()) is secure, (setting, cookie)
            finally:
                proc.kill()
