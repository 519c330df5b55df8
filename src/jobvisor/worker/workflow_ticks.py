"""Schedules that start a workflow at each tick.

    def nightly(tick: datetime) -> jobvisor.Workflow:
        wf = jobvisor.Workflow("nightly")
        day = tick.date().isoformat()
        a = wf.add(fetch_orders, day=day)
        wf.add(build_report, orders=a.result)
        return wf

    registry.schedule("nightly", cron="30 2 * * *", workflow=nightly)

The supervisor fires a workflow schedule's ticks as any schedule's (it does
not import the app, so it cannot call the builder): each tick enqueues one
job of type `WORKFLOW_TICK`, its meta naming the schedule and the tick, in
the transaction that moves the schedule on. A worker, which has the app,
runs that job: it calls the builder with the tick's time and enqueues the
workflow it returns with `enqueue_workflow_once`, which records the
workflow's id in the tick's job in the transaction that inserts the
workflow, and inserts nothing when that job has started one already. So a
tick starts one workflow, however often its job runs (a worker killed
after the insert, a lease lost); a builder that raises fails the tick's
job, which is retried as any job and shows the error. The tick's job's
result is the workflow's id. Each job of the workflow carries the tick in
its meta (`schedule`, `tick`; `manual` for `jobvisor schedule run`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from typing import Any, Final

from ..handler import Cancel, JobContext
from ..queue.errors import InvalidArgument
from ..queue.validate import short
from ..queue.workflows import WorkflowSpec

WORKFLOW_TICK: Final = "jobvisor.workflow_tick"
"""The job type of a workflow schedule's tick (one for every such schedule:
the tick's meta names the schedule)."""

Builder = Callable[[dt.datetime], WorkflowSpec]


def check_builder(name: str, builder: Any) -> Builder:
    """`workflow=` of a schedule: a callable; `InvalidArgument` otherwise."""
    if not callable(builder):
        raise InvalidArgument(
            f"schedule {name!r}: workflow={short(builder)}: expected a function that takes "
            "the tick's time and returns a jobvisor.Workflow"
        )
    checked: Builder = builder
    return checked


def _tick_of(job: JobContext) -> dt.datetime:
    """The tick a tick's job stands for: its meta's, or for a manual run
    (`schedule run`) the job's creation."""
    meta = job.job.meta or {}
    tick = meta.get("tick")
    if isinstance(tick, str):
        return dt.datetime.fromisoformat(tick)
    return job.job.created_at


class WorkflowTicks:
    """The builders of an app's workflow schedules, by schedule name, and
    the handler of their ticks' jobs."""

    def __init__(self) -> None:
        self.builders: dict[str, Builder] = {}

    async def run(self, job: JobContext) -> str:
        """The handler of `WORKFLOW_TICK`: build the tick's workflow and
        enqueue it once; the workflow's id."""
        meta = dict(job.job.meta or {})
        name = meta.get("schedule")
        builder = self.builders.get(name) if isinstance(name, str) else None
        if builder is None:
            raise Cancel(f"schedule {short(name)}: this app declares no workflow schedule of it")
        durable = job._durable  # the worker's own service operations, and its loop
        if durable is None:
            raise InvalidArgument(
                f"schedule {name!r}: a workflow tick's job runs in a jobvisor worker "
                "(`jobvisor run`); to test a builder, call it with a tick"
            )
        tick = _tick_of(job)
        workflow = await asyncio.to_thread(builder, tick)  # app code: off the loop
        if not hasattr(workflow, "specs") or not hasattr(workflow, "name"):
            raise InvalidArgument(
                f"schedule {name!r}: its workflow builder returned {short(workflow)}: "
                "expected a jobvisor.Workflow"
            )
        keys = ("schedule", "tick", "manual")
        marks: dict[str, Any] = {key: meta[key] for key in keys if key in meta}
        workflow_id = await durable.svc.enqueue_workflow_once(job.id, workflow, meta=marks)
        return str(workflow_id)
