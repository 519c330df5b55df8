"""The bundled example app: what `jobvisor run` runs without `JOBVISOR_APP`.

Four handlers show the ways a job can go: `noop` does nothing (benchmarks use
it), `send_email` is a quick async job, `resize_image` fails on its first
attempts and then succeeds on a retry, and `build_report` is slow blocking
code run in the thread pool. `seed(queue)` enqueues a demo batch of them;
`python -m jobvisor.example` does that on `JOBVISOR_DATABASE_URL` (the same
default as `jobvisor run`), which is what `make run` does before it starts
the service.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from typing import Any

from .config import load_or_exit
from .handler import JobContext
from .log import get_logger
from .queue.api import Queue, connect
from .queue.model import RetryPolicy
from .worker.registry import Registry

registry = Registry()
log = get_logger("example")


@registry.handler("noop")
async def noop(job: JobContext) -> None:
    """Does nothing: the cost of the queue itself."""


@registry.handler("send_email", timeout=10, max_attempts=5)
async def send_email(job: JobContext) -> None:
    """Pretends to talk to a mail server for a few milliseconds."""
    await asyncio.sleep(0.02)
    log.info("example.email_sent", job_id=str(job.id))


@registry.handler("resize_image", timeout=10, max_attempts=5, retry=RetryPolicy(base=0.5, cap=5.0))
async def resize_image(job: JobContext) -> None:
    """Fails its first `fail_times` attempts (default 2), then succeeds."""
    fail_times = int(job.payload.get("fail_times", 2)) if isinstance(job.payload, dict) else 2
    if job.attempt <= fail_times:
        raise RuntimeError(f"image service unavailable (simulated, attempt {job.attempt})")
    await asyncio.sleep(0.01)


@registry.handler("build_report", timeout=60, hard_timeout=120, max_attempts=3)
def build_report(job: JobContext) -> None:
    """Blocking work (`seconds`, default 1) in the worker's thread pool."""
    seconds = float(job.payload.get("seconds", 1.0)) if isinstance(job.payload, dict) else 1.0
    time.sleep(seconds)


def seed(queue: Queue, *, emails: int = 20, images: int = 5, reports: int = 3) -> list[uuid.UUID]:
    """Enqueue a demo batch (one transaction); returns the job ids."""
    jobs: list[dict[str, Any]] = []
    jobs += [registry.job("send_email", {"to": f"user{i}@example.org"}) for i in range(emails)]
    jobs += [registry.job("resize_image", {"image": i, "fail_times": i % 3}) for i in range(images)]
    jobs += [
        registry.job("build_report", {"seconds": 0.5 + i}, queue="reports") for i in range(reports)
    ]
    return queue.enqueue_many(jobs)


def main() -> int:
    """Seed the demo batch into the configured database (migrating it first)."""
    config = load_or_exit("jobvisor.example")
    with connect(config.database_url, **config.connection()) as queue:
        queue.migrate()
        ids = seed(queue)
    print(f"jobvisor.example: enqueued {len(ids)} demo jobs", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
