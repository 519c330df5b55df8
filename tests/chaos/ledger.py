"""What every chaos scenario shares: the settings, a steady enqueuer that
survives the database going away, and the final check of the jobs table
against the ledger (`tests/chaos/app.py`) in SQL.

What `assert_chaos_invariants` asserts, and why each is sound under
at-least-once delivery:

1. None lost, none invented: the ids in `jobvisor_jobs` are exactly the ids
   the enqueuer was given, and every ledger row names one of them.
2. Nothing is left `running`; at the end of a scenario that ran to completion
   every job is `completed` or `dead`, and a `dead` job has a `last_error`
   (after a stop that was not waited out, `pending`/`retryable` are allowed
   too: not yet run, or handed back).
3. DESIGN.md's invariants (`tests.support.invariants.assert_invariants`), among them
   attempts <= max_attempts and no claim token outside `running`.
4. A claim runs its handler at most once: no job appears in two ledger
   runs with the same claim token. (Each claim call draws a fresh token,
   shared by the jobs it takes.)
5. Every completed job was completed by a run that is in the ledger: the
   row keeps the `worker_id` and `attempts` of the claim that completed it,
   and a ledger run has that pair. No run of the job has a higher attempt:
   attempts only grow from claim to claim (a release gives back only the
   attempt of the claim it ends), so the completing claim, the last one, has
   the highest.
6. A duplicate only where a lease was lost. Every ledger run other than a
   completed job's completing run must be explained by something that ended
   its claim without completing it, as the service logged it: its worker
   died or was killed (`worker.exited` not with exit code 0, `worker.killed`),
   it lost its lease on that job (`job.lease_lost`), its drain was cut short
   (`worker.releasing`: the running jobs were released), or it left outcomes
   unwritten (`worker.unwritten`). Of these only a release gives the
   attempt back, so a run with the same attempt as the run that completed
   its job must have been released by a drain. A run with no explanation
   (a completion that was acknowledged and then undone, a job run again
   though its claim was never taken back) fails the check. The one
   exception is a server crash (`crashed`): a worker commits its claims and
   completions without waiting for the WAL flush, so a crash may undo the
   last of them, and a run that began at most `CRASH_WINDOW` before it may
   be run again, with its attempt given back or not; so may a run that began
   within `CRASH_WINDOW` after it (a busy worker starts a job it claimed
   before the crash a moment late: no claim can be made while the server is
   down).
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import random
import threading
import time
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, Final

import psycopg

import jobvisor
from jobvisor.queue.api import parse_url
from jobvisor.queue.errors import DatabaseUnavailable
from tests.support.invariants import assert_invariants, query_all
from tests.support.service import Service
from tests.support.wait import wait_until

from .app import LEDGER_DDL

APP: Final = "tests.chaos.app:registry"

# Short intervals, a lease well above a loaded machine's hiccups, and room for
# the crashes a scenario causes on purpose.
SETTINGS: Final[Mapping[str, str]] = {
    "JOBVISOR_APP": APP,
    "JOBVISOR_WORKERS": "2",
    "JOBVISOR_CONCURRENCY": "4",
    "JOBVISOR_POOL_SIZE": "2",
    "JOBVISOR_LEASE": "10",
    "JOBVISOR_REAP_INTERVAL": "0.5",
    "JOBVISOR_SHUTDOWN_TIMEOUT": "10",
    "JOBVISOR_WORKER_TIMEOUT": "20",
    "JOBVISOR_SUMMARY_INTERVAL": "1",
    "JOBVISOR_MAX_RESTARTS": "100",
    "JOBVISOR_RESTART_WINDOW": "60",
}

MAX_ATTEMPTS: Final = 10
# A crash undoes at most the asynchronous commits of the last few
# wal_writer_delay rounds (200 ms each); a run's ledger row is written just
# after its claim and a little before its completion.
CRASH_WINDOW: Final = dt.timedelta(seconds=3)
TERMINAL: Final = ("completed", "dead")


def settings(**overrides: str) -> dict[str, str]:
    """SETTINGS with some replaced (by variable name)."""
    return {**SETTINGS, **overrides}


def prepare(url: str) -> None:
    """Migrate the database and create the ledger."""
    with jobvisor.connect(url, pool_size=1) as q:
        q.migrate()
    with psycopg.connect(parse_url(url)[1], autocommit=True) as conn:
        conn.execute(LEDGER_DDL)


def counts(url: str) -> dict[str, int]:
    """Jobs by status."""
    (rows,) = query_all(url, ["SELECT status, count(*) FROM jobvisor_jobs GROUP BY status"])
    return {str(status): int(n) for status, n in rows}


def ledger_size(url: str) -> int:
    (rows,) = query_all(url, ["SELECT count(*) FROM chaos_ledger"])
    return int(rows[0][0])


def wait_more_runs(url: str, more: int, *, timeout: float = 120.0) -> None:
    """Wait until `more` runs were added to the ledger: chaos paced by
    progress rather than by the clock."""
    target = ledger_size(url) + more
    wait_until(lambda: ledger_size(url) >= target, timeout=timeout, what=f"{target} runs")


def wait_all_finished(url: str, expected: int, *, timeout: float = 120.0) -> None:
    """Wait until `expected` jobs exist and every one is terminal."""

    def done() -> bool:
        found = counts(url)
        return (
            sum(found.values()) == expected and sum(found.get(s, 0) for s in TERMINAL) == expected
        )

    wait_until(done, timeout=timeout, what=f"all {expected} jobs finished (now {counts(url)})")


@dataclasses.dataclass(frozen=True)
class Run:
    """One ledger row: a handler run that got started."""

    worker_id: str
    claim_token: str
    attempt: int
    pid: int


def runs_of(url: str, job_id: uuid.UUID) -> list[Run]:
    """The runs of one job, in the order they started."""
    with psycopg.connect(parse_url(url)[1], autocommit=True, connect_timeout=10) as conn:
        rows = conn.execute(
            "SELECT worker_id, claim_token, attempt, pid FROM chaos_ledger"
            " WHERE job_id = %s ORDER BY at, attempt",
            (job_id,),
        ).fetchall()
    return [Run(str(w), str(t), int(a), int(p)) for w, t, a, p in rows]


def claim_of(url: str, job_id: uuid.UUID) -> tuple[str, str | None, str | None]:
    """The job's (status, claim token, worker id) right now."""
    with psycopg.connect(parse_url(url)[1], autocommit=True, connect_timeout=10) as conn:
        row = conn.execute(
            "SELECT status, claim_token, worker_id FROM jobvisor_jobs WHERE id = %s", (job_id,)
        ).fetchone()
    assert row is not None, f"job {job_id} is not in the table"
    status, token, worker = row
    return str(status), None if token is None else str(token), worker


def answers(url: str) -> bool:
    try:
        query_all(url, ["SELECT 1"])
    except psycopg.Error:
        return False
    return True


class Enqueuer:
    """A steady stream of `chaos` jobs from a thread: `batch` jobs every
    `every` seconds until `stop()` (or until `total` were enqueued).

    The database may go away under it. When an `enqueue_many` fails, its
    outcome is unknown (the commit may have happened before the connection
    died), so the batch carries a tag in its payload and the enqueuer asks the
    database, once it answers again, whether the batch is there: all of it
    (taken as enqueued) or none of it (enqueued again). Anything else would
    be a torn transaction and fails the scenario."""

    def __init__(
        self,
        url: str,
        *,
        batch: int = 5,
        every: float = 0.05,
        total: int | None = None,
        seconds: tuple[float, float] = (0.01, 0.08),
        payload: Mapping[str, Any] | None = None,
    ) -> None:
        self.url = url
        self.batch, self.every, self.total = batch, every, total
        self.seconds = seconds
        self.payload = dict(payload or {})
        self.ids: list[uuid.UUID] = []
        self.retries = 0
        self.failure: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-enqueuer", daemon=True)

    def start(self) -> Enqueuer:
        self._thread.start()
        return self

    def stop(self, timeout: float = 120.0) -> list[uuid.UUID]:
        """Stop enqueueing; every id enqueued. Raises what broke the thread."""
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the enqueuer did not stop"
        if self.failure is not None:
            raise AssertionError(f"the enqueuer failed: {self.failure!r}") from self.failure
        return list(self.ids)

    def _jobs(self, tag: str) -> list[dict[str, Any]]:
        return [
            {
                "job_type": "chaos",
                "payload": {**self.payload, "batch": tag, "seconds": random.uniform(*self.seconds)},
                "max_attempts": MAX_ATTEMPTS,
            }
            for _ in range(self.batch)
        ]

    def _run(self) -> None:
        try:
            q = jobvisor.connect(self.url, pool_size=1)
            try:
                while not self._stop.is_set():
                    if self.total is not None and len(self.ids) >= self.total:
                        return
                    self._enqueue(q)
                    self._stop.wait(self.every)  # the pace of the stream
            finally:
                q.close()
        except BaseException as exc:
            self.failure = exc

    def _enqueue(self, q: jobvisor.Queue) -> None:
        tag = uuid.uuid4().hex
        jobs = self._jobs(tag)
        give_up_at = time.monotonic() + 120.0
        while True:
            try:
                self.ids += q.enqueue_many(jobs)
                return
            except DatabaseUnavailable:
                self.retries += 1
                if time.monotonic() > give_up_at:
                    raise
            # The jobs table answering, not the server alone: on a Citus cluster
            # the coordinator answers while a node is still away.
            (rows,) = wait_until(
                lambda: _readable(self.url, tag), timeout=120, what="the jobs table answering"
            )
            if rows:
                assert len(rows) == len(jobs), f"batch {tag}: {len(rows)} of {len(jobs)} jobs"
                self.ids += rows
                return


def _readable(url: str, tag: str) -> tuple[list[uuid.UUID]] | None:
    """(batch_ids(url, tag),), or None while the jobs table cannot be read."""
    try:
        return (batch_ids(url, tag),)
    except psycopg.OperationalError:
        return None


def batch_ids(url: str, tag: str) -> list[uuid.UUID]:
    """The ids of the jobs enqueued with this batch tag."""
    with psycopg.connect(parse_url(url)[1], autocommit=True, connect_timeout=10) as conn:
        rows = conn.execute(
            "SELECT id FROM jobvisor_jobs WHERE payload->>'batch' = %s", (tag,)
        ).fetchall()
    return [uuid.UUID(str(r[0])) for r in rows]


# --- what the service logged ---------------------------------------------------------


@dataclasses.dataclass
class Disturbances:
    """What ended claims without completing them, as the services logged it."""

    died: set[str] = dataclasses.field(default_factory=set)  # worker ids
    drained: set[str] = dataclasses.field(default_factory=set)
    unwritten: set[str] = dataclasses.field(default_factory=set)
    lease_lost: set[tuple[str, str]] = dataclasses.field(default_factory=set)  # (worker, job)

    @classmethod
    def logged(cls, services: Iterable[Service]) -> Disturbances:
        found = cls()
        for service in services:
            for event in service.events("worker.exited"):
                if event.get("exit") != "exit code 0" or event.get("reason"):
                    found.died.add(str(event["worker_id"]))
            found.died |= {str(e["worker_id"]) for e in service.events("worker.killed")}
            found.drained |= {str(e["worker_id"]) for e in service.events("worker.releasing")}
            found.unwritten |= {str(e["worker_id"]) for e in service.events("worker.unwritten")}
            found.lease_lost |= {
                (str(e["worker_id"]), str(uuid.UUID(str(e["job_id"]))))
                for e in service.events("job.lease_lost")
            }
        return found

    def explains(self, worker_id: str, job_id: str, *, given_back: bool) -> str | None:
        """Why a run of `job_id` on `worker_id` may have been cut short, or None.
        `given_back`: a later claim had the same attempt number, so this one
        was released: by its worker's drain, or by the requeue of a dead
        worker's jobs, which gives the attempt back to a job that ran beside
        others (a reap counts it)."""
        if given_back:
            if worker_id in self.drained:
                return "its worker's drain released it"
            return "its worker died" if worker_id in self.died else None
        if worker_id in self.died:
            return "its worker died"
        if (worker_id, job_id) in self.lease_lost:
            return "the lease was lost"
        if worker_id in self.drained:
            return "its worker's drain released it"
        if worker_id in self.unwritten:
            return "its worker left outcomes unwritten"
        return None


# --- the final check ---------------------------------------------------------------------


@dataclasses.dataclass
class Outcome:
    """What a scenario ended with, for its own assertions and its report."""

    statuses: dict[str, int]
    runs: int
    extra_runs: list[ExtraRun]

    @property
    def rerun_jobs(self) -> set[str]:
        return {r.job_id for r in self.extra_runs}

    def __str__(self) -> str:
        reasons = collections.Counter(r.why for r in self.extra_runs)
        return (
            f"statuses {self.statuses}, {self.runs} runs, {len(self.extra_runs)} extra runs "
            f"of {len(self.rerun_jobs)} jobs ({dict(reasons)})"
        )


@dataclasses.dataclass(frozen=True)
class ExtraRun:
    """A run that did not complete its job, and why that is allowed."""

    job_id: str
    worker_id: str
    attempt: int
    why: str


LEDGER_QUERIES: Final = {
    "jobs": "SELECT id, status, attempts, max_attempts, last_error, worker_id FROM jobvisor_jobs",
    "runs": "SELECT run_id, job_id, claim_token, worker_id, attempt, at FROM chaos_ledger",
    "shared claims": (
        "SELECT job_id, claim_token, count(*) FROM chaos_ledger"
        " GROUP BY job_id, claim_token HAVING count(*) > 1"
    ),
    "completed without its run": (
        "SELECT j.id, j.worker_id, j.attempts FROM jobvisor_jobs j WHERE j.status = 'completed'"
        " AND NOT EXISTS (SELECT 1 FROM chaos_ledger l WHERE l.job_id = j.id"
        " AND l.worker_id = j.worker_id AND l.attempt = j.attempts)"
    ),
    "runs after the completing one": (
        "SELECT j.id, j.attempts, l.attempt, l.worker_id FROM jobvisor_jobs j"
        " JOIN chaos_ledger l ON l.job_id = j.id"
        " WHERE j.status = 'completed' AND l.attempt > j.attempts"
    ),
    "runs of unknown jobs": (
        "SELECT l.job_id FROM chaos_ledger l"
        " WHERE NOT EXISTS (SELECT 1 FROM jobvisor_jobs j WHERE j.id = l.job_id)"
    ),
}


def _spread(url: str) -> bool:
    """Whether the jobs table is spread over a Citus cluster."""
    (rows,) = query_all(url, ["SELECT to_regclass('jobvisor_buckets') IS NOT NULL"])
    return bool(rows[0][0])


def assert_chaos_invariants(
    url: str,
    enqueued: Collection[uuid.UUID],
    services: Sequence[Service],
    *,
    settled: bool = True,
    crashed: Sequence[dt.datetime] = (),
) -> Outcome:
    """Fail unless every assertion of the module's docstring holds; `crashed`
    lists when the server crashed (just after each)."""
    queries = list(LEDGER_QUERIES.values())
    if _spread(url):
        # A Citus coordinator joins no table of its own with the spread jobs
        # table: the checks read a copy of it made now.
        with psycopg.connect(parse_url(url)[1], autocommit=True) as conn:
            conn.execute("DROP TABLE IF EXISTS chaos_jobs")
            conn.execute("CREATE TABLE chaos_jobs AS SELECT * FROM jobvisor_jobs")
        queries = [q.replace("jobvisor_jobs", "chaos_jobs") for q in queries]
    results = dict(zip(LEDGER_QUERIES, query_all(url, queries), strict=True))
    jobs = {str(row[0]): row for row in results["jobs"]}

    wanted = {str(i) for i in enqueued}
    assert len(wanted) == len(enqueued), "the enqueuer got a job id twice"
    lost, invented = wanted - set(jobs), set(jobs) - wanted
    assert not lost, f"{len(lost)} enqueued jobs are missing, e.g. {sorted(lost)[:5]}"
    assert not invented, f"{len(invented)} jobs nobody enqueued, e.g. {sorted(invented)[:5]}"

    statuses = dict(collections.Counter(str(row[1]) for row in jobs.values()))
    allowed = set(TERMINAL) if settled else {*TERMINAL, "pending", "retryable"}
    stray = {s: n for s, n in statuses.items() if s not in allowed}
    assert not stray, f"jobs left in {stray} (all: {statuses})"
    no_error = [i for i, row in jobs.items() if row[1] == "dead" and not row[4]]
    assert not no_error, f"dead jobs without a last_error: {no_error[:5]}"
    assert_invariants(url)

    for name in ("shared claims", "completed without its run", "runs after the completing one",
                 "runs of unknown jobs"):  # fmt: skip
        assert not results[name], f"{name}: {results[name][:5]!r}"

    disturbances = Disturbances.logged(services)
    extra: list[ExtraRun] = []
    unexplained = []
    completing: set[str] = set()
    for _run_id, job_id, _token, worker_id, attempt, at in results["runs"]:
        job_key = str(job_id)
        row = jobs[job_key]
        is_last = row[1] == "completed" and (row[5], row[2]) == (worker_id, attempt)
        if is_last and job_key not in completing:
            completing.add(job_key)  # the completing run (a second look-alike is not)
            continue
        given_back = row[1] == "completed" and attempt == row[2]
        why = disturbances.explains(str(worker_id), job_key, given_back=given_back)
        if why is None and any(c - CRASH_WINDOW <= at <= c + CRASH_WINDOW for c in crashed):
            why = "the server crashed before its claim or completion was flushed"
        if why is None:
            unexplained.append((job_key, worker_id, attempt, row[1], row[2], row[5]))
        else:
            extra.append(ExtraRun(job_key, str(worker_id), int(attempt), why))
    assert not unexplained, (
        f"{len(unexplained)} runs that nothing cut short did not complete their job "
        f"(job, run's worker, run's attempt, job status, job attempts, job worker): "
        f"{unexplained[:5]!r}"
    )
    return Outcome(statuses, len(results["runs"]), extra)
