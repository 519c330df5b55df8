"""A real worker process for tests: `python -m jobvisor.worker` with its
stderr (JSON log lines) and, optionally, its control pipe read by threads,
and bounded waits on both and on the database."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import psycopg

from jobvisor.queue.api import parse_url
from jobvisor.worker.protocol import CONTROL_FD_ENV, WORKER_ID_ENV, decode_lines
from tests.support.wait import wait_until

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.service.worker.app:registry"
DEADLINE = 30.0  # generous: the machine may be loaded by other test runs

T = TypeVar("T")


def worker_env(url: str, **settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBVISOR_")}
    env.update(
        JOBVISOR_DATABASE_URL=url,
        JOBVISOR_APP=APP,
        JOBVISOR_LOG_FORMAT="json",
        JOBVISOR_LOG_LEVEL="info",
        JOBVISOR_POLL_INTERVAL="0.2",
        PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    )
    env.update({"JOBVISOR_" + k.upper(): v for k, v in settings.items()})
    return env


class WorkerProcess:
    """One worker process; use as a context manager (killed on exit if alive)."""

    def __init__(self, url: str, *, control: bool = False, worker_id: str | None = None,
                 **settings: str) -> None:  # fmt: skip
        self.env = worker_env(url, **settings)
        if worker_id:
            self.env[WORKER_ID_ENV] = worker_id
        self.logs: list[dict[str, Any]] = []
        self.stderr_lines: list[str] = []
        self.messages: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._read_fd: int | None = None
        pass_fds: tuple[int, ...] = ()
        if control:
            self._read_fd, write_fd = os.pipe()
            self.env[CONTROL_FD_ENV] = str(write_fd)
            pass_fds = (write_fd,)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jobvisor.worker"], env=self.env, cwd=ROOT,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            pass_fds=pass_fds,
        )  # fmt: skip
        self._readers = [threading.Thread(target=self._read_stderr, daemon=True)]
        if control:
            os.close(pass_fds[0])
            self._readers.append(threading.Thread(target=self._read_control, daemon=True))
        for reader in self._readers:
            reader.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode(errors="replace").rstrip("\n")
            with self._lock:
                self.stderr_lines.append(line)
                with contextlib.suppress(ValueError):
                    entry = json.loads(line)
                    if isinstance(entry, dict):
                        self.logs.append(entry)

    def _read_control(self) -> None:
        assert self._read_fd is not None
        buffer = bytearray()
        while chunk := os.read(self._read_fd, 65536):
            buffer += chunk
            with self._lock:
                self.messages.extend(decode_lines(buffer))
        os.close(self._read_fd)

    def events(self, name: str) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.logs if e.get("event") == name]

    def control(self, kind: str) -> list[dict[str, Any]]:
        with self._lock:
            return [m for m in self.messages if m.get("t") == kind]

    def wait_log(self, name: str, timeout: float = DEADLINE, **fields: Any) -> dict[str, Any]:
        def found() -> dict[str, Any] | None:
            for entry in self.events(name):
                if all(entry.get(k) == v for k, v in fields.items()):
                    return entry
            return None

        return wait_until(found, f"log event {name} {fields} (stderr: {self.tail()})", timeout)

    def wait_started(self) -> None:
        self.wait_log("worker.started")

    def tail(self, n: int = 20) -> str:
        with self._lock:
            return "\n".join(self.stderr_lines[-n:])

    def send(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def wait_exit(self, timeout: float = DEADLINE) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"worker did not exit within {timeout}s:\n{self.tail()}") from None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = DEADLINE) -> int:
        if self.proc.poll() is None:
            self.send(sig)
        return self.wait_exit(timeout)

    def __enter__(self) -> WorkerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        # The pipes reach end-of-file once the worker (and any child) is gone.
        for reader in self._readers:
            reader.join(10)
        if self.proc.stderr is not None:
            self.proc.stderr.close()


@contextlib.contextmanager
def running_worker(url: str, **kwargs: Any) -> Iterator[WorkerProcess]:
    """A started worker, stopped with SIGTERM (exit 0 expected) at the end."""
    with WorkerProcess(url, **kwargs) as worker:
        worker.wait_started()
        yield worker
        code = worker.stop()
        assert code == 0, f"worker exited {code}:\n{worker.tail()}"


def execute(url: str, postgres_sql: str, sqlite_sql: str, params: Sequence[Any] = ()) -> int:
    """Run one statement behind the queue's back (to steal a lease, say);
    returns the affected row count. Placeholders: %s on PostgreSQL, ? on SQLite."""
    engine, target = parse_url(url)
    if engine == "postgres":
        with psycopg.connect(target, autocommit=True) as conn:
            return conn.execute(postgres_sql.encode(), params).rowcount
    lite = sqlite3.connect(target, timeout=30, isolation_level=None)
    try:
        return lite.execute(sqlite_sql, params).rowcount
    finally:
        lite.close()


def steal_lease(url: str, job_id: uuid.UUID) -> None:
    """Give a running job a claim token its worker does not hold, as if
    another worker had claimed it since."""
    count = execute(
        url,
        "UPDATE jobvisor_jobs SET claim_token = gen_random_uuid(), worker_id = 'thief' "
        "WHERE id = %s AND status = 'running'",
        "UPDATE jobvisor_jobs SET claim_token = lower(hex(randomblob(16))), worker_id = 'thief' "
        "WHERE id = ? AND status = 'running'",
        [job_id if parse_url(url)[0] == "postgres" else str(job_id)],
    )
    assert count == 1, f"job {job_id} was not running"
