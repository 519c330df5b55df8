"""Sustained load: hold 80% of the measured capacity while a long transaction
holds back vacuum, and watch the jobs table's size, dead tuples and latency.

    .venv/bin/python bench/sustained.py [--duration 600] [--load 0.8]
        [--hold-from 0.3] [--hold-until 0.6] [--sample-interval 5]
        [--retention 60] [--cleanup-interval 10] [--vacuum auto|server|bench|none]
        [--publish] [--pg-url postgresql://postgres@127.0.0.1:5432/postgres]
        [--cluster [--cluster-naptime 10]]

1. Capacity. `jobvisor run` (2 workers, concurrency 200, the no-op app
   `bench/sustained_app.py`) starts on an empty queue in the database
   `jobvisor_sustained` (dropped and created). `enqueue_many` writes 20,000
   jobs in one transaction; capacity is 20,000 divided by the time from that
   commit until the last of them started.
2. Sustained load. Paced enqueuers (`--enqueuers` threads, their ticks
   staggered) call `enqueue_many` every `--tick` seconds with as many jobs as
   keep the total at `--load` x capacity, for `--duration` seconds, while
   the same supervisor consumes them and deletes completed jobs `--retention`
   seconds after they finished.
3. The open transaction. From `--hold-from` to `--hold-until` (fractions of
   the duration) a separate session of the same database sits idle in
   `BEGIN; SELECT txid_current();`. Its transaction id holds back the xmin
   horizon: no row version deleted or updated after it began may be removed
   by vacuum, in any table of that database, until it ends. (A long
   transaction in another database of the server does the same to a busy
   database, through the xmin of every snapshot taken there; the CSV
   records the oldest one, and the summary warns when it taints a phase.)

Every `--sample-interval` seconds a row goes to the CSV: the jobs table's
size (`pg_total_relation_size`, the heap alone, the claim index),
`n_live_tup` and `n_dead_tup`, how many vacuums it has had, the pending jobs
and the age of the oldest, the enqueue and completion rates in the interval,
the claim latency's p50/p99/max over the jobs that started in it, and the
claim's head search (its WHERE and ORDER BY under EXPLAIN ANALYZE: server
time and pages touched, whatever the backlog). Claim latency is
`started_at - created_at` on the database clock (enqueue transaction to
claim), reported by the handler itself (see `bench/sustained_app.py`).

Vacuum: `--vacuum server` relies on the server's autovacuum. A server with
`autovacuum = off` (some CI images set it) never vacuums the jobs table, so
`--vacuum auto` (the default) then uses `bench`: a stand-in in this process
that, every `autovacuum_naptime`, applies autovacuum's own trigger rule with
the jobs table's thresholds (its reloptions, as the migrations set them) and
runs `VACUUM`/`ANALYZE` when the rule says so. `--vacuum none` shows what
happens with no vacuum at all. The CSV, the plot and the summary say which.

`--cluster` runs the whole benchmark on a throwaway cluster it starts itself
(`bench/pgcluster.py`: initdb in a temp dir, a free port, the stock settings
but `autovacuum = on` and `autovacuum_naptime = --cluster-naptime`, 10 s by
default), removed at the end: autovacuum as production runs it, whatever the
shared server's settings, and no other session of that server can hold the
horizon back during the run.

The head search probes the full claim (`JOB_CLAIM`, from the head of the
index); a bounded claim starts past the jobs its queue claimed last
(`ops.ClaimBounds`) and reads only what others took since.

Results go to bench/results/sustained-<time>.{csv,png,log,txt}; `--publish`
copies the PNG to docs/sustained.png. The plot is drawn by
`bench/sustained_plot.py` with matplotlib, from the current interpreter if it
has it, else from a venv created under bench/results/ from
bench/requirements-bench.txt.
"""

from __future__ import annotations

import argparse
import array
import contextlib
import csv
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

import jobvisor
from burndown import DEFAULT_PG_URL, _with_dbname
from pgcluster import throwaway_cluster

BENCH_DB = "jobvisor_sustained"
ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
PLOT_VENV = RESULTS / ".venv-plot"
JOB = {"job_type": "sustained"}
WARM_JOBS = 8
# The throwaway cluster's autovacuum_naptime: at thousands of jobs per second
# each job leaves three dead row versions, so the stock 60 s lets a few hundred
# thousand pile up between two looks; docs/benchmarks.md advises 10 to 15 s.
CLUSTER_NAPTIME = 10.0
FOREIGN_XACT_S = 10.0  # another session's transaction older than this taints a sample

SAMPLE_SQL = (
    "SELECT pg_total_relation_size('jobvisor_jobs'), pg_relation_size('jobvisor_jobs'),"
    " s.n_live_tup, s.n_dead_tup, s.vacuum_count + s.autovacuum_count,"
    " (SELECT count(*) FROM jobvisor_jobs WHERE status IN ('pending', 'retryable')),"
    " (SELECT extract(epoch FROM now() - run_at) FROM jobvisor_jobs"
    "   WHERE status IN ('pending', 'retryable') AND run_at <= now()"
    "   ORDER BY priority DESC, run_at, id LIMIT 1),"
    " pg_relation_size('jobvisor_jobs_claim_idx'),"
    # Snapshots carry the oldest running transaction id of the whole cluster as
    # their xmin, so another database's long transaction holds vacuum back here
    # too while this database is busy: watch for those (not our holder).
    " (SELECT coalesce(max(extract(epoch FROM now() - a.xact_start)), 0)"
    "   FROM pg_stat_activity a WHERE (a.backend_xid IS NOT NULL OR a.backend_xmin IS NOT NULL)"
    "   AND a.application_name <> 'jobvisor-sustained-holder')"
    " FROM pg_stat_user_tables s WHERE s.relname = 'jobvisor_jobs'"
)

# The search every claim starts with (the claim's own WHERE and ORDER BY, without
# the row lock): its time and the pages it touches show what dead index entries
# at the head of the queue cost each claim, apart from any backlog.
HEAD_PROBE_SQL = (
    "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)"
    " SELECT id FROM jobvisor_jobs WHERE status IN ('pending', 'retryable')"
    " AND run_at <= now() ORDER BY priority DESC, run_at, id LIMIT 10"
)

VACUUM_COMMANDS = {
    (True, True): "VACUUM (ANALYZE) jobvisor_jobs",
    (True, False): "VACUUM jobvisor_jobs",
    (False, True): "ANALYZE jobvisor_jobs",
}

COLUMNS = [
    "t_s", "phase", "holder_open", "enqueued_per_s", "completed_per_s", "pending",
    "oldest_pending_s", "latency_p50_ms", "latency_p99_ms", "latency_max_ms",
    "head_probe_ms", "head_probe_pages", "total_bytes", "heap_bytes", "claim_idx_bytes",
    "n_live_tup", "n_dead_tup", "vacuums", "others_oldest_xact_s",
]  # fmt: skip


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


class LatencySink:
    """Receives the handlers' latency datagrams on a Unix socket (a thread)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.count = 0
        self._window = array.array("d")
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self._sock.bind(path)
        self._sock.settimeout(0.2)
        self._thread = threading.Thread(target=self._run, name="latency-sink", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self._sock.recv(1 << 16)
            except TimeoutError:
                continue
            batch = array.array("d")
            batch.frombytes(data)
            with self._lock:
                self._window.extend(batch)
                self.count += len(batch)

    def take(self) -> list[float]:
        """The latencies (seconds) reported since the last call."""
        with self._lock:
            window, self._window = self._window, array.array("d")
        return window.tolist()

    def wait_count(self, count: int, timeout: float) -> float:
        """Wait until `count` jobs have reported; returns the monotonic time it happened."""
        deadline = time.monotonic() + timeout
        while self.count < count:
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out: {self.count} of {count} jobs started")
            time.sleep(0.005)
        return time.monotonic()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._sock.close()


class PacedEnqueuer:
    """Enqueues `rate` jobs per second with `enqueue_many`, one batch per tick
    (a thread). Jobs a late tick owes are added to the next batch, up to one
    second's worth, so the mean rate holds while the machine is busy; a longer
    stall shows as a dip in the CSV's enqueue rate, not as a burst."""

    def __init__(self, queue: jobvisor.Queue, rate: float, tick: float, *, offset: float) -> None:
        self.sent = 0
        self.dropped = 0
        self._queue, self._rate, self._tick, self._offset = queue, rate, tick, offset
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="enqueuer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        if self._stop.wait(self._offset):
            return
        start = next_tick = time.monotonic()
        most = max(1, round(self._rate))
        while not self._stop.is_set():
            due = int(self._rate * (time.monotonic() - start)) - self.sent - self.dropped
            if due > most:
                self.dropped += due - most
                due = most
            if due > 0:
                self._queue.enqueue_many([JOB] * due)
                self.sent += due
            next_tick += self._tick
            delay = next_tick - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)
            else:
                next_tick = time.monotonic()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


@dataclass
class VacuumRule:
    """Autovacuum's trigger rule with the jobs table's thresholds."""

    vacuum_threshold: float
    vacuum_scale: float
    insert_threshold: float
    insert_scale: float
    analyze_threshold: float
    analyze_scale: float

    @classmethod
    def read(cls, conn: psycopg.Connection[Any]) -> VacuumRule:
        names = {
            "vacuum_threshold": "autovacuum_vacuum_threshold",
            "vacuum_scale": "autovacuum_vacuum_scale_factor",
            "insert_threshold": "autovacuum_vacuum_insert_threshold",
            "insert_scale": "autovacuum_vacuum_insert_scale_factor",
            "analyze_threshold": "autovacuum_analyze_threshold",
            "analyze_scale": "autovacuum_analyze_scale_factor",
        }
        row = conn.execute(
            "SELECT reloptions FROM pg_class WHERE relname = 'jobvisor_jobs'"
        ).fetchone()
        options = dict(o.split("=", 1) for o in (row[0] if row and row[0] else []))
        values = {}
        for attr, setting in names.items():
            if setting in options:
                values[attr] = float(options[setting])
            else:
                shown = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(setting))).fetchone()
                values[attr] = float(shown[0]) if shown else 0.0
        return cls(**values)


@dataclass
class StandInAutovacuum:
    """Every `naptime`, does for the jobs table what autovacuum would: VACUUM
    when dead tuples (or inserts since the last vacuum) pass the threshold,
    ANALYZE when changes since the last analyze do (a thread, its own session)."""

    url: str
    naptime: float
    log: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self, t0: float) -> None:
        self._t0 = t0
        self._thread = threading.Thread(target=self._run, name="stand-in-autovacuum", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute("SET vacuum_cost_delay = 0")
            rule = VacuumRule.read(conn)
            while not self._stop.wait(self.naptime):
                row = conn.execute(
                    "SELECT greatest(c.reltuples, 0), s.n_dead_tup, s.n_ins_since_vacuum,"
                    " s.n_mod_since_analyze FROM pg_class c"
                    " JOIN pg_stat_user_tables s ON s.relid = c.oid"
                    " WHERE c.relname = 'jobvisor_jobs'"
                ).fetchone()
                if row is None:
                    continue
                tuples, dead, inserted, modified = (float(v) for v in row)
                vacuum = dead > rule.vacuum_threshold + rule.vacuum_scale * tuples or (
                    inserted > rule.insert_threshold + rule.insert_scale * tuples
                )
                analyze = modified > rule.analyze_threshold + rule.analyze_scale * tuples
                if not (vacuum or analyze):
                    continue
                command = VACUUM_COMMANDS[vacuum, analyze]
                began = time.monotonic()
                conn.execute(command)
                self.log.append(
                    f"t={began - self._t0:6.1f}s {command}: {dead:,.0f} dead tuples before,"
                    f" took {time.monotonic() - began:.2f}s"
                )

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


@contextlib.contextmanager
def horizon_holder(url: str) -> Iterator[int]:
    """A session idle in a transaction that has a transaction id: the xmin
    horizon of its database cannot pass it while it is open."""
    with psycopg.connect(url, application_name="jobvisor-sustained-holder",
                         autocommit=True) as conn:  # fmt: skip
        # The holder is the experiment: a server-wide timeout must not end it early.
        conn.execute("SET idle_in_transaction_session_timeout = 0")
        conn.autocommit = False
        row = conn.execute("SELECT txid_current()").fetchone()  # opens the transaction
        try:
            yield int(row[0]) if row else 0
        finally:
            conn.rollback()


def head_probe(conn: psycopg.Connection[Any]) -> tuple[float, int]:
    """The claim's head search: server-side milliseconds and pages touched."""
    row = conn.execute(HEAD_PROBE_SQL).fetchone()
    assert row is not None
    explain = row[0][0]
    plan = explain["Plan"]
    return float(explain["Execution Time"]), int(
        plan.get("Shared Hit Blocks", 0) + plan.get("Shared Read Blocks", 0)
    )


def recreate_database(pg_url: str) -> str:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(BENCH_DB))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(BENCH_DB)))
    return _with_dbname(pg_url, BENCH_DB)


def start_supervisor(url: str, args: argparse.Namespace, sink: LatencySink,
                     log_path: Path) -> subprocess.Popen[bytes]:  # fmt: skip
    env = dict(os.environ, JOBVISOR_DATABASE_URL=url, JOBVISOR_APP="bench.sustained_app:registry",
               JOBVISOR_WORKERS=str(args.workers), JOBVISOR_CONCURRENCY=str(args.concurrency),
               JOBVISOR_RETENTION_COMPLETED=str(args.retention),
               JOBVISOR_CLEANUP_INTERVAL=str(args.cleanup_interval),
               JOBVISOR_LOG_LEVEL="warning", JOBVISOR_LOG_FORMAT="json", JOBVISOR_HTTP_ADDR="",
               JOBVISOR_SHUTDOWN_TIMEOUT="10", SUSTAINED_SOCKET=sink.path,
               PYTHONPATH=str(ROOT))  # fmt: skip
    cmd = [str(Path(sys.executable).with_name("jobvisor")), "run"]
    with log_path.open("ab") as log:
        return subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)


def stop_supervisor(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def measure_capacity(queue: jobvisor.Queue, sink: LatencySink, jobs: int) -> float:
    """Jobs per second of a burn-down of `jobs` jobs enqueued in one transaction."""
    before = sink.count
    queue.enqueue_many([JOB] * jobs)
    committed = time.monotonic()
    done = sink.wait_count(before + jobs, timeout=600)
    sink.take()
    return jobs / (done - committed)


def plot_python() -> str:
    """An interpreter with matplotlib: this one, or the plotting venv (created on first use)."""
    if importlib.util.find_spec("matplotlib") is not None:
        return sys.executable
    python = PLOT_VENV / "bin" / "python"
    if not python.exists():
        print(f"creating {PLOT_VENV} for matplotlib ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(PLOT_VENV)], check=True)
        requirements = ROOT / "bench" / "requirements-bench.txt"
        subprocess.run([str(python), "-m", "pip", "install", "-q", "-r", str(requirements)],
                       check=True)  # fmt: skip
    return str(python)


def fmt_ms(values: list[float], p: float | None) -> str:
    if not values:
        return ""
    return f"{(max(values) if p is None else percentile(values, p)) * 1000:.1f}"


def summarize(rows: list[dict[str, str]]) -> list[str]:
    def num(row: dict[str, str], key: str) -> float:
        return float(row[key]) if row[key] != "" else float("nan")

    lines = []
    for phase in ("before", "held", "after"):
        part = [r for r in rows if r["phase"] == phase]
        if not part:
            continue
        done = [num(r, "completed_per_s") for r in part]
        p50 = [num(r, "latency_p50_ms") for r in part if r["latency_p50_ms"]]
        p99 = [num(r, "latency_p99_ms") for r in part if r["latency_p99_ms"]]
        worst = max((num(r, "latency_max_ms") for r in part if r["latency_max_ms"]), default=0)
        lines.append(
            f"  {phase:>6}: completed median {percentile(done, 50):,.0f}/s;"
            f" latency p50 median {percentile(p50, 50) if p50 else float('nan'):.1f} ms,"
            f" p99 median {percentile(p99, 50) if p99 else float('nan'):.1f} ms,"
            f" worst {worst:,.0f} ms; pending max {max(num(r, 'pending') for r in part):,.0f};"
            f" dead tuples max {max(num(r, 'n_dead_tup') for r in part):,.0f};"
            f" head search max {max(num(r, 'head_probe_ms') for r in part):,.1f} ms"
            f" / {max(num(r, 'head_probe_pages') for r in part):,.0f} pages;"
            f" size at end {num(part[-1], 'total_bytes') / 2**20:.1f} MiB"
        )
    foreign = [r for r in rows if r["holder_open"] == "0"
               and num(r, "others_oldest_xact_s") > FOREIGN_XACT_S]  # fmt: skip
    if foreign:
        lines.append(
            f"  WARNING: in {len(foreign)} samples outside the held window another session's"
            f" transaction was over {FOREIGN_XACT_S:g}s old (up to"
            f" {max(num(r, 'others_oldest_xact_s') for r in foreign):,.0f}s): it held vacuum back"
            " too; those phases are not clean"
        )
    sizes = [num(r, "total_bytes") for r in rows]
    before = [r for r in rows if r["phase"] == "before"]
    held = [r for r in rows if r["phase"] == "held"]
    after = [r for r in rows if r["phase"] == "after"]
    plateau = num(before[-1], "total_bytes") if before else float("nan")
    lines.append(
        f"  size: {plateau / 2**20:.1f} MiB when the transaction opened, peak"
        f" {max(sizes) / 2**20:.1f} MiB, {sizes[-1] / 2**20:.1f} MiB at the end"
    )
    if held and after:
        # Bounded: from the first vacuum after the transaction closed, the table
        # grows no more (vacuum's freed space is reused; it only shrinks when
        # vacuum can truncate empty pages at its end), and the dead tuples fall
        # back to what they were before the transaction.
        counts = [num(r, "vacuums") for r in rows]
        first = len(rows) - len(after)
        vacuumed = next((i for i in range(first, len(rows)) if counts[i] > counts[first]), None)
        dead_before = max(num(r, "n_dead_tup") for r in before) if before else 0.0
        if vacuumed is None:
            lines.append("  after the transaction: no vacuum ran; bounded: NO")
        else:
            tail = rows[vacuumed:]
            grew = max(num(r, "total_bytes") for r in tail) / num(tail[0], "total_bytes") - 1
            dead_tail = max(num(r, "n_dead_tup") for r in tail)
            bounded = grew <= 0.05 and dead_tail <= 2 * dead_before
            lines.append(
                f"  after the first vacuum past the transaction (t={num(tail[0], 't_s'):g}s):"
                f" size {grew:+.1%} at most; dead tuples up to {dead_tail:,.0f} (before the"
                f" transaction: up to {dead_before:,.0f}); bounded: {'yes' if bounded else 'NO'}"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=600.0)
    parser.add_argument("--load", type=float, default=0.8, help="fraction of the capacity")
    parser.add_argument("--rate", type=float, help="jobs/s to hold (skips the capacity burn-down)")
    parser.add_argument("--capacity-jobs", type=int, default=20_000)
    parser.add_argument("--hold-from", type=float, default=0.3)
    parser.add_argument("--hold-until", type=float, default=0.6)
    parser.add_argument("--sample-interval", type=float, default=5.0)
    parser.add_argument("--tick", type=float, default=0.1, help="seconds between enqueues")
    parser.add_argument("--enqueuers", type=int, default=2, help="enqueuing threads")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--retention", type=float, default=60.0,
                        help="JOBVISOR_RETENTION_COMPLETED for the run")  # fmt: skip
    parser.add_argument("--cleanup-interval", type=float, default=10.0)
    parser.add_argument("--vacuum", choices=["auto", "server", "bench", "none"], default="auto")
    parser.add_argument("--naptime", type=float,
                        help="stand-in autovacuum period (default: the server's)")  # fmt: skip
    parser.add_argument("--publish", action="store_true", help="copy the PNG to docs/")
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    parser.add_argument("--cluster", action="store_true",
                        help="run on a throwaway cluster started here, autovacuum on"
                             " (--pg-url is ignored)")  # fmt: skip
    parser.add_argument("--cluster-naptime", type=float, default=CLUSTER_NAPTIME,
                        help="the throwaway cluster's autovacuum_naptime, seconds")  # fmt: skip
    args = parser.parse_args()
    if not 0 <= args.hold_from <= args.hold_until <= 1:
        parser.error(f"--hold-from {args.hold_from} / --hold-until {args.hold_until}: "
                     "expected 0 <= from <= until <= 1")  # fmt: skip
    if args.enqueuers < 1:
        parser.error(f"--enqueuers {args.enqueuers}: expected an integer >= 1")
    if not 0 < args.load <= 2:
        parser.error(f"--load {args.load}: expected a fraction in (0, 2]")
    if args.cluster_naptime < 1:
        parser.error(f"--cluster-naptime {args.cluster_naptime}: expected seconds >= 1")
    if not args.cluster:
        run(args)
        return
    settings = ["autovacuum=on", f"autovacuum_naptime={args.cluster_naptime:g}s"]
    print(f"starting a throwaway cluster ({', '.join(settings)}) ...", flush=True)
    with throwaway_cluster(settings) as url:
        args.pg_url = url
        run(args)


def run(args: argparse.Namespace) -> None:

    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = RESULTS / f"sustained-{stamp}"
    csv_path, png_path = base.with_suffix(".csv"), base.with_suffix(".png")
    report: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        report.append(line)

    url = recreate_database(args.pg_url)
    queue = jobvisor.connect(url)
    queue.migrate()
    with psycopg.connect(url, autocommit=True) as conn:
        settings: dict[str, str] = dict(conn.execute(
            "SELECT name, setting FROM pg_settings WHERE name IN ('autovacuum',"
            " 'autovacuum_naptime', 'server_version', 'idle_in_transaction_session_timeout')"
        ).fetchall())  # fmt: skip
    vacuum = args.vacuum
    if vacuum == "auto":
        vacuum = "server" if settings["autovacuum"] == "on" else "bench"
    naptime = args.naptime or float(settings["autovacuum_naptime"])
    say(f"PostgreSQL {settings['server_version']}, autovacuum={settings['autovacuum']}"
        f" (naptime {settings['autovacuum_naptime']}s), idle_in_transaction_session_timeout="
        f"{settings['idle_in_transaction_session_timeout']}ms; vacuum of the jobs table: {vacuum}"
        + (f" (stand-in every {naptime:g}s)" if vacuum == "bench" else ""))  # fmt: skip

    tmp = tempfile.mkdtemp(prefix="jobvisor-sustained-")
    sink = LatencySink(os.path.join(tmp, "latency.sock"))
    supervisor = start_supervisor(url, args, sink, base.with_suffix(".log"))
    enqueuers: list[PacedEnqueuer] = []
    holder: contextlib.ExitStack | None = None
    stand_in = StandInAutovacuum(url, naptime)
    rows: list[dict[str, str]] = []
    try:
        queue.enqueue_many([JOB] * WARM_JOBS)
        sink.wait_count(WARM_JOBS, timeout=120)
        sink.take()
        if args.rate:
            rate = args.rate
            say(f"rate: {rate:,.0f} jobs/s (given)")
        else:
            capacity = measure_capacity(queue, sink, args.capacity_jobs)
            rate = args.load * capacity
            say(f"capacity: {args.capacity_jobs:,} jobs burnt down at {capacity:,.0f} jobs/s"
                f" ({args.workers} workers x concurrency {args.concurrency});"
                f" holding {args.load:.0%} = {rate:,.0f} jobs/s")  # fmt: skip
        hold_from, hold_until = args.hold_from * args.duration, args.hold_until * args.duration
        say(f"duration {args.duration:g}s; transaction open from {hold_from:g}s to"
            f" {hold_until:g}s; completed jobs deleted {args.retention:g}s after finishing"
            f" (cleanup every {args.cleanup_interval:g}s)")  # fmt: skip

        sampler = psycopg.connect(url, autocommit=True)
        t0 = time.monotonic()
        # Several enqueuers, ticks staggered: one waits on its commit while another sends.
        enqueuers = [PacedEnqueuer(queue, rate / args.enqueuers, args.tick,
                                   offset=i * args.tick / args.enqueuers)
                     for i in range(args.enqueuers)]  # fmt: skip
        if vacuum == "bench":
            stand_in.start(t0)
        last_t, last_sent = t0, 0
        next_sample = t0 + args.sample_interval
        with csv_path.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS)
            writer.writeheader()
            while True:
                time.sleep(max(0.0, next_sample - time.monotonic()))
                next_sample += args.sample_interval
                elapsed = time.monotonic() - t0
                if holder is None and hold_from <= elapsed < hold_until:
                    holder = contextlib.ExitStack()
                    xid = holder.enter_context(horizon_holder(url))
                    say(f"t={elapsed:6.1f}s transaction {xid} opened")
                elif holder is not None and elapsed >= hold_until:
                    holder.close()
                    holder = None
                    say(f"t={elapsed:6.1f}s transaction closed")
                stats = sampler.execute(SAMPLE_SQL).fetchone()
                assert stats is not None, "no statistics for jobvisor_jobs"
                probe_ms, probe_pages = head_probe(sampler)
                now = time.monotonic()
                window = now - last_t
                sent = sum(e.sent for e in enqueuers)
                latencies = sink.take()
                phase = ("before" if elapsed < hold_from else
                         "held" if holder is not None else "after")  # fmt: skip
                row = {
                    "t_s": f"{now - t0:.1f}", "phase": phase,
                    "holder_open": "1" if holder is not None else "0",
                    "enqueued_per_s": f"{(sent - last_sent) / window:.0f}",
                    "completed_per_s": f"{len(latencies) / window:.0f}",
                    "pending": str(stats[5]),
                    "oldest_pending_s": "" if stats[6] is None else f"{float(stats[6]):.3f}",
                    "latency_p50_ms": fmt_ms(latencies, 50),
                    "latency_p99_ms": fmt_ms(latencies, 99),
                    "latency_max_ms": fmt_ms(latencies, None),
                    "head_probe_ms": f"{probe_ms:.3f}", "head_probe_pages": str(probe_pages),
                    "total_bytes": str(stats[0]), "heap_bytes": str(stats[1]),
                    "claim_idx_bytes": str(stats[7]),
                    "n_live_tup": str(stats[2]), "n_dead_tup": str(stats[3]),
                    "vacuums": str(stats[4]), "others_oldest_xact_s": f"{float(stats[8]):.0f}",
                }  # fmt: skip
                writer.writerow(row)
                f.flush()
                rows.append(row)
                print(f"  t={row['t_s']:>6}s {phase:>6} in {row['enqueued_per_s']:>5}/s"
                      f" out {row['completed_per_s']:>5}/s pending {row['pending']:>7}"
                      f" p99 {row['latency_p99_ms'] or '-':>8} ms probe {probe_ms:6.2f} ms"
                      f" size {stats[0] / 2**20:7.1f} MiB dead {stats[3]:>9,}"
                      f" vacuums {stats[4]} others' oldest xact {float(stats[8]):.0f}s",
                      flush=True)  # fmt: skip
                last_t, last_sent = now, sent
                if elapsed >= args.duration:
                    break
        sampler.close()
    finally:
        if holder is not None:
            holder.close()
        for e in enqueuers:
            e.stop()
        stand_in.stop()
        stop_supervisor(supervisor)
        sink.close()
        shutil.rmtree(tmp, ignore_errors=True)
        queue.close()

    sent, dropped = sum(e.sent for e in enqueuers), sum(e.dropped for e in enqueuers)
    say(f"enqueued {sent:,} jobs, mean {sent / args.duration:,.0f}/s of {rate:,.0f}/s;"
        f" {dropped:,} not enqueued as more than 1 s behind")  # fmt: skip
    for line in stand_in.log:
        say(f"  stand-in autovacuum {line}")
    say(f"results ({len(rows)} samples every {args.sample_interval:g}s) in {csv_path}")
    for line in summarize(rows):
        say(line)
    title = (f"jobvisor sustained load: {rate:,.0f} jobs/s for {args.duration:g}s, transaction"
             f" open {hold_from:g}-{hold_until:g}s, vacuum: {vacuum}"
             f"{f' (stand-in, naptime {naptime:g}s)' if vacuum == 'bench' else ''},"
             f" retention {args.retention:g}s")  # fmt: skip
    subprocess.run([plot_python(), str(ROOT / "bench" / "sustained_plot.py"), str(csv_path),
                    str(png_path), "--title", title], check=True)  # fmt: skip
    say(f"plot: {png_path}")
    if args.publish:
        shutil.copyfile(png_path, ROOT / "docs" / "sustained.png")
        say("copied to docs/sustained.png")
    base.with_suffix(".txt").write_text("\n".join(report) + "\n")


if __name__ == "__main__":
    main()
