"""The PostgreSQL server crashes mid-run: its postmaster is killed with
SIGKILL, on a throwaway cluster of this test's own, and the next start runs
crash recovery. The service never exits, `/readyz` answers 503 while the
server is away and 200 after, every job completes, none is left running, and
every run that did not complete its job is explained.

The cluster commits synchronously (as a production server does) for every
session but the workers', which turn `synchronous_commit` off for their own
claims and completions: the crash may forget the last few hundred
milliseconds of those, and at-least-once delivery runs such a job again
(`assert_chaos_invariants(crashed=...)` allows a run that ended at most
`CRASH_WINDOW` before the crash)."""

from __future__ import annotations

import datetime as dt
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from jobvisor.exitcodes import ExitCode
from tests.support.postgres import Cluster, throwaway_cluster
from tests.support.service import Service, http_get, is_alive
from tests.support.wait import wait_until

from .ledger import (
    Enqueuer,
    answers,
    assert_chaos_invariants,
    prepare,
    settings,
    wait_all_finished,
    wait_more_runs,
)


class CrashableServer:
    """A throwaway cluster whose postmaster the test kills with SIGKILL."""

    def __init__(self, cluster: Cluster, url: str) -> None:
        self.cluster, self.url = cluster, url

    @property
    def postmaster_pid(self) -> int:
        return int((self.cluster.data / "postmaster.pid").read_text().split("\n", 1)[0])

    def crash(self) -> None:
        """SIGKILL to the postmaster: its backends notice and exit, nothing is
        flushed or checkpointed."""
        pid = self.postmaster_pid
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not is_alive(pid), timeout=30, what="the postmaster gone")

    def start(self) -> None:
        """Start with synchronous commits (crash recovery first, after a
        crash). While the killed postmaster's backends still hold its shared
        memory, the server refuses to start: try again until they are gone."""
        opts = self.cluster.options(synchronous_commit=True)
        wait_until(
            lambda: (
                self.cluster.ctl("-o", opts, "-w", "-t", "120", "start", check=False).returncode
                == 0
            ),
            timeout=60,
            what="the server started",
        )

    def stop(self) -> None:
        self.cluster.ctl("-m", "fast", "-w", "-t", "120", "stop")


@pytest.fixture
def server() -> Iterator[CrashableServer]:
    with throwaway_cluster() as (cluster, url):
        crashable = CrashableServer(cluster, url)
        crashable.stop()  # started with asynchronous commits: again with synchronous ones
        crashable.start()
        yield crashable


@pytest.mark.timeout(300)
def test_the_postmaster_killed_mid_run(
    server: CrashableServer, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = server.url
    prepare(url)
    service = start_service(url, tmp_path, settings(JOBVISOR_HTTP_ADDR="127.0.0.1:0"))
    port = int(service.wait_event("http.listening")[0]["port"])
    backlog = Enqueuer(url, batch=300, total=300).start()
    stream = Enqueuer(url, batch=5, every=0.1, total=600).start()
    service.wait_ready()
    wait_until(lambda: http_get(port, "/readyz")[0] == 200, what="/readyz 200")
    wait_more_runs(url, 100)

    started = time.monotonic()
    server.crash()
    crashed_at = dt.datetime.now(dt.UTC)
    wait_until(lambda: http_get(port, "/readyz")[0] == 503, what="/readyz 503 after the crash")
    unready_after = time.monotonic() - started
    server.start()
    back_at = time.monotonic()
    wait_until(lambda: answers(url), what="the server back")
    wait_until(lambda: http_get(port, "/readyz")[0] == 200, timeout=60, what="/readyz 200 again")
    ready_after = time.monotonic() - back_at
    ids = backlog.stop() + stream.stop()
    wait_all_finished(url, len(ids), timeout=180)
    assert service.stop() == ExitCode.OK

    outcome = assert_chaos_invariants(url, ids, [service], crashed=[crashed_at])
    print(
        f"postmaster SIGKILL: /readyz 503 after {unready_after:.1f}s, server down "
        f"{back_at - started:.1f}s, /readyz 200 {ready_after:.1f}s after the restart, "
        f"enqueues retried {backlog.retries + stream.retries}: {outcome}"
    )
    assert outcome.statuses == {"completed": len(ids)}
    assert not service.events("supervisor.crash_loop")
    assert not service.events("supervisor.worker_cannot_boot")
