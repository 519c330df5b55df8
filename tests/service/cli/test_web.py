"""`jobvisor web` as a real process: it serves the dashboard on the address
it is given until SIGTERM, refuses a database not yet migrated, and stops
start-up with exit code 78 on an admin token too short (never showing it)."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import urllib.request
from pathlib import Path

import jobvisor
from tests.support.cli import JOBVISOR, clean_env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_web_serves_until_sigterm(url: str, tmp_path: Path) -> None:
    with jobvisor.connect(url) as q:
        q.migrate()
        job_id = q.enqueue("send", {"to": "<b>x</b>"})
    port = _free_port()
    env = clean_env(JOBVISOR_DATABASE_URL=url, JOBVISOR_WEB_ADDR=f"127.0.0.1:{port}")
    with subprocess.Popen(
        [str(JOBVISOR), "web"], cwd=tmp_path, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    ) as proc:  # fmt: skip
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert re.match(rf"dashboard on http://127\.0\.0\.1:{port}/", line), line
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/jobs", timeout=30) as response:
                page = response.read().decode()
            assert str(job_id) in page and "&lt;b&gt;x&lt;/b&gt;" in page and "read-only" in page
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0
        finally:
            proc.kill()


def test_web_refuses_a_database_not_migrated(tmp_path: Path) -> None:
    env = clean_env(JOBVISOR_DATABASE_URL="sqlite:///fresh.db", JOBVISOR_WEB_ADDR="127.0.0.1:0")
    done = subprocess.run(
        [str(JOBVISOR), "web"], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert "run `jobvisor migrate` first" in done.stderr


def test_a_short_admin_token_stops_start_up_without_showing_it(tmp_path: Path) -> None:
    env = clean_env(JOBVISOR_ADMIN_TOKEN="hunter2", JOBVISOR_WEB_ADDR="127.0.0.1:0")
    done = subprocess.run(
        [str(JOBVISOR), "web"], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 78
    assert "JOBVISOR_ADMIN_TOKEN" in done.stderr and "at least 16 characters" in done.stderr
    assert "hunter2" not in done.stderr + done.stdout
