"""Running `jobvisor run` under test: a real process with real signals, its
JSON log in a file the test reads, and bounded polls instead of sleeps."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import psycopg

from jobvisor.queue.api import parse_url
from tests.support.invariants import query_all
from tests.support.wait import wait_until

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.service.supervisor.app:registry"
COMMAND = (sys.executable, "-m", "jobvisor.cli", "run")

# Short intervals so that a scenario takes seconds; a long lease so that a job
# coming back early proves the supervisor requeued it, not the lease reaper.
BASE_SETTINGS: dict[str, str] = {
    "JOBVISOR_APP": APP,
    "JOBVISOR_WORKERS": "2",
    "JOBVISOR_CONCURRENCY": "4",
    "JOBVISOR_LEASE": "120",
    "JOBVISOR_POLL_INTERVAL": "0.2",
    "JOBVISOR_SHUTDOWN_TIMEOUT": "5",
    "JOBVISOR_WORKER_TIMEOUT": "10",
    "JOBVISOR_REAP_INTERVAL": "1",
    "JOBVISOR_SUMMARY_INTERVAL": "1",
    "JOBVISOR_CLEANUP_INTERVAL": "60",
    "JOBVISOR_MAX_RESTARTS": "50",
    "JOBVISOR_RESTART_WINDOW": "60",
    "JOBVISOR_LOG_FORMAT": "json",
    "JOBVISOR_LOG_LEVEL": "info",
    "JOBVISOR_HTTP_ADDR": "",
}

T = TypeVar("T")


def clean_env(url: str, settings: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a service under test: no stray JOBVISOR_* variable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBVISOR_")}
    env.pop("NOTIFY_SOCKET", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["JOBVISOR_DATABASE_URL"] = url
    env.update(BASE_SETTINGS)
    env.update(settings or {})
    return env


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()


def _is_alive(pid: int) -> bool:
    """Running and not a zombie."""
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"


def births(pids: Iterable[int]) -> dict[int, str]:
    """Each live pid with its start time: `any_alive` tells the same process
    from a new one given its pid (pids wrap around fast on a busy machine)."""
    found = {}
    for pid in pids:
        fields = _stat(pid)
        if fields is not None and fields[0] != "Z":
            found[pid] = fields[19]  # starttime, field 22 of stat
    return found


def any_alive(born: dict[int, str]) -> bool:
    """Whether any of these processes (as `births` saw them) still runs."""
    return any(
        (fields := _stat(pid)) is not None and fields[0] != "Z" and fields[19] == start
        for pid, start in born.items()
    )


def _proc_entries() -> Iterator[Path]:
    """/proc/PID of every process but this one."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            yield entry


def children_of(pid: int) -> set[int]:
    """Live processes whose parent is `pid`."""
    found = set()
    for entry in _proc_entries():
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.add(int(entry.name))
    return found


# Set in each service's environment, which its workers inherit: how its
# teardown finds every process it started.
MARKER = "JV_TEST_SERVICE"


def marked(marker: str) -> set[int]:
    """Live processes (but this one) whose environment carries `marker`."""
    found = set()
    wanted = f"{MARKER}={marker}".encode()
    for entry in _proc_entries():
        try:
            if wanted in (entry / "environ").read_bytes().split(b"\0"):
                found.add(int(entry.name))
        except OSError:
            continue
    return found


class Service:
    """One `jobvisor run` process; everything it and its workers log goes to
    `log_path`, one JSON event per line."""

    def __init__(self, url: str, workdir: Path, settings: Mapping[str, str] | None = None,
                 *, name: str = "service") -> None:  # fmt: skip
        self.url = url
        self.workdir = workdir
        self.log_path = workdir / f"{name}.log"
        self.env = {**clean_env(url, settings), MARKER: uuid.uuid4().hex}
        self.proc: subprocess.Popen[bytes] | None = None
        self.known_pids: set[int] = set()

    def start(self) -> Service:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                COMMAND, env=self.env, cwd=self.workdir, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )  # fmt: skip
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def lines(self) -> list[str]:
        try:
            return self.log_path.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return []

    def tail(self, count: int = 30) -> str:
        """Its last `count` log lines, but for the periodic `queue.summary`
        lines (which would fill them on a quiet queue) the last one."""
        lines = self.lines()
        summaries = [line for line in lines if '"queue.summary"' in line]
        kept = [line for line in lines if '"queue.summary"' not in line or line is summaries[-1]]
        return "\n".join(kept[-count:])

    def events(self, event: str | None = None, **match: Any) -> list[dict[str, Any]]:
        """The logged events (optionally one kind, with fields equal to `match`)."""
        found = []
        for line in self.lines():
            if not line.startswith("{"):
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if event is not None and record.get("event") != event:
                continue
            if all(record.get(k) == v for k, v in match.items()):
                found.append(record)
        return found

    def wait_event(self, event: str, *, count: int = 1, timeout: float = 60.0,
                   **match: Any) -> list[dict[str, Any]]:  # fmt: skip
        """Wait until `event` (with `match`) was logged `count` times."""

        def enough() -> list[dict[str, Any]]:
            self.check_running(event)
            found = self.events(event, **match)
            return found if len(found) >= count else []

        return wait_until(enough, timeout=timeout, what=f"{count} x {event} {match or ''}")

    def check_running(self, waiting_for: str) -> None:
        assert self.proc is not None
        code = self.proc.poll()
        if code is not None:
            raise AssertionError(
                f"service exited with {code} waiting for {waiting_for}:\n{self.tail()}"
            )

    def wait_ready(self, workers: int | None = None, timeout: float = 90.0) -> None:
        self.wait_event("supervisor.ready", timeout=timeout)

    def worker_pids(self) -> dict[str, int]:
        """worker id -> pid of every worker the supervisor started."""
        return {e["worker_id"]: int(e["pid"]) for e in self.events("worker.spawned")}

    def live_workers(self) -> set[int]:
        pids = children_of(self.pid)
        self.known_pids |= pids
        return pids

    def signal(self, signum: int) -> None:
        self.live_workers()  # remember them, for the clean-up
        os.kill(self.pid, signum)

    def wait_exit(self, timeout: float) -> int:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"service still running after {timeout}s:\n{self.tail()}"
            ) from None

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM and wait: the clean stop every scenario ends with."""
        self.signal(signal.SIGTERM)
        return self.wait_exit(timeout)

    def kill_everything(self) -> None:
        """Teardown: no process of this service may outlive the test."""
        if self.proc is None:
            return
        pids = self.known_pids | set(self.worker_pids().values())
        if self.proc.poll() is None:
            pids |= children_of(self.pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            self.proc.wait(30)
        for pid in pids:
            if _is_alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        # A worker spawned after the list above was read (a replacement, the
        # instant before the supervisor died) is found by the marker in its
        # environment. Left running, it would claim the next test's jobs
        # wherever tests share a database (the Citus cluster's).
        for pid in marked(self.env[MARKER]):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def services() -> Iterator[Callable[..., Service]]:
    """A factory of started services, each killed (with its workers) at the end."""
    started: list[Service] = []

    def make(url: str, workdir: Path, settings: Mapping[str, str] | None = None,
             *, name: str = "service") -> Service:  # fmt: skip
        service = Service(url, workdir, settings, name=name)
        started.append(service)
        return service.start()

    try:
        yield make
    finally:
        for service in started:
            # Captured, so shown only where the test failed: what each service
            # logged last, whatever stopped the test (a pytest-timeout too).
            print(f"--- the last lines of {service.log_path.name} ---\n{service.tail(40)}")
            service.kill_everything()


def is_alive(pid: int) -> bool:
    return _is_alive(pid)


# --- the jobs table ------------------------------------------------------------


def jobs(url: str) -> list[dict[str, Any]]:
    """Every job: id, job_type, status, attempts, max_attempts, last_error, worker_id."""
    columns = ("id", "job_type", "status", "attempts", "max_attempts", "last_error", "worker_id")
    (rows,) = query_all(url, [f"SELECT {', '.join(columns)} FROM jobvisor_jobs"])
    return [dict(zip(columns, (str(v) if i == 0 else v for i, v in enumerate(row)), strict=True))
            for row in rows]  # fmt: skip


def job(url: str, job_id: uuid.UUID | str) -> dict[str, Any]:
    wanted = str(job_id)
    for row in jobs(url):
        if uuid.UUID(row["id"]) == uuid.UUID(wanted):
            return row
    raise AssertionError(f"job {wanted} is not in the table")


def by_status(url: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in jobs(url):
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    return counts


def terminate_backends(url: str) -> int:
    """`pg_terminate_backend` every other connection to this test's database."""
    _, conninfo = parse_url(url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    return len(rows)


def http_get(port: int, path: str) -> tuple[int, str]:
    """GET a supervisor endpoint on 127.0.0.1: (status, body), errors included."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as exc:
        with exc:
            return int(exc.code), exc.read().decode()
