"""A PostgreSQL server that turns read-only for a few seconds under load (as
during a failover, or `default_transaction_read_only` set by an operator):
every statement that writes fails with `ReadOnlySqlTransaction`. The
service must ride it out by itself: the workers log the errors, retry them,
and resume within seconds of the reset; every job completes, none stays
`running`.

`ALTER SYSTEM` changes the server for every database on it, so this runs on
a throwaway cluster of its own (`test_database.throwaway_server`), never on
the shared server."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from tests.support.service import Service, by_status, http_get
from tests.support.wait import wait_until

from .ledger import (
    Enqueuer,
    assert_chaos_invariants,
    prepare,
    settings,
    wait_all_finished,
    wait_more_runs,
)
from .test_database import ThrowawayServer, throwaway_server  # noqa: F401 - a fixture

SHARED_PORT = 5432
WINDOW = 5.0  # seconds read-only, at least


def set_read_only(url: str, on: bool) -> None:
    """`default_transaction_read_only` for every session of the server, new
    and existing (a configuration reload reaches every backend)."""
    with psycopg.connect(url, autocommit=True) as conn:
        if on:
            conn.execute("ALTER SYSTEM SET default_transaction_read_only = on")
        else:
            conn.execute("ALTER SYSTEM RESET default_transaction_read_only")
        conn.execute("SELECT pg_reload_conf()")


def read_only_failures(service: Service) -> list[dict[str, object]]:
    return [
        e
        for e in service.events()
        if e.get("fault") == "may_pass" and "read-only" in str(e.get("error"))
    ]


@pytest.mark.timeout(300)
def test_a_read_only_window_under_load_is_ridden_out(
    throwaway_server: ThrowawayServer,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
    start_service: Callable[..., Service],
) -> None:
    url = throwaway_server.url
    assert f":{SHARED_PORT}/" not in url, "never on the shared server"
    prepare(url)
    service = start_service(url, tmp_path, settings(JOBVISOR_HTTP_ADDR="127.0.0.1:0"))
    backlog = Enqueuer(url, batch=300, total=300).start()
    port = int(service.wait_event("http.listening")[0]["port"])
    service.wait_ready()
    wait_more_runs(url, 60)

    set_read_only(url, True)
    since = time.monotonic()
    health: set[int] = set()
    try:
        # Held for WINDOW seconds and until the workers felt it: their writes
        # refused, logged as an error that may pass, and retried.
        def felt() -> bool:
            health.add(http_get(port, "/healthz")[0])
            return bool(read_only_failures(service)) and time.monotonic() - since >= WINDOW

        wait_until(felt, timeout=90, what="read-only errors in the workers")
    finally:
        set_read_only(url, False)
    assert 503 in health  # the failing loops were reported
    wait_until(lambda: http_get(port, "/healthz")[0] == 200, what="/healthz healthy again")
    stream = Enqueuer(url, batch=5, every=0.1, total=100).start()  # after the reset
    wait_more_runs(url, 60)  # resumed by itself
    ids = backlog.stop() + stream.stop()
    wait_all_finished(url, len(ids), timeout=180)
    assert service.stop() == 0

    outcome = assert_chaos_invariants(url, ids, [service])
    print(f"read-only window: {len(read_only_failures(service))} errors retried; {outcome}")
    assert outcome.statuses == {"completed": len(ids)}
    assert by_status(url) == {"completed": len(ids)}
    # Ridden out in place: no worker gave up or was replaced.
    assert not service.events("worker.loop_failed")
    assert len(service.events("worker.spawned")) == 2
