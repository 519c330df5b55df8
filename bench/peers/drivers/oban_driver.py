"""oban (PyPI's Python Oban): bulk enqueue with `Oban.enqueue_many`, workers
are `oban start --queues default:<concurrency>` processes."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from importlib import metadata

import common

REMAINING = "SELECT count(*) FROM oban_jobs WHERE state <> 'completed'"
BIN = os.path.join(os.path.dirname(sys.executable), "oban")


def workers(args: object, env: dict[str, str]) -> common.Workers:
    a = args
    cmd = [BIN, "start", "--dsn", a.dsn, "--queues", f"default:{a.concurrency}",  # type: ignore[attr-defined]
           "--log-level", "warning"]  # fmt: skip
    return common.Workers([cmd] * a.workers, env=env,  # type: ignore[attr-defined]
                          log_dir=a.log_dir, name="oban")  # type: ignore[attr-defined]  # fmt: skip


def main() -> None:
    args = common.parse_args()
    if args.workload == "version":
        common.emit({"version": metadata.version("oban"), "concurrency": args.concurrency})
        return
    subprocess.run([BIN, "install", "--dsn", args.dsn], check=True, capture_output=True)
    from oban import Oban  # noqa: PLC0415 (after the schema is installed)
    from oban_app import Noop  # noqa: PLC0415
    from psycopg_pool import AsyncConnectionPool  # noqa: PLC0415

    loop = asyncio.new_event_loop()

    async def open_client() -> tuple[AsyncConnectionPool, Oban]:
        pool = AsyncConnectionPool(args.dsn, min_size=1, max_size=2, open=False)
        await pool.open()
        return pool, Oban(pool=pool)

    pool, oban = loop.run_until_complete(open_client())

    def enqueue(ns: list[int]) -> None:
        if len(ns) == 1:
            loop.run_until_complete(oban.enqueue(Noop.new({"n": ns[0]})))
        else:
            loop.run_until_complete(oban.enqueue_many([Noop.new({"n": n}) for n in ns]))

    ns = list(range(args.jobs))
    common.run_workload(args, name="oban", enqueue_all=lambda: enqueue(ns),
                        enqueue_one=lambda n: enqueue([n]), workers=workers,
                        remaining_sql=REMAINING)  # fmt: skip
    loop.run_until_complete(pool.close())


if __name__ == "__main__":
    main()
