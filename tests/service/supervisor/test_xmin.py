"""A transaction left open on the database is seen coming: the supervisor's
gauge follows its age, and past `JOBVISOR_XMIN_WARN` a warning names the
backend in the log and in `/readyz`'s body, which still answers 200.

The supervisor watches the oldest transaction of the whole server, so the test
runs on a cluster of its own: another test's transaction elsewhere on a shared
server would be named instead."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

import jobvisor
from jobvisor import Queue
from tests.support.invariants import assert_invariants
from tests.support.postgres import throwaway_cluster, with_dbname
from tests.support.service import Service, by_status, http_get
from tests.support.wait import wait_until

GAUGE = re.compile(r"^jobvisor_db_oldest_xmin_age_seconds (\S+)$", re.MULTILINE)


@pytest.fixture
def alone_queue() -> Iterator[Queue]:
    """A migrated queue on a throwaway cluster no other test uses."""
    with throwaway_cluster() as (_, admin_url):
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute("CREATE DATABASE alone")
        with jobvisor.connect(with_dbname(admin_url, "alone")) as q:
            q.migrate()
            yield q


def test_an_open_transaction_raises_the_gauge_and_a_warning_naming_its_pid(
    alone_queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = alone_queue.url
    settings = {"JOBVISOR_HTTP_ADDR": "127.0.0.1:0", "JOBVISOR_XMIN_WARN": "1"}
    service = start_service(url, tmp_path, settings)
    port = int(service.wait_event("http.listening")[0]["port"])
    service.wait_ready()

    def gauge() -> float:
        found = GAUGE.search(http_get(port, "/metrics")[1])
        assert found is not None, "no jobvisor_db_oldest_xmin_age_seconds in /metrics"
        return float(found.group(1))

    with psycopg.connect(url, application_name="report-export") as held:
        held.execute("BEGIN")
        held.execute("SELECT txid_current()")
        pid = held.info.backend_pid

        warned = service.wait_event("database.xmin_held", pid=pid)[0]
        assert warned["application_name"] == "report-export"
        assert warned["state"] == "idle in transaction"
        assert warned["age"] >= 1
        assert "query" not in warned

        def readyz_warns() -> str:
            status, body = http_get(port, "/readyz")
            return f"{status} {body}" if f"pid {pid}" in body else ""

        answer = wait_until(readyz_warns, what="the warning in /readyz")
        assert answer.startswith("200 ok: database answers")
        assert f"by pid {pid} (report-export, idle in transaction)" in answer

        def past_one_second() -> float:
            age = gauge()
            return age if age >= 1 else 0.0

        first = wait_until(past_one_second, what="the gauge past 1 s")
        wait_until(lambda: gauge() > first, what="the gauge rising")

        # Work goes on meanwhile.
        ids = alone_queue.enqueue_many([{"job_type": "noop"}] * 5)
        wait_until(lambda: by_status(url).get("completed") == len(ids), what="the jobs done")
        held.rollback()

    service.wait_event("database.xmin_released", pid=pid)
    wait_until(lambda: gauge() < 1, what="the gauge back down")
    status, body = http_get(port, "/readyz")
    assert status == 200 and "warning" not in body
    assert len(service.events("database.xmin_held", pid=pid)) == 1  # once per holder
    assert service.stop() == 0
    assert_invariants(url)
