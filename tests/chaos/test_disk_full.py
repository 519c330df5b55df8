"""The file system of a SQLite database fills up while the service runs: a
tmpfs of a few MiB, mounted for this test (it needs root; skipped otherwise).
An enqueue that needs room fails with a clear `DatabaseError`, the service
and its workers keep running, nothing stored is lost, and once space returns
enqueues pass again and every job completes."""

from __future__ import annotations

import errno
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import jobvisor
from jobvisor.exitcodes import ExitCode
from jobvisor.queue import DatabaseError
from tests.support.invariants import assert_invariants
from tests.support.service import Service, by_status, http_get
from tests.support.wait import wait_until

SIZE = "8m"
CHUNK = b"\0" * 65536


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of `SIZE` at `tmp_path/fs`, unmounted after the test."""
    mount = tmp_path / "fs"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a size-limited tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SIZE},mode=0700", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=False)


def fill(directory: Path) -> Path:
    """Write a file until the file system has no space left; its path."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, CHUNK)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC, exc
    finally:
        os.close(fd)
    return filler


@pytest.mark.timeout(240)
def test_the_disk_fills_and_space_returns(
    small_fs: Path, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = f"sqlite:///{small_fs / 'jobvisor.db'}"
    with jobvisor.connect(url) as q:
        q.migrate()
        stored = q.enqueue_many([{"job_type": "sleep", "payload": {"seconds": 0.2}}] * 200)
    settings = {"JOBVISOR_HTTP_ADDR": "127.0.0.1:0", "JOBVISOR_POLL_INTERVAL": "0.2"}
    service = start_service(url, tmp_path, settings)
    port = int(service.wait_event("http.listening")[0]["port"])
    service.wait_ready()
    workers = service.live_workers()
    assert len(workers) == 2

    filler = fill(small_fs)
    full_at = time.monotonic()
    refused = 0
    with jobvisor.connect(url) as q:
        for _ in range(5):
            with pytest.raises(DatabaseError, match="database full"):
                q.enqueue_many([{"job_type": "noop", "payload": {"blob": "x" * 400_000}}] * 4)
            refused += 1
        # The service goes on: the same workers, still alive, for a while.
        wait_until(lambda: time.monotonic() - full_at > 5, timeout=10, what="five full seconds")
        service.check_running("the disk full")
        assert service.live_workers() == workers
        # Liveness names the loops that cannot write (as for a read-only server).
        status, health = http_get(port, "/healthz")
        assert status == 503 and "failing loops" in health and "flush" in health, health
        # Nothing stored is lost.
        assert not q.dead.list()
        assert q.summary().total == len(stored)

        filler.unlink()
        freed_at = time.monotonic()
        later = wait_until(
            lambda: _enqueue_or_none(q, "noop", {"blob": "x" * 400_000}),
            timeout=30,
            what="an enqueue once space returned",
        )
    enqueued_after = time.monotonic() - freed_at
    wait_until(lambda: http_get(port, "/healthz")[0] == 200, what="/healthz 200 again")
    healthy_after = time.monotonic() - freed_at
    wait_until(
        lambda: by_status(url).get("completed") == len(stored) + 1,
        timeout=120,
        what="every job completed",
    )
    assert service.live_workers() == workers  # never replaced
    assert service.stop() == ExitCode.OK
    assert_invariants(url)
    assert later not in stored
    print(
        f"disk full: refused {refused} enqueues; once space returned an enqueue passed after "
        f"{enqueued_after:.1f}s, /healthz 200 after {healthy_after:.1f}s; workers never replaced"
    )


def _enqueue_or_none(q: jobvisor.Queue, job_type: str, payload: object) -> object:
    try:
        return q.enqueue(job_type, payload)
    except DatabaseError:
        return None
