"""procrastinate: psycopg connector, bulk enqueue with `batch_defer_async`,
workers are `procrastinate worker` processes with --concurrency (LISTEN/NOTIFY on,
the default)."""

from __future__ import annotations

import asyncio
import os
import sys
from importlib import metadata

import common

REMAINING = "SELECT count(*) FROM procrastinate_jobs WHERE status <> 'succeeded'"
BIN = os.path.join(os.path.dirname(sys.executable), "procrastinate")


def workers(args: object, env: dict[str, str]) -> common.Workers:
    a = args
    cmd = [BIN, "--app=procrastinate_app.app", "--log-level=warning", "worker",
           f"--concurrency={a.concurrency}"]  # type: ignore[attr-defined]  # fmt: skip
    return common.Workers([cmd] * a.workers, env={"PEER_DSN": a.dsn, **env},  # type: ignore[attr-defined]
                          log_dir=a.log_dir, name="procrastinate")  # type: ignore[attr-defined]  # fmt: skip


def main() -> None:
    args = common.parse_args()
    if args.workload == "version":
        common.emit({"version": metadata.version("procrastinate"), "concurrency": args.concurrency})
        return
    os.environ["PEER_DSN"] = args.dsn
    import procrastinate_app  # noqa: PLC0415 (reads PEER_DSN at import)

    loop = asyncio.new_event_loop()
    app = procrastinate_app.app
    loop.run_until_complete(app.open_async())
    loop.run_until_complete(app.schema_manager.apply_schema_async())
    task = procrastinate_app.noop

    def enqueue(ns: list[int]) -> None:
        if len(ns) == 1:
            loop.run_until_complete(task.defer_async(n=ns[0]))
        else:
            loop.run_until_complete(task.batch_defer_async(*({"n": n} for n in ns)))

    ns = list(range(args.jobs))
    common.run_workload(args, name="procrastinate", enqueue_all=lambda: enqueue(ns),
                        enqueue_one=lambda n: enqueue([n]), workers=workers,
                        remaining_sql=REMAINING)  # fmt: skip
    loop.run_until_complete(app.close_async())


if __name__ == "__main__":
    main()
