"""`jobvisor run` in Citus mode: the supervisor's scenarios below run again
on a Citus cluster (`tests.support.rerun`; the fixtures of conftest.py): a
drain that loses nothing, a job longer than the drain released and finished
by the next supervisor, a running job's cancel reaching its worker (the
notice sent from the coordinator), results and waits, every way a handler
ends; crashes (a worker killed by `kill -9`, by its job, by its blocked
event loop or its hard limit, its parent killed, too many crashes), two
supervisors sharing the jobs and one leading the maintenance, workers
recovering when every connection is terminated, the fleet's heartbeats,
pause under load, a worker count changed by signals, health, readiness,
metrics and the dashboard; and limits held by three supervisors at once
(their own queues in Citus mode through JOBVISOR_CITUS). The chaos of
workers and nodes killed under load is tests/chaos/test_citus.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.service.limits.test_supervised import capped_and_free, most_at_once, per_tenant_runs
from tests.support.rerun import rerun
from tests.support.service import Service

SERVICE = (
    "stop", "cancel", "results", "outcomes", "crashes", "cluster", "fleet", "pause",
    "scale_reload", "endpoints",
)  # fmt: skip

SKIP = {
    # The CLI it runs has an environment of its own, without JOBVISOR_CITUS
    # (tests/contract/citus/test_citus.py checks the error that then names it).
    "test_jobvisor_cancel_by_type_stops_running_jobs_and_cancels_pending_ones",
    # Bounds the workers spawned before the crash budget is spent, which
    # depends on how soon each crash's requeue answers (a crash is charged
    # then): on the cluster that statement looks at every shard, and a
    # replacement that dies at once may die again meanwhile. The crash loop
    # itself is the supervisor's, the same on any database.
    "test_too_many_crashes_in_the_window_stop_the_supervisor_non_zero",
}

SHARED = {"queue", "pg_queue", "url", "tmp_path", "start_service", "aqueue", "clock"}

globals().update(rerun(SERVICE, skip=SKIP, package="tests.service.supervisor", shared=SHARED))
# Limits held by three supervisors racing for the same jobs; but for three
# figures of how fully a limited group's room is used, which on the cluster
# are lower: a limited claim there is four round trips, two of them over every
# shard (about 20 ms on a quiet cluster against one round trip on one server),
# and the claims of a group wait for each other. The limits hold all the same
# (the tests below).
SKIP_LIMITS = {
    "test_a_type_limit_holds_across_three_supervisors_and_uses_every_slot",
    "test_a_key_limit_holds_per_key_across_three_supervisors",
    "test_a_key_rate_holds_per_key_and_every_key_progresses",
}
globals().update(
    rerun(
        ("supervised",),
        skip=SKIP_LIMITS,
        package="tests.service.limits",
        shared=SHARED,
        own_queues=True,
    )
)


def test_a_type_limit_holds_across_three_supervisors(
    url: str, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    _, free = capped_and_free(url, tmp_path, start_service, 30)
    assert most_at_once(free) > 3  # the limit is the type's alone


def test_a_key_limit_holds_per_key_across_three_supervisors(
    url: str, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    got = per_tenant_runs(url, tmp_path, start_service)
    assert most_at_once(got) > 1  # the limit is each key's, not the type's
