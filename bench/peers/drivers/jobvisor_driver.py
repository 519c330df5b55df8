"""jobvisor: bulk enqueue with `enqueue_many` (COPY); burn-down and latency
through the real service, `jobvisor run` with JOBVISOR_WORKERS worker
processes running `jobvisor_app:registry`.

Runs with the project's own interpreter (.venv). If the service cannot run
here yet, it reports {"unavailable": ...} and the harness carries on."""

from __future__ import annotations

import os
import shutil
import sys
import time

import common

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(common.HERE)))
REMAINING = "SELECT count(*) FROM jobvisor_jobs WHERE status <> 'completed'"


def jobvisor_bin() -> str:
    local = os.path.join(os.path.dirname(sys.executable), "jobvisor")
    found = local if os.path.exists(local) else shutil.which("jobvisor")
    if not found:
        common.fail("no jobvisor executable next to this interpreter or on PATH")
    return str(found)


def service(args: object, dsn: str, extra_env: dict[str, str]) -> common.Workers:
    a = args  # argparse.Namespace
    env = {
        "JOBVISOR_DATABASE_URL": dsn,
        "JOBVISOR_APP": "jobvisor_app:registry",
        "JOBVISOR_WORKERS": str(a.workers),  # type: ignore[attr-defined]
        "JOBVISOR_HTTP_ADDR": "",
        "JOBVISOR_LOG_LEVEL": "warning",
        **extra_env,
    }
    # --concurrency 0: the service's own default (JOBVISOR_CONCURRENCY unset).
    if a.concurrency:  # type: ignore[attr-defined]
        env["JOBVISOR_CONCURRENCY"] = str(a.concurrency)  # type: ignore[attr-defined]
    return common.Workers([[jobvisor_bin(), "run"]], env=env,
                          log_dir=a.log_dir, name="jobvisor")  # type: ignore[attr-defined]  # fmt: skip


def main() -> None:
    args = common.parse_args()
    try:
        import jobvisor  # noqa: PLC0415 (reported as unavailable when missing)
    except ImportError as exc:
        common.fail(f"jobvisor is not importable: {exc}")
    if args.workload == "version":
        common.emit({"version": jobvisor.__version__})
        return
    q = jobvisor.connect(args.dsn)
    q.migrate()
    batch = [{"job_type": "noop", "payload": {"n": i}} for i in range(args.jobs)]
    if args.workload == "bulk":
        seconds = common.timed(lambda: q.enqueue_many(batch))
        common.emit(common.bulk_result(args.jobs, seconds))
    elif args.workload == "burndown":
        q.enqueue_many(batch)
        try:
            with service(args, args.dsn, {}) as workers:
                common.emit(common.burn_down(args.dsn, REMAINING, args.jobs, workers,
                                             timeout=args.timeout))  # fmt: skip
        except RuntimeError as exc:
            common.fail(f"jobvisor run: {exc}")
    else:
        path = os.path.join(args.log_dir, "jobvisor-latency.txt")
        try:
            with service(args, args.dsn, {common.LATENCY_ENV: path}) as workers:
                time.sleep(0.5)
                result = common.latency(
                    lambda n: q.enqueue("noop", {"n": n}), workers, path, args.samples
                )
            common.emit(result)
        except RuntimeError as exc:
            common.fail(f"jobvisor run: {exc}")
    q.close()


if __name__ == "__main__":
    main()
