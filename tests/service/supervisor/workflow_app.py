"""Typed tasks for the workflow service tests, loaded by real worker
processes as `JOBVISOR_APP=tests.service.supervisor.workflow_app:registry`. Each
task uses its arguments as the types it declares, so a result that came
back as plain JSON fails the job instead of passing by accident."""

from __future__ import annotations

import dataclasses
import decimal
import time
from pathlib import Path

from jobvisor import Registry, RetryPolicy

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
