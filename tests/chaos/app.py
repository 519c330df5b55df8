"""The handler the chaos scenarios run (`JOBVISOR_APP=tests.chaos.app:registry`).

Every run of a `chaos` job first writes one row to the LEDGER, `chaos_ledger`,
through a connection of the worker process's own (not the queue's), and only
then does its work (sleeps `seconds`, and waits for the file `gate` to exist
when the payload names one). So the ledger holds one row per handler run that
got started: a job that ran twice has two rows, each with the claim token,
worker id and attempt of its own run, and the time the handler began (taken
in the worker process, before the write: a write that waits out a server
restart still dates its run from before the crash).

A ledger write is retried while the database is away (terminated sessions, a
server restart) for up to `LEDGER_PATIENCE` seconds; a run records itself at
most once even when a retry follows a write whose commit did succeed, because
each run has its own `run_id` and the insert skips an existing one.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import random
import uuid
from typing import Any, Final

import psycopg

from jobvisor.worker import JobContext, Registry

LEDGER_PATIENCE: Final = 90.0  # the ledger write gives up (the run fails) after this
GATE_PATIENCE: Final = 120.0  # a gate never opened fails the run after this

LEDGER_DDL: Final = (
    "CREATE TABLE IF NOT EXISTS chaos_ledger ("
    " run_id uuid PRIMARY KEY,"
    " job_id uuid NOT NULL,"
    " claim_token uuid NOT NULL,"
    " worker_id text NOT NULL,"
    " attempt int NOT NULL,"
    " pid int NOT NULL,"
    " at timestamptz NOT NULL)"
)
LEDGER_INSERT: Final = (
    "INSERT INTO chaos_ledger (run_id, job_id, claim_token, worker_id, attempt, pid, at)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (run_id) DO NOTHING"
)

registry = Registry()


class _Ledger:
    """This process's one ledger connection, reopened after an error."""

    def __init__(self) -> None:
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._lock: asyncio.Lock | None = None

    async def record(self, job: JobContext) -> None:
        began = dt.datetime.now(dt.UTC)
        if self._lock is None:
            self._lock = asyncio.Lock()
        row = (
            uuid.uuid4(), job.id, job.job.claim_token, job.worker_id, job.attempt, os.getpid(),
            began,
        )  # fmt: skip
        loop = asyncio.get_running_loop()
        give_up_at = loop.time() + LEDGER_PATIENCE
        delay = 0.05
        async with self._lock:
            while True:
                try:
                    async with asyncio.timeout(15):
                        if self._conn is None or self._conn.closed:
                            self._conn = await psycopg.AsyncConnection.connect(
                                os.environ["JOBVISOR_DATABASE_URL"],
                                autocommit=True,
                                connect_timeout=5,
                                application_name="chaos-ledger",
                            )
                        await self._conn.execute(LEDGER_INSERT, row)
                    return
                except (psycopg.OperationalError, psycopg.InterfaceError, TimeoutError):
                    if self._conn is not None:
                        await self._conn.close()
                        self._conn = None
                    if loop.time() + delay > give_up_at:
                        raise
                    await asyncio.sleep(delay * random.uniform(0.5, 1.0))
                    delay = min(delay * 2, 1.0)


_ledger = _Ledger()


@registry.handler("chaos")
async def chaos(job: JobContext) -> None:
    """Record the run in the ledger, then work: `seconds` of sleep, and the
    file `gate` (if named; with `gate_per_attempt`, `<gate>.<attempt>`) must
    exist before the run ends."""
    payload: dict[str, Any] = job.payload if isinstance(job.payload, dict) else {}
    await _ledger.record(job)
    gate = payload.get("gate")
    if gate is not None and payload.get("gate_per_attempt"):
        gate = f"{gate}.{job.attempt}"
    if gate is not None:
        loop = asyncio.get_running_loop()
        give_up_at = loop.time() + GATE_PATIENCE
        while not os.path.exists(str(gate)):  # noqa: ASYNC240 - one stat, too quick to matter
            if loop.time() > give_up_at:
                raise TimeoutError(f"the gate {gate} was never opened")
            await asyncio.sleep(0.05)
    await asyncio.sleep(float(payload.get("seconds", 0.02)))
