"""A schedule that starts a workflow, as the app declares it: the builder
and the tick's job type registered, bad declarations refused naming the
value, with nothing registered."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

import jobvisor
from jobvisor.schedules import InvalidSchedule
from jobvisor.worker import Registry
from jobvisor.worker.workflow_ticks import WORKFLOW_TICK


def nightly(tick: dt.datetime) -> jobvisor.Workflow:
    wf = jobvisor.Workflow("nightly")
    wf.add("report", {"day": tick.date().isoformat()})
    return wf


def test_a_workflow_schedule_fires_jobs_of_the_tick_type() -> None:
    registry = Registry()
    spec = registry.schedule("nightly", cron="30 2 * * *", workflow=nightly, queue="ticks")
    registry.schedule("hourly", every=3600, workflow=nightly)
    assert (spec.job_type, spec.payload, spec.queue) == (WORKFLOW_TICK, None, "ticks")
    assert WORKFLOW_TICK in registry
    assert [s.name for s in registry.schedules] == ["hourly", "nightly"]


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"workflow": nightly, "job_type": "t"}, "job_type='t' and a workflow"),
        ({"workflow": nightly, "payload": {"n": 1}}, "a workflow schedule takes no"),
        ({"workflow": "nightly"}, "workflow='nightly': expected a function"),
        ({}, "expected a job_type or a workflow"),
        ({"workflow": nightly, "every": 0}, "every=0"),
    ],
)
def test_bad_workflow_schedules_are_refused(options: dict[str, Any], named: str) -> None:
    registry = Registry()
    options.setdefault("every", 10)
    with pytest.raises(InvalidSchedule, match=named):
        registry.schedule("s", **options)
    assert registry.schedules == [] and WORKFLOW_TICK not in registry
