"""Rolling updates on one database under a steady enqueue: a new supervisor
starts, once it is up the old one gets SIGTERM and drains. Nothing may be
lost, left running, or run twice without a reason; and what operators look
at (`jobvisor status --json`, `/metrics`) must agree with the database."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.cli import JOBVISOR, Cli
from tests.support.invariants import STATUSES
from tests.support.service import Service, http_get
from tests.support.wait import wait_until

from .ledger import (
    Enqueuer,
    assert_chaos_invariants,
    counts,
    settings,
    wait_all_finished,
    wait_more_runs,
)

ROLLOUTS = 10
HTTP = {"JOBVISOR_HTTP_ADDR": "127.0.0.1:0", "JOBVISOR_SUMMARY_INTERVAL": "0.5"}


def http_port(service: Service) -> int:
    return int(service.wait_event("http.listening")[0]["port"])


def assert_drained_cleanly(service: Service) -> None:
    """A graceful stop: every worker drained and exited 0, nothing was
    requeued or left to the reaper."""
    exits = service.events("worker.exited")
    assert exits and {e["exit"] for e in exits} == {"exit code 0"}, exits
    assert not service.events("worker.jobs_requeued")
    assert not service.events("worker.unwritten")


@pytest.mark.long
@pytest.mark.timeout(300)
def test_ten_rolling_restarts_under_steady_enqueue(
    chaos_url: str, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = chaos_url
    stream = Enqueuer(url, batch=4, every=0.2).start()
    everyone = [start_service(url, tmp_path, settings(), name="rollout-0")]
    everyone[0].wait_ready()
    everyone.append(start_service(url, tmp_path, settings(), name="rollout-1"))
    for i in range(1, ROLLOUTS + 1):
        # Booting takes seconds on a busy machine, so the next one boots
        # while this one gets ready; the order that matters is kept: the old
        # one gets SIGTERM only once the new one's workers are all up. The old
        # one drains while the rollout goes on; its exit is checked at the end.
        if i < ROLLOUTS:
            everyone.append(start_service(url, tmp_path, settings(), name=f"rollout-{i + 1}"))
        everyone[i].wait_ready()
        everyone[i - 1].signal(signal.SIGTERM)
    current = everyone[-1]
    wait_more_runs(url, 20)  # the last one works alone
    ids = stream.stop()
    wait_all_finished(url, len(ids), timeout=180)
    for service in everyone[:-1]:
        assert service.wait_exit(90) == 0
        assert_drained_cleanly(service)
    assert current.stop() == 0

    outcome = assert_chaos_invariants(url, ids, everyone)
    print(f"{ROLLOUTS} rolling restarts: {len(ids)} jobs, {outcome}")
    assert outcome.statuses == {"completed": len(ids)}
    # A drain cut short is the only allowed reason for a job to run twice.
    assert {r.why for r in outcome.extra_runs} <= {"its worker's drain released it"}
    assert not any(s.events("maintenance.leases_reaped") for s in everyone)


def metrics_counts(port: int) -> dict[str, int]:
    """`jobvisor_queue_jobs` of the default queue, by status."""
    found: dict[str, int] = {}
    for family in text_string_to_metric_families(http_get(port, "/metrics")[1]):
        for sample in family.samples:
            if sample.name == "jobvisor_queue_jobs" and sample.labels["queue"] == "default":
                found[sample.labels["status"]] = int(sample.value)
    return found


@pytest.mark.timeout(240)
def test_rolling_update_loses_nothing(
    chaos_url: str, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    """Issue 4: the zero-loss rolling update, as Kubernetes does it: the new
    pod is ready (its /readyz answers 200) before the old one gets SIGTERM."""
    if not JOBVISOR.exists():
        pytest.skip(f"no jobvisor console script beside {JOBVISOR.parent}")
    url = chaos_url
    old = start_service(url, tmp_path, settings(**HTTP), name="old")
    old_port = http_port(old)
    wait_until(lambda: http_get(old_port, "/readyz")[0] == 200, timeout=90, what="old ready")
    stream = Enqueuer(url, batch=4, every=0.1).start()
    wait_more_runs(url, 50)

    new = start_service(url, tmp_path, settings(**HTTP), name="new")
    new_port = http_port(new)
    assert new_port != old_port
    wait_until(lambda: http_get(new_port, "/readyz")[0] == 200, timeout=90, what="new ready")
    assert http_get(new_port, "/healthz")[0] == 200
    old.signal(signal.SIGTERM)
    assert old.wait_exit(90) == 0
    assert_drained_cleanly(old)
    wait_more_runs(url, 50)  # the new one carries on alone
    ids = stream.stop()
    wait_all_finished(url, len(ids), timeout=120)

    database = counts(url)
    assert database == {"completed": len(ids)}
    status = json.loads(Cli(url, tmp_path).ok("status", "--json"))
    assert status["total"] == len(ids)
    assert {s: n for s, n in status["queues"]["default"].items() if s in STATUSES and n} == database
    # The new supervisor leads once the old one resigned; its summary service
    # refreshes the gauges every half second.
    wait_until(
        lambda: {k: v for k, v in metrics_counts(new_port).items() if v} == database,
        timeout=60,
        what=f"/metrics agreeing with the database ({database})",
    )
    assert new.stop() == 0

    outcome = assert_chaos_invariants(url, ids, [old, new])
    print(f"rolling update: {len(ids)} jobs, {outcome}")
    assert outcome.statuses == {"completed": len(ids)}
    assert {r.why for r in outcome.extra_runs} <= {"its worker's drain released it"}
