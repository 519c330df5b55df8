"""Workflows under `jobvisor run`: burn-downs against plain jobs, and the
hand-over's latency from a last parent's completion to its child's start.

    .venv/bin/python bench/workflows.py [--engine postgres|sqlite|both]
        [--width 10000] [--flows 1000] [--handovers 200] [--runs 3] [--workers 2]
        [--concurrency 200] [--pg-url postgresql://postgres@127.0.0.1:5432/postgres]

Three measurements per engine, each on a fresh database and one `jobvisor
run` with `--workers` workers (`bench/workflows_app.py`'s `async def`
handlers):

- **fan**: one workflow, a root, `--width` children of it, one child of them
  all; against `--width + 2` plain jobs in one `enqueue_many`.
- **flows**: `--flows` workflows of 10 jobs each (a root, 8 children, one
  child of the 8); against as many plain jobs.

  For both, the queue is paused while the jobs go in, and the clock runs from
  `resume` until no job is pending, waiting or running. Jobs per second is
  the job count over that time; the ratio is workflow over plain. Each is
  burnt down `--runs` times, plain and workflow in turn (a burn-down of a
  second or less varies from one run to the next on a busy machine): the
  medians are printed.
- **hand-over** (first, on the fresh database): `--handovers` workflows of
  three parents and one child, one after the other on an idle service; each
  child's handler notes the time it started, held against the latest
  `finished_at` of its parents (the database's clock at their completion;
  the same machine's clock). p50 and p99 of those gaps.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

import jobvisor
from burndown import DEFAULT_PG_URL, fresh_database  # bench/, this script's directory
from harness import burn, drained, p99, rate, start_service, stop_service
from jobvisor import JobStatus


def _fan(width: int) -> jobvisor.Workflow:
    wf = jobvisor.Workflow("fan")
    root = wf.add("noop")
    leaves = [wf.add("noop", after=[root]) for _ in range(width)]
    wf.after(*leaves).add("noop")
    return wf


def _flow(parents: int, child: str = "noop") -> jobvisor.Workflow:
    wf = jobvisor.Workflow("flow")
    root = wf.add("noop")
    middle = [wf.add("noop", after=[root]) for _ in range(parents)]
    wf.after(*middle).add(child)
    return wf


def _handovers(queue: jobvisor.Queue, count: int) -> list[float]:
    """Milliseconds from each child's last parent's completion to its start."""
    gaps = []
    for _ in range(count):
        wf = jobvisor.Workflow("hand-over")
        parents = [wf.add("noop") for _ in range(3)]
        wf.after(*parents).add("stamp")
        wid = queue.enqueue_workflow(wf)
        deadline = time.monotonic() + 60
        while not (status := queue.workflow(wid)).finished:
            if time.monotonic() > deadline:
                raise SystemExit(f"workflow {wid} did not finish")
            time.sleep(0.005)
        *done, child = status.jobs
        assert child.status is JobStatus.COMPLETED, status
        last = max(job.finished_at.timestamp() for job in done if job.finished_at)
        gaps.append((float(child.result) - last) * 1000)
    return gaps


def _compare(queue: jobvisor.Queue, what: str, n: int, load: Any, runs: int) -> None:
    """Burn `n` plain jobs and the workflows `load` puts in, in turn, `runs`
    times each; print the median times and their ratio."""
    plain, flows = [], []
    for _ in range(runs):
        plain.append(burn(queue, lambda: queue.enqueue_many([{"job_type": "noop"}] * n)))
        flows.append(burn(queue, load))
    p, f = statistics.median(plain), statistics.median(flows)
    print(f"{queue.engine} {what}: {rate(n, f)}; plain {rate(n, p)}; ratio {p / f:.2f}"
          f" (medians of {runs})", flush=True)  # fmt: skip


def one_engine(engine: str, args: argparse.Namespace) -> None:
    with fresh_database(engine, args.pg_url) as url:
        queue = jobvisor.connect(url)
        queue.migrate()
        proc = start_service(
            url, "workflows_app:registry", workers=args.workers, concurrency=args.concurrency
        )
        try:
            queue.enqueue_many([{"job_type": "noop"} for _ in range(args.workers * 4)])
            drained(url)  # warm: every worker connected and idle
            # First, on the fresh table (as bench/latency.py): after the
            # burn-downs every claim would also read past the index entries
            # of the jobs they took until a vacuum removes them.
            gaps = sorted(_handovers(queue, args.handovers))
            print(f"{engine} hand-over, last parent completed to child started, "
                  f"{len(gaps)} samples: p50 {statistics.median(gaps):.2f} ms, "
                  f"p99 {p99(gaps):.2f} ms", flush=True)  # fmt: skip
            fan = f"fan 1 -> {args.width:,} -> 1"
            _compare(queue, fan, args.width + 2,
                     lambda: queue.enqueue_workflow(_fan(args.width)), args.runs)  # fmt: skip

            def flows() -> None:
                for _ in range(args.flows):
                    queue.enqueue_workflow(_flow(8))

            _compare(queue, f"{args.flows:,} workflows of 10", args.flows * 10, flows, args.runs)
        finally:
            stop_service(proc)
            queue.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=["postgres", "sqlite", "both"], default="both")
    parser.add_argument("--width", type=int, default=10_000)
    parser.add_argument("--flows", type=int, default=1_000)
    parser.add_argument("--handovers", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} at the start")
    for engine in ["postgres", "sqlite"] if args.engine == "both" else [args.engine]:
        one_engine(engine, args)
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} at the end")


if __name__ == "__main__":
    main()
