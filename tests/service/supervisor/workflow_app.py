"""Typed tasks for the workflow service tests, loaded by real worker
processes as `JOBVISOR_APP=tests.service.supervisor.workflow_app:registry`. Each
task uses its arguments as the types it declares, so a result that came
back as plain JSON fails the job instead of passing by accident."""

from __future__ import annotations

import asyncio
import dataclasses
import decimal
import time
from pathlib import Path

from jobvisor import JobContext, Registry, RetryPolicy

registry = Registry()
NO_WAIT = RetryPolicy(base=0.0, cap=0.0, jitter=0.0)


@dataclasses.dataclass(frozen=True)
class Order:
    id: int
    total: decimal.Decimal


@dataclasses.dataclass(frozen=True)
class Report:
    day: str
    orders: int
    net: decimal.Decimal


@registry.task
def fetch_orders(day: str) -> list[Order]:
    return [Order(1, decimal.Decimal("10.50")), Order(2, decimal.Decimal("4.25"))]


@registry.task
async def fetch_refunds(day: str) -> decimal.Decimal:
    return decimal.Decimal("1.75")


@registry.task
def build_report(day: str, orders: list[Order], refunds: decimal.Decimal) -> Report:
    return Report(day, len(orders), sum((o.total for o in orders), decimal.Decimal()) - refunds)


@registry.task
def publish(report: Report, log: str) -> str:
    with Path(log).open("a") as out:
        out.write(f"{report.day} {report.net}\n")
    return f"{report.day}: {report.orders} orders, net {report.net}"


@registry.task(max_attempts=3)
def held(started: str, release: str) -> int:
    """Note each start in `started`, then wait for the file `release`."""
    with Path(started).open("a") as out:
        out.write("start\n")
    while not Path(release).exists():
        time.sleep(0.05)
    return len(Path(started).read_text().splitlines())


# --- the shapes of the service tests: each run noted in a file ------------------


def note(path: str, line: str) -> None:
    """Append one line to `path` (one write, so concurrent workers do not mix)."""
    with Path(path).open("a") as out:
        out.write(f"{line}\n")


@registry.handler("leaf")
async def leaf(job: JobContext) -> None:
    """A node of a wide fan-out: notes its run, then waits `ms` milliseconds."""
    note(job.payload["log"], "leaf")
    await asyncio.sleep(job.payload.get("ms", 0) / 1000)


@registry.handler("sink")
def sink(job: JobContext) -> int:
    """A fan-in: notes its run and how many parents it followed."""
    note(job.payload["log"], "sink")
    return len(job.parent_results)


@registry.task
def step(previous: int, log: str) -> int:
    note(log, str(previous))
    return previous + 1


@registry.task(max_attempts=1)
def flaky(log: str, fixed: str) -> str:
    """Fails until the file `fixed` exists."""
    note(log, "flaky")
    if not Path(fixed).exists():
        raise RuntimeError("not fixed yet")
    return "fixed"


@registry.task
def counted(name: str, log: str) -> str:
    note(log, name)
    return name


@registry.task
def gather(log: str, first: str, second: str) -> str:
    note(log, "gather")
    return f"{first}+{second}"


@registry.handler("witness")
def witness(job: JobContext) -> dict[str, object]:
    """Runs after a parent under some policy: notes what it was handed."""
    note(job.payload["log"], job.payload["name"])
    return {"payload": job.payload, "failed": job.failed_parents}


@registry.task
async def sleeper(started: str) -> None:
    """Notes its start, then sleeps until cancelled."""
    note(started, "start")
    await asyncio.sleep(600)
