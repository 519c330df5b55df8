"""A fleet's bounded claims through real services: supervisors spread as pods
would be, a backlog drained while another session's transaction stays open
(the dead head that makes claims bounded, each starting past the newest
mark its filter's claims left), jobs of a higher priority arriving
meanwhile. None is lost, none runs twice under one claim, none is left
running."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

import jobvisor
from jobvisor.queue.api import parse_url
from tests.support.invariants import query_all
from tests.support.service import Service

from .ledger import MAX_ATTEMPTS, assert_chaos_invariants, settings, wait_all_finished

BACKLOG = 10_000


def job(priority: int) -> dict[str, Any]:
    """A chaos job that does no work: it records its run and ends."""
    return {
        "job_type": "chaos",
        "priority": priority,
        "payload": {"seconds": 0.0},
        "max_attempts": MAX_ATTEMPTS,
    }


@pytest.mark.long
@pytest.mark.timeout(300)
def test_spread_supervisors_drain_a_backlog_behind_an_open_transaction(
    chaos_url: str, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    url = chaos_url
    with psycopg.connect(parse_url(url)[1]) as holder:
        holder.execute("SELECT txid_current()")  # idle in transaction from here on
        with jobvisor.connect(url, pool_size=1) as q:
            ids = q.enqueue_many([job(0)] * BACKLOG)
        for i in range(3):
            (tmp_path / f"pod{i}").mkdir()
        fleet = [
            start_service(
                url, tmp_path / f"pod{i}", settings(JOBVISOR_CONCURRENCY="50"), name=f"pod{i}"
            )
            for i in range(3)
        ]
        urgent = jobvisor.connect(url, pool_size=1)
        try:
            for _ in range(20):
                ids += urgent.enqueue_many([job(5)] * 5)
        finally:
            urgent.close()
        wait_all_finished(url, len(ids), timeout=240)
        holder.rollback()
    (rows,) = query_all(url, ["SELECT count(*) FROM jobvisor_claim_marks"])
    assert int(rows[0][0]) > 0, "no claim was bounded: the scenario did not test the marks"
    for service in fleet:
        assert service.stop() == 0
    outcome = assert_chaos_invariants(url, ids, fleet)
    assert outcome.statuses == {"completed": len(ids)}
