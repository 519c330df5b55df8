"""graphile-worker (npm): node worker processes (`run()` with concurrency and
pollInterval, LISTEN/NOTIFY on), jobs added through its SQL API
(`graphile_worker.add_job`, and `add_jobs` with one array for the bulk).

Runs with any Python that has psycopg (the harness uses the project's);
node_modules come from $GRAPHILE_WORKER_DIR."""

from __future__ import annotations

import json
import os
import subprocess

import common
import psycopg

POLL_INTERVAL_MS = 2000
REMAINING = "SELECT count(*) FROM graphile_worker.jobs"
ADD_JOB = "SELECT graphile_worker.add_job('noop', json_build_object('n', %s::int))"
ADD_JOBS = (
    "SELECT graphile_worker.add_jobs(ARRAY(SELECT ROW('noop', p::json, NULL, NULL, NULL, NULL,"
    " NULL, NULL)::graphile_worker.job_spec FROM unnest(%s::text[]) AS p))"
)


def node_dir() -> str:
    d = os.environ.get("GRAPHILE_WORKER_DIR", "")
    if not os.path.isdir(os.path.join(d, "node_modules", "graphile-worker")):
        common.fail(f"graphile-worker is not installed under GRAPHILE_WORKER_DIR={d!r}")
    return d


def workers(args: object, env: dict[str, str]) -> common.Workers:
    a = args
    cmd = ["node", os.path.join(common.HERE, "graphile_worker.js"), a.dsn,  # type: ignore[attr-defined]
           str(a.concurrency), str(POLL_INTERVAL_MS)]  # type: ignore[attr-defined]  # fmt: skip
    env = {"NODE_PATH": os.path.join(node_dir(), "node_modules"), **env}
    return common.Workers([cmd] * a.workers, env=env,  # type: ignore[attr-defined]
                          log_dir=a.log_dir, name="graphile")  # type: ignore[attr-defined]  # fmt: skip


def main() -> None:
    args = common.parse_args()
    d = node_dir()
    if args.workload == "version":
        with open(os.path.join(d, "node_modules", "graphile-worker", "package.json")) as f:
            version = json.load(f)["version"]
        common.emit({"version": version, "concurrency": args.concurrency,
                     "poll_interval_ms": POLL_INTERVAL_MS})  # fmt: skip
        return
    subprocess.run(
        [os.path.join(d, "node_modules", ".bin", "graphile-worker"), "-c", args.dsn,
         "--schema-only"], check=True, capture_output=True,
    )  # fmt: skip
    conn = psycopg.connect(args.dsn, autocommit=True)
    payloads = [json.dumps({"n": n}) for n in range(args.jobs)]
    common.run_workload(
        args, name="graphile", enqueue_all=lambda: conn.execute(ADD_JOBS, [payloads]),
        enqueue_one=lambda n: conn.execute(ADD_JOB, [n]), workers=workers,
        remaining_sql=REMAINING,
    )  # fmt: skip
    conn.close()


if __name__ == "__main__":
    main()
