"""pgqueuer: asyncpg driver, bulk enqueue with `Queries.enqueue` over lists,
workers are `pgq run` processes with --batch-size (see BATCH_SIZE)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from importlib import metadata

import asyncpg
import common
from pgqueuer.db import AsyncpgDriver
from pgqueuer.queries import Queries

BATCH_SIZE = 100
REMAINING = "SELECT count(*) FROM pgqueuer"
# `pgq` beside the interpreter (a virtualenv), else on PATH (wheels installed
# with --target).
BIN = os.path.join(os.path.dirname(sys.executable), "pgq")
if not os.path.exists(BIN):
    BIN = shutil.which("pgq") or BIN


def workers(args: object, env: dict[str, str]) -> common.Workers:
    a = args
    cmd = [sys.executable, "pgqueuer_app.py", str(BATCH_SIZE)]  # = pgq run --batch-size
    return common.Workers([cmd] * a.workers, env={"PEER_DSN": a.dsn, **env},  # type: ignore[attr-defined]
                          log_dir=a.log_dir, name="pgqueuer")  # type: ignore[attr-defined]  # fmt: skip


async def enqueue(queries: Queries, ns: list[int]) -> None:
    await queries.enqueue(["noop"] * len(ns), [str(n).encode() for n in ns], [0] * len(ns))


def main() -> None:
    args = common.parse_args()
    if args.workload == "version":
        common.emit({"version": metadata.version("pgqueuer"), "batch_size": BATCH_SIZE})
        return
    subprocess.run([BIN, "--pg-dsn", args.dsn, "install"], check=True, capture_output=True)
    loop = asyncio.new_event_loop()
    conn = loop.run_until_complete(asyncpg.connect(args.dsn))
    queries = Queries(AsyncpgDriver(conn))
    ns = list(range(args.jobs))
    common.run_workload(
        args, name="pgqueuer",
        enqueue_all=lambda: loop.run_until_complete(enqueue(queries, ns)),
        enqueue_one=lambda n: loop.run_until_complete(enqueue(queries, [n])),
        workers=workers, remaining_sql=REMAINING,
    )  # fmt: skip
    loop.run_until_complete(conn.close())


if __name__ == "__main__":
    main()
