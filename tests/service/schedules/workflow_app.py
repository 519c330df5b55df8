"""The app of the workflow schedule tests
(`JOBVISOR_APP=tests.service.schedules.workflow_app:registry`): a schedule
ticking every second that starts a workflow built for its tick, two typed
tasks and a child that takes both results. With `JOBVISOR_TEST_DIE_ONCE` (a
file path), the first child to run kills its own worker."""

from __future__ import annotations

import datetime as dt
import os
import signal

import jobvisor
from jobvisor.worker import Registry

registry = Registry()


@registry.task
def count_orders(day: str) -> int:
    return 2


@registry.task
async def sum_refunds(day: str) -> int:
    return 1


@registry.task
def summarise(day: str, orders: int, refunds: int) -> str:
    die_once = os.environ.get("JOBVISOR_TEST_DIE_ONCE")
    if die_once:
        try:
            os.close(os.open(die_once, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        except FileExistsError:
            pass
        else:
            os.kill(os.getpid(), signal.SIGKILL)
    return f"{day}: {orders} orders, {refunds} refunds"


def report(tick: dt.datetime) -> jobvisor.Workflow:
    """The workflow of one tick: its time is every node's argument."""
    wf = jobvisor.Workflow("report")
    day = tick.isoformat()
    orders = wf.add(count_orders, day)
    refunds = wf.add(sum_refunds, day)
    wf.add(summarise, day, orders.result, refunds.result)
    return wf


registry.schedule("report", every=1, workflow=report, catch_up="all")
