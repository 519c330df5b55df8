"""pgqueuer's worker factory (`pgq run pgqueuer_app:main`, or run this file):
one no-op entrypoint."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from common import record_start
from pgqueuer import PgQueuer
from pgqueuer.db import AsyncpgDriver
from pgqueuer.models import Job


@asynccontextmanager
async def main() -> AsyncIterator[PgQueuer]:
    connection = await asyncpg.connect(os.environ["PEER_DSN"])
    pgq = PgQueuer(AsyncpgDriver(connection))

    @pgq.entrypoint("noop")
    async def noop(job: Job) -> None:
        record_start(int(job.payload or b"0"))

    try:
        yield pgq
    finally:
        await connection.close()


if __name__ == "__main__":
    # What `pgq run pgqueuer_app:main --batch-size N` does; pgqueuer 1.6.0's CLI
    # fails on its own default --log-level, so the supervisor is called directly.
    import asyncio
    import sys
    from datetime import timedelta

    from pgqueuer.adapters.cli import supervisor
    from pgqueuer.types import QueueExecutionMode

    # Continuous mode (a worker keeps dequeuing batches as it finishes them,
    # never draining and exiting) is pgqueuer's mode for a service, and its
    # fastest; named here so that a change of its default does not change
    # what this harness measures.
    asyncio.run(
        supervisor.run(
            main,
            batch_size=int(sys.argv[1]),
            dequeue_timeout=timedelta(seconds=30),
            mode=QueueExecutionMode.continuous,
        )
    )
