"""Backlog: the service's claim + complete rate and a probe job's pickup on a
table of 10 million pending jobs, against the same on a 50,000-job table.

    .venv/bin/python bench/backlog.py [--backlog 10000000] [--small 50000]
        [--small-runs 3] [--window 90] [--warmup 10] [--no-drain]
        [--probes 200] [--vacuum auto|server|bench|none] [--lock /tmp/jv-bench.lock]
        [--max-drain 1200] [--publish] [--keep] [--reuse]
        [--pg-url postgresql://postgres@127.0.0.1:5432/postgres]

Every run goes through `jobvisor run` at its default settings (2 workers,
the default concurrency and pool), but for the app (`bench/backlog_app.py`),
no HTTP listener and warning-level logs. Handlers report over a Unix
datagram socket, so counting costs the database nothing.

The backlog database is filled first (2. below), then the timed parts run.

1. **Small table**, `--small-runs` times, each in a new database
   `jobvisor_bench_backlog_small`: the service starts on an empty queue and
   runs a few warm-up jobs; then `--probes` probe jobs, one at a time on the
   idle service (the idle pickup figure); then one `enqueue_many` of
   `--small` no-op jobs. Its rate is the jobs over the time from that
   commit to the last job's start.
2. **Backlog**, in the database `jobvisor_bench_backlog`: `--backlog` no-op
   jobs written by `enqueue_many` in calls of `--fill-chunk` (the same rows
   any application's `enqueue_many` writes), then `VACUUM (ANALYZE)`, as
   autovacuum does after a bulk insert; the claim's own search on the full
   table under `EXPLAIN (ANALYZE, BUFFERS)` is printed. The service starts;
   after `--warmup` seconds the rate is measured over `--window` seconds,
   while probe jobs are enqueued one at a time (each after the previous one
   started, with a random pause of 20 to 80 ms). A probe has priority 10
   (the backlog 0), so it is next in the claim order: its pickup is the time
   from just before the `enqueue` call to its handler's first line, also
   given in two parts: the `enqueue` call itself (its commit) and the time
   from its return to the handler's first line (the service's part). Unless
   `--no-drain`, the service then runs until the backlog is empty (or for
   `--max-drain` seconds in all), for the chart of rate against backlog;
   only its first `--locked-drain` seconds hold `--lock`.

Vacuum, as in `bench/sustained.py`: `--vacuum server` relies on the server's
autovacuum; on a server with `autovacuum = off` (this machine's), `auto` (the
default) runs sustained.py's stand-in, which applies autovacuum's trigger
rule with the jobs table's thresholds every `autovacuum_naptime`, from the
moment the service starts; `none` runs no vacuum at all.

The backlog is filled first; then `--lock PATH` takes an exclusive `flock`
on PATH around the timed parts (the small runs and the backlog's service
run, back to back), not around the fill, so that other benchmarks taking
the same lock never overlap them.

Rate samples (every `--sample-interval` seconds: the backlog left and the
starts per second) go to bench/results/backlog-<time>.csv, the chart to a
PNG beside it (`bench/backlog_plot.py`, matplotlib as for
`bench/sustained.py`); `--publish` copies it to docs/backlog.png. The
databases are dropped at the end unless `--keep`; `--reuse` takes a filled
backlog database again instead of filling it.
"""

from __future__ import annotations

import argparse
import array
import contextlib
import csv
import fcntl
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

import jobvisor
from burndown import DEFAULT_PG_URL, _with_dbname
from sustained import StandInAutovacuum, plot_python

SMALL_DB = "jobvisor_bench_backlog_small"
BIG_DB = "jobvisor_bench_backlog"
ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
JOB = {"job_type": "backlog"}
PROBE_PRIORITY = 10
WARM_JOBS = 8

SIZES_SQL = (
    "SELECT pg_total_relation_size('jobvisor_jobs'), pg_relation_size('jobvisor_jobs'),"
    " pg_indexes_size('jobvisor_jobs'), pg_relation_size('jobvisor_jobs_claim_idx')"
)

# The claim's search (its WHERE and ORDER BY, without the row locks) as the
# worker runs it: the session settings every jobvisor connection makes.
CLAIM_EXPLAIN_SQL = (
    "EXPLAIN (ANALYZE, BUFFERS)"
    " SELECT id FROM jobvisor_jobs WHERE status IN ('pending', 'retryable')"
    " AND run_at <= now() ORDER BY priority DESC, run_at, id LIMIT 200"
)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


class Sink:
    """Receives the handlers' reports on a Unix datagram socket (a thread):
    batches of starts `(count, first, last)` and probes `(-1, enqueued, started)`."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.count = 0
        self.batches: list[tuple[float, int]] = []  # (last start, count)
        self.probes: list[float] = []  # enqueue call to start, s
        # The same probes split, per phase (`phase`, set by the caller): the
        # enqueue calls themselves (their commits), and from each call's
        # return to the start (the service's own part).
        self.phase = "idle service"
        self.splits: dict[str, tuple[list[float], list[float]]] = {}
        self.probe_started = 0.0
        self.probe_seen = threading.Event()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self._sock.bind(path)
        self._sock.settimeout(0.2)
        self._thread = threading.Thread(target=self._run, name="backlog-sink", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self._sock.recv(64)
            except TimeoutError:
                continue
            count, first, last = array.array("d", data)
            with self._lock:
                if count < 0:
                    self.probes.append(last - first)
                    self.probe_started = last
                    self.probe_seen.set()
                else:
                    self.batches.append((last, int(count)))
                    self.count += int(count)

    def wait_count(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.count < count:
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out: {self.count:,} of {count:,} jobs started")
            time.sleep(0.005)

    def last_start(self) -> float:
        with self._lock:
            return max(t for t, _ in self.batches)

    def started_between(self, a: float, b: float) -> int:
        with self._lock:
            return sum(n for t, n in self.batches if a <= t < b)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._sock.close()


def recreate(pg_url: str, name: str) -> str:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return _with_dbname(pg_url, name)


def drop(pg_url: str, name: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@contextlib.contextmanager
def service(url: str, sink: Sink, log_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`jobvisor run` at its defaults but for the app, HTTP and log level."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBVISOR_")}
    env.update(
        JOBVISOR_DATABASE_URL=url,
        JOBVISOR_APP="backlog_app:registry",
        JOBVISOR_LOG_LEVEL="warning",
        JOBVISOR_LOG_FORMAT="json",
        JOBVISOR_HTTP_ADDR="",
        BACKLOG_SOCKET=sink.path,
        PYTHONPATH=str(ROOT / "bench"),
    )
    cmd = [str(Path(sys.executable).with_name("jobvisor")), "run"]
    with log_path.open("ab") as log:
        proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class BenchLock:
    """An exclusive flock on a file, as flock(1) takes it (none without a path)."""

    def __init__(self, path: str | None) -> None:
        self._file = open(path, "a") if path else None  # noqa: SIM115 (held across calls)
        self.held = False

    def acquire(self) -> None:
        if self._file is None:
            return
        began = time.monotonic()
        fcntl.flock(self._file, fcntl.LOCK_EX)
        self.held = True
        waited = time.monotonic() - began
        if waited > 1:
            print(f"  waited {waited:.0f} s for {self._file.name}", flush=True)

    def release(self) -> None:
        if self._file is not None and self.held:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self.held = False
            print(f"{time.strftime('%H:%M:%S', time.gmtime())} UTC: lock released", flush=True)

    def close(self) -> None:
        self.release()
        if self._file is not None:
            self._file.close()


def vacuum_mode(url: str, wanted: str) -> tuple[str, float]:
    """The vacuum this run uses (`server`, `bench` or `none`) and the naptime."""
    with psycopg.connect(url, autocommit=True) as conn:
        settings = dict(
            conn.execute(
                "SELECT name, setting FROM pg_settings"
                " WHERE name IN ('autovacuum', 'autovacuum_naptime')"
            ).fetchall()
        )
    naptime = float(settings["autovacuum_naptime"])
    if wanted == "auto":
        return ("server" if settings["autovacuum"] == "on" else "bench"), naptime
    return wanted, naptime


def warm_up(queue: jobvisor.Queue, sink: Sink) -> None:
    before = sink.count
    queue.enqueue_many([JOB] * WARM_JOBS)
    sink.wait_count(before + WARM_JOBS, timeout=120)


def probe_once(queue: jobvisor.Queue, sink: Sink) -> None:
    sink.probe_seen.clear()
    called = time.time()
    queue.enqueue("probe", {"t": called}, priority=PROBE_PRIORITY)
    returned = time.time()
    if not sink.probe_seen.wait(60):
        raise SystemExit("a probe job did not start within 60 s")
    calls, after = sink.splits.setdefault(sink.phase, ([], []))
    calls.append(returned - called)
    after.append(sink.probe_started - returned)


class Prober:
    """Probe jobs one at a time until stopped (a thread)."""

    def __init__(self, queue: jobvisor.Queue, sink: Sink) -> None:
        self._queue, self._sink = queue, sink
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="prober", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            probe_once(self._queue, self._sink)
            self._stop.wait(random.uniform(0.02, 0.08))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def small_run(
    args: argparse.Namespace, sink: Sink, log_path: Path
) -> tuple[float, list[float], list[float]]:
    """One burn-down of `--small` jobs: jobs/s, the idle probes' pickups (s)
    and those of the probes enqueued while it drained."""
    url = recreate(args.pg_url, SMALL_DB)
    with jobvisor.connect(url) as queue:
        queue.migrate()
        with service(url, sink, log_path):
            warm_up(queue, sink)
            first_probe = len(sink.probes)
            sink.phase = "idle service"
            for _ in range(args.probes):
                probe_once(queue, sink)
                time.sleep(random.uniform(0.02, 0.08))
            idle = sink.probes[first_probe:]
            before = sink.count
            queue.enqueue_many([JOB] * args.small)
            committed = time.time()
            first_probe = len(sink.probes)
            sink.phase = "small table draining"
            prober = Prober(queue, sink)
            sink.wait_count(before + args.small, timeout=600)
            rate = args.small / (sink.last_start() - committed)
            prober.stop()
            # Only the probes enqueued while the small table still drained.
            draining = sink.probes[first_probe:][:-1]
    return rate, idle, draining


def fill(url: str, args: argparse.Namespace) -> None:
    with jobvisor.connect(url) as queue:
        queue.migrate()
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute("SELECT count(*) FROM jobvisor_jobs").fetchone()
            have = int(row[0]) if row else 0
            if args.reuse and have >= args.backlog:
                print(f"reusing {have:,} pending jobs", flush=True)
                return
            conn.execute("TRUNCATE jobvisor_jobs CASCADE")
            started = time.perf_counter()
            for first in range(0, args.backlog, args.fill_chunk):
                queue.enqueue_many([JOB] * min(args.fill_chunk, args.backlog - first))
                done = min(first + args.fill_chunk, args.backlog)
                if done % 1_000_000 < args.fill_chunk or done == args.backlog:
                    took = time.perf_counter() - started
                    print(f"  {done:>12,} jobs written, {done / took:,.0f} jobs/s", flush=True)
            began = time.perf_counter()
            conn.execute("VACUUM (ANALYZE) jobvisor_jobs")
            print(f"VACUUM (ANALYZE) took {time.perf_counter() - began:.0f} s", flush=True)


def sizes(url: str) -> tuple[int, ...]:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(SIZES_SQL).fetchone()
    assert row is not None
    return tuple(int(v) for v in row)


def explain_claim(url: str) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        # The planner settings every jobvisor session makes (see docs/design.md).
        conn.execute("SET random_page_cost = 1.1")
        conn.execute("SET enable_sort = off")
        rows = conn.execute(CLAIM_EXPLAIN_SQL).fetchall()
    return "\n".join(str(r[0]) for r in rows)


def prepare_big(args: argparse.Namespace) -> str:
    """The backlog database, filled (untimed, outside the lock)."""
    url = _with_dbname(args.pg_url, BIG_DB)
    with psycopg.connect(args.pg_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (BIG_DB,)).fetchone()
    if not (args.reuse and exists):
        url = recreate(args.pg_url, BIG_DB)
    fill(url, args)
    return url


def big_run(
    url: str,
    args: argparse.Namespace,
    sink: Sink,
    log_path: Path,
    csv_path: Path,
    *,
    lock: BenchLock,
) -> dict[str, Any]:
    print("the claim's search on the full table:\n" + explain_claim(url), flush=True)
    before = sizes(url)
    mode, naptime = vacuum_mode(url, args.vacuum)
    out: dict[str, Any] = {"sizes_before": before, "vacuum": mode}
    print(f"vacuum: {mode}" + (f", every {naptime:g} s" if mode == "bench" else ""), flush=True)
    base = sink.count
    stand_in = StandInAutovacuum(url, naptime) if mode == "bench" else None
    with jobvisor.connect(url) as queue, service(url, sink, log_path):
        start = time.time()
        if stand_in is not None:
            stand_in.start(time.monotonic())
        time.sleep(args.warmup)
        first_probe = len(sink.probes)
        sink.phase = "backlog draining"
        prober = Prober(queue, sink)
        t0 = time.time()
        samples: list[tuple[float, int, float]] = []  # (t, backlog left, starts/s)

        def sample_until(end: float, target: int | None) -> None:
            t = samples[-1][0] + start if samples else start
            while True:
                nxt = t + args.sample_interval
                time.sleep(max(0.0, nxt - time.time()))
                # Reports trail the starts by up to the handler's flush delay.
                time.sleep(0.05)
                n = sink.started_between(t, nxt)
                left = args.backlog - sink.started_between(start, nxt)
                samples.append((nxt - start, left, n / (nxt - t)))
                t = nxt
                if t >= end or (target is not None and sink.count - base >= target):
                    return

        sample_until(t0, None)
        sample_until(t0 + args.window, None)
        prober.stop()
        time.sleep(0.05)
        # The claim's search from the head of the index, as the full claim does
        # it, now that the window's jobs left their dead entries there.
        print("the claim's search after the window:\n" + explain_claim(url), flush=True)
        out["window_rate"] = sink.started_between(t0, t0 + args.window) / args.window
        out["probes"] = sink.probes[first_probe:]
        out["started_at_window"] = (
            sink.started_between(start, t0),
            sink.started_between(start, t0 + args.window),
        )
        if not args.no_drain:
            sample_until(min(start + args.locked_drain, start + args.max_drain), args.backlog)
            out["locked_until_s"] = time.time() - start
            lock.release()
            if sink.count - base < args.backlog:
                sample_until(start + args.max_drain, args.backlog)
            if sink.count - base >= args.backlog:
                out["drain_s"] = sink.last_start() - start
        if stand_in is not None:
            stand_in.stop()
            out["vacuums"] = stand_in.log
    out["sizes_after"] = sizes(url)
    with csv_path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["t_s", "backlog", "started_per_s"])
        writer.writerows((f"{t:.1f}", left, f"{rate:.1f}") for t, left, rate in samples)
    return out


def samples_left(csv_path: Path) -> int:
    with csv_path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    return int(rows[-1]["backlog"]) if rows else 0


def mib(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backlog", type=int, default=10_000_000)
    parser.add_argument("--small", type=int, default=50_000)
    parser.add_argument("--small-runs", type=int, default=3)
    parser.add_argument("--window", type=float, default=90.0)
    parser.add_argument("--warmup", type=float, default=10.0)
    parser.add_argument("--sample-interval", type=float, default=5.0)
    parser.add_argument("--probes", type=int, default=200, help="idle probes per small run")
    parser.add_argument("--fill-chunk", type=int, default=200_000)
    parser.add_argument("--no-drain", action="store_true", help="stop after the window")
    parser.add_argument("--publish", action="store_true", help="copy the chart to docs/")
    parser.add_argument("--keep", action="store_true", help="keep the databases")
    parser.add_argument("--reuse", action="store_true", help="reuse a filled backlog database")
    parser.add_argument("--vacuum", choices=["auto", "server", "bench", "none"], default="auto")
    parser.add_argument("--lock", help="flock this file around the timed parts")
    parser.add_argument(
        "--max-drain",
        type=float,
        default=1200.0,
        help="seconds the backlog's service run may last in all",
    )
    parser.add_argument("--locked-drain", type=float, default=float("inf"),
                        help="seconds of the backlog's service run under --lock; the"
                        " rest of the drain (for the chart) runs without it")  # fmt: skip
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    args = parser.parse_args()
    for name in ("backlog", "small", "small_runs", "fill_chunk"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} {getattr(args, name)}: expected >= 1")
    if args.window <= 0 or args.sample_interval <= 0 or args.warmup < 0:
        parser.error("--window and --sample-interval must be > 0, --warmup >= 0")

    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    csv_path = RESULTS / f"backlog-{stamp}.csv"
    log_path = RESULTS / f"backlog-{stamp}.log"
    png_path = RESULTS / f"backlog-{stamp}.png"
    print(
        f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC,"
        f" load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    tmp = tempfile.mkdtemp(prefix="jobvisor-backlog-")
    sink = Sink(os.path.join(tmp, "sink"))
    try:
        big_url = prepare_big(args)
        small_rates, idle, small_busy = [], [], []
        lock = BenchLock(args.lock)
        lock.acquire()  # the timed parts, back to back
        try:
            print(
                f"{time.strftime('%H:%M:%S', time.gmtime())} UTC: timed parts begin,"
                f" load average {os.getloadavg()[0]:.1f}",
                flush=True,
            )
            for run in range(args.small_runs):
                rate, probes, draining = small_run(args, sink, log_path)
                small_rates.append(rate)
                idle += probes
                small_busy += draining
                print(
                    f"small table, run {run + 1}: {args.small:,} jobs at {rate:,.0f} jobs/s,"
                    f" idle probe p50 {statistics.median(probes) * 1000:.2f} ms",
                    flush=True,
                )
            if not args.keep:
                drop(args.pg_url, SMALL_DB)
            big = big_run(big_url, args, sink, log_path, csv_path, lock=lock)
        finally:
            lock.close()
        print(
            f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC,"
            f" load average {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    finally:
        sink.close()
        shutil.rmtree(tmp, ignore_errors=True)
        if not args.keep:
            for name in (SMALL_DB, BIG_DB):
                with contextlib.suppress(psycopg.Error):
                    drop(args.pg_url, name)

    small = statistics.median(small_rates)
    busy, idle_p50 = big["probes"], statistics.median(idle)
    busy_p50 = statistics.median(busy)
    a, b = big["started_at_window"]
    print()
    print(
        f"small table ({args.small:,} jobs), median of {args.small_runs}: {small:,.0f} jobs/s"
        f" (runs: {', '.join(f'{r:,.0f}' for r in small_rates)})"
    )
    print(
        f"backlog of {args.backlog:,}, {args.window:g} s window ({a:,} to {b:,} started):"
        f" {big['window_rate']:,.0f} jobs/s = {big['window_rate'] / small:.2f} of the small table"
    )
    print(
        f"probe pickup, idle service ({len(idle)}): p50 {idle_p50 * 1000:.2f} ms,"
        f" p99 {percentile(idle, 99) * 1000:.2f} ms"
    )
    if small_busy:
        print(
            f"probe pickup, small table draining ({len(small_busy)}):"
            f" p50 {statistics.median(small_busy) * 1000:.2f} ms,"
            f" p99 {percentile(small_busy, 99) * 1000:.2f} ms"
        )
    print(
        f"probe pickup, backlog draining ({len(busy)}): p50 {busy_p50 * 1000:.2f} ms,"
        f" p99 {percentile(busy, 99) * 1000:.2f} ms = {busy_p50 / idle_p50:.2f} of idle"
        + (
            f", {busy_p50 / statistics.median(small_busy):.2f} of the small table's"
            if small_busy
            else ""
        )
    )
    for phase, (calls, after) in sink.splits.items():
        print(
            f"  {phase}: the enqueue call p50 {statistics.median(calls) * 1000:.2f} ms,"
            f" from its return to the start p50 {statistics.median(after) * 1000:.2f} ms,"
            f" p99 {percentile(after, 99) * 1000:.2f} ms"
        )
    left = samples_left(csv_path)
    if "drain_s" not in big:
        print(f"stopped after --max-drain {args.max_drain:g} s with {left:,} jobs left")
    if "drain_s" in big:
        print(
            f"whole backlog started in {big['drain_s']:,.0f} s:"
            f" {args.backlog / big['drain_s']:,.0f} jobs/s"
        )
    labels = ("total", "heap", "indexes", "claim index")
    for line in big.get("vacuums", []):
        print(f"vacuum: {line}")
    for when in ("before", "after"):
        shown = ", ".join(
            f"{k} {mib(v)}" for k, v in zip(labels, big[f"sizes_{when}"], strict=True)
        )
        print(f"sizes {when}: {shown}")
    title = (
        f"jobvisor: {args.backlog:,} pending jobs drained by `jobvisor run` (defaults);"
        f" small table {small:,.0f} jobs/s"
    )
    subprocess.run(
        [
            plot_python(),
            str(ROOT / "bench" / "backlog_plot.py"),
            str(csv_path),
            str(png_path),
            "--small",
            f"{small:.1f}",
            "--title",
            title,
        ],
        check=True,
    )
    print(f"csv: {csv_path}\nchart: {png_path}")
    if args.publish:
        shutil.copy(png_path, ROOT / "docs" / "backlog.png")


if __name__ == "__main__":
    main()
