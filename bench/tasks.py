"""Typed tasks: what a task's serialisation costs next to a raw payload.

    .venv/bin/python bench/tasks.py [--engine postgres|sqlite|both] [--jobs 5000]
        [--calls 20000] [--pg-url postgresql://postgres@127.0.0.1:5432/postgres]

Two parts:

1. **in memory** (no database): microseconds per call to build a job's
   payload (`task.payload(...)`: bind to the signature, dump every argument,
   check its JSON) against writing the same dict by hand, and to rebuild the
   arguments in the worker (`task.arguments(payload)`: load by type hints)
   against reading the dict. Two argument shapes: two strings, and a
   dataclass order with three lines, a pydantic customer and a datetime.
2. **enqueue**: jobs per second of `--jobs` single enqueues, raw
   (`q.enqueue("ship", {...})`) against the task (`ship.enqueue(order, ...)`),
   and of one `enqueue_many` of `--jobs` items, raw dicts against
   `ship.args(...)` bundles, on each engine.

PostgreSQL runs in a database named `jobvisor_bench_tasks`, dropped and
created per run; SQLite in a temporary file.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import decimal
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pydantic
from psycopg import sql

import jobvisor
from jobvisor import Registry

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
DB_NAME = "jobvisor_bench_tasks"

registry = Registry()


@dataclasses.dataclass(frozen=True)
class Line:
    sku: str
    quantity: int
    price: decimal.Decimal


@dataclasses.dataclass(frozen=True)
class Order:
    id: int
    lines: list[Line]
    placed_at: dt.datetime


class Customer(pydantic.BaseModel):
    name: str
    email: str


@registry.task
def send_email(to: str, subject: str) -> None: ...


@registry.task
def ship(order: Order, customer: Customer, express: bool = False) -> None: ...


ORDER = Order(
    id=7,
    lines=[Line(f"sku-{n}", n + 1, decimal.Decimal("9.99")) for n in range(3)],
    placed_at=dt.datetime(2026, 5, 1, 12, 0, tzinfo=dt.UTC),
)
CUSTOMER = Customer(name="Ada", email="ada@example.org")
ORDER_DICT = {
    "order": {
        "id": 7,
        "lines": [{"sku": f"sku-{n}", "quantity": n + 1, "price": "9.99"} for n in range(3)],
        "placed_at": "2026-05-01T12:00:00+00:00",
    },
    "customer": {"name": "Ada", "email": "ada@example.org"},
}


def per_call(calls: int, body: Callable[[], Any]) -> float:
    """Microseconds per call of `body`, the best of three runs."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(calls):
            body()
        best = min(best, time.perf_counter() - started)
    return best / calls * 1e6


def in_memory(calls: int) -> None:
    print(f"in memory, microseconds per call (best of 3 x {calls}):")
    rows = [
        ("payload, two strings", lambda: send_email.payload("a@example.org", "hi"),
         lambda: {"to": "a@example.org", "subject": "hi"}),
        ("payload, order", lambda: ship.payload(ORDER, CUSTOMER),
         lambda: dict(ORDER_DICT)),
        ("arguments, two strings",
         lambda: send_email.arguments({"to": "a@example.org", "subject": "hi"}),
         lambda: {"to": "a@example.org", "subject": "hi"}["to"]),
        ("arguments, order", lambda: ship.arguments(ORDER_DICT),
         lambda: ORDER_DICT["order"]["lines"]),  # type: ignore[index]
    ]  # fmt: skip
    print(f"  {'':24} {'task':>8} {'by hand':>8}")
    for name, task_call, raw_call in rows:
        print(f"  {name:24} {per_call(calls, task_call):8.2f} {per_call(calls, raw_call):8.2f}")


def _pg_database(admin_url: str) -> str:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(DB_NAME))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DB_NAME)))
    return admin_url.rsplit("/", 1)[0] + "/" + DB_NAME


def rate(jobs: int, body: Callable[[], Any]) -> float:
    started = time.perf_counter()
    body()
    return jobs / (time.perf_counter() - started)


def enqueue(engine: str, url: str, jobs: int, rounds: int = 3) -> None:
    """Each way's best rate over `rounds` rounds, the order of the ways
    reversed every round (the table grows as they run)."""
    with jobvisor.connect(url) as q:
        q.migrate()
        ways: dict[str, Callable[[], Any]] = {
            "enqueue, raw": lambda: [q.enqueue("ship", ORDER_DICT) for _ in range(jobs)],
            "enqueue, task": lambda: [ship.enqueue(ORDER, CUSTOMER) for _ in range(jobs)],
            "enqueue_many, raw": lambda: q.enqueue_many(
                [{"job_type": "ship", "payload": ORDER_DICT}] * jobs
            ),
            "enqueue_many, task": lambda: ship.enqueue_many([ship.args(ORDER, CUSTOMER)] * jobs),
        }
        best = dict.fromkeys(ways, 0.0)
        with registry.bind(q):
            for round_ in range(rounds):
                for name in sorted(ways, reverse=bool(round_ % 2)):
                    best[name] = max(best[name], rate(jobs, ways[name]))
    print(f"{engine}, jobs/s over {jobs} jobs (best of {rounds} rounds):")
    print(f"  {'':14} {'raw':>9} {'task':>9}")
    for call in ("enqueue", "enqueue_many"):
        print(f"  {call:14} {best[call + ', raw']:9,.0f} {best[call + ', task']:9,.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--engine", choices=["postgres", "sqlite", "both"], default="both")
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    args = parser.parse_args()
    in_memory(args.calls)
    if args.engine in ("postgres", "both"):
        enqueue("postgres", _pg_database(args.pg_url), args.jobs)
    if args.engine in ("sqlite", "both"):
        with tempfile.TemporaryDirectory() as folder:
            enqueue("sqlite", f"sqlite:///{Path(folder) / 'bench.db'}", args.jobs)


if __name__ == "__main__":
    main()
