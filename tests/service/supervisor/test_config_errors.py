"""An invalid setting stops `jobvisor run` before anything starts: one line
naming the variable, the value and what is expected; exit code 78; no worker,
no database file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from jobvisor.settings import EX_CONFIG
from tests.support.service import COMMAND, clean_env

INVALID = [
    ("JOBVISOR_WORKERS", "0"),
    ("JOBVISOR_CONCURRENCY", "many"),
    ("JOBVISOR_LEASE", "-1"),
    ("JOBVISOR_SHUTDOWN_TIMEOUT", "soon"),
    ("JOBVISOR_WORKER_TIMEOUT", "0"),
    ("JOBVISOR_MAX_RESTARTS", "0"),
    ("JOBVISOR_RETENTION_DEAD", "nan"),
    ("JOBVISOR_APP", "no_attribute_given"),
    ("JOBVISOR_DATABASE_URL", "mysql://root:hunter2@db/jobs"),
    ("JOBVISOR_LOG_FORMAT", "xml"),
    ("JOBVISOR_HTTP_ADDR", "localhost"),
    ("JOBVISOR_LEASE", "1e12"),
    ("JOBVISOR_CONCURRENCY", "99999999999999999999999"),
    ("JOBVISOR_WORKER_TIMEOUT", "0.001"),
    ("JOBVISOR_MAX_PAYLOAD_BYTES", "1e9"),
    ("JOBVISOR_XMIN_WARN", "0"),
]


# Every setting through `jobvisor run`; a few through `python -m jobvisor.supervisor`.
CASES = [("cli", v, x) for v, x in INVALID] + [("module", v, x) for v, x in INVALID[:3]]


@pytest.mark.parametrize(("entry", "variable", "value"), CASES,
                         ids=[f"{e}-{v}" for e, v, _ in CASES])  # fmt: skip
def test_an_invalid_setting_is_one_line_and_exit_78(
    entry: str, variable: str, value: str, tmp_path: Path
) -> None:
    database = tmp_path / "jobvisor.db"
    env = clean_env(f"sqlite:///{database}", {variable: value})
    command = COMMAND if entry == "cli" else (sys.executable, "-m", "jobvisor.supervisor")
    done = subprocess.run(
        command, env=env, cwd=tmp_path, capture_output=True, timeout=60, check=False
    )

    assert done.returncode == EX_CONFIG
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1, lines
    assert variable in lines[0] and "expected" in lines[0]
    assert "hunter2" not in lines[0]  # never a password
    assert done.stdout == b""
    assert not database.exists()  # nothing started, nothing migrated
