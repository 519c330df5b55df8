"""Workflows: jobs that run when the jobs they depend on have finished.

A workflow is inserted whole, in one transaction: a row of its own, its jobs
(`waiting` while a parent has not finished, else `pending`) and one edge per
dependency, each with what a parent's failure does to its child. From then on
the database does the hand-over: the trigger of migration 16 fires on every
statement that ends a workflow job, whichever path ends it, and makes a child
pending in that statement's transaction once its last parent is done. These
operations only build, read, cancel and retry workflows; like `ops`' they
check their arguments first and return `Plan`s.

A child's parents' results reach it in its `meta` ("parents", by node key;
"failed_parents": the status of each parent that failed under the "run"
policy), which the claim reads with the job; `substitute` puts them where
the payload holds placeholders (`{RESULT_KEY: node}`) before the handler
sees it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol

from ..correlation import current_correlation_id
from . import bulk, validate
from .drivers.postgres.sql.workflows import WorkflowSql as PostgresWorkflowSql
from .drivers.sqlite.sql.workflows import WorkflowSql as SqliteWorkflowSql
from .errors import InvalidArgument, JobNotFound
from .model import TERMINAL, UTC, JobStatus, NewJob, new_job_ids
from .ops.context import Ctx, _job_id, one_database, uuid_of
from .ops.control import _requester
from .placeholders import placeholder_nodes
from .plan import Plan, Steps, Stmt

NODE_KEY: Final = re.compile(r"[A-Za-z0-9_.:@/+-]{1,200}")
"""What a node key may hold (it is a JSON path label in SQLite's hand-over)."""

MAX_NODES: Final = 100_000

# Options a workflow job may not have: a dedupe key or unique key could make
# the insert return another job, which the workflow's edges cannot point at.
_REFUSED_OPTIONS: Final = ("dedupe_key", "unique")


class FailurePolicy(enum.StrEnum):
    """What a parent's death or cancel does to a child (per dependency)."""

    CANCEL = "cancel"  # the child ends cancelled, and so on down its descendants
    RUN = "run"  # the child runs anyway; meta.failed_parents names the parent
    WAIT = "wait"  # the child waits until the parent is retried and completes


@dataclasses.dataclass(frozen=True, slots=True)
class NodeSpec:
    """One job of a workflow as the builder made it: its key, `enqueue`'s
    arguments (`job_type`, `payload` and options), and its parents as
    (index of an earlier node, failure policy) pairs."""

    key: str
    job: Mapping[str, Any]
    parents: tuple[tuple[int, FailurePolicy | str], ...] = ()


class WorkflowSpec(Protocol):
    """What `enqueue_workflow` takes: `jobvisor.Workflow` is one."""

    @property
    def name(self) -> str: ...

    @property
    def specs(self) -> Sequence[NodeSpec]: ...


@dataclasses.dataclass(frozen=True, slots=True)
class WorkflowJob:
    """One job of a workflow as `workflow` reads it."""

    id: uuid.UUID
    node: str
    job_type: str
    status: JobStatus
    attempts: int
    result: Any
    last_error: str | None
    finished_at: dt.datetime | None
    parents: tuple[str, ...]
    """The node keys of its parents."""


@dataclasses.dataclass(frozen=True, slots=True)
class WorkflowStatus:
    """A workflow and each of its jobs, in the order they were added."""

    id: uuid.UUID
    name: str
    created_at: dt.datetime
    jobs: tuple[WorkflowJob, ...]

    @property
    def counts(self) -> dict[JobStatus, int]:
        """How many of its jobs are in each status (statuses with none left out)."""
        counts: dict[JobStatus, int] = {}
        for job in self.jobs:
            counts[job.status] = counts.get(job.status, 0) + 1
        return counts

    @property
    def finished(self) -> bool:
        """Whether every job of it is completed, dead or cancelled."""
        return all(job.status in TERMINAL for job in self.jobs)

    def job(self, node: str) -> WorkflowJob:
        """Its job of this node key; `KeyError` if it has none."""
        for job in self.jobs:
            if job.node == node:
                return job
        raise KeyError(node)


class WorkflowNotFound(JobNotFound):
    """No workflow with this id exists."""

    def __init__(self, workflow_id: uuid.UUID | str) -> None:
        self.job_id = workflow_id
        LookupError.__init__(self, f"workflow {workflow_id} not found")


# --- building -----------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class _Checked:
    rows: bulk.Rows
    edges: list[tuple[int, int, str, bool]]
    waiting_on: list[int]


def _workflow_sql(name: str) -> type[PostgresWorkflowSql] | type[SqliteWorkflowSql]:
    """The workflow statements of the engine called `name`."""
    return PostgresWorkflowSql if name == "postgres" else SqliteWorkflowSql


def _check_node(index: int, spec: Any, keys: dict[str, int]) -> NewJob:
    if not isinstance(spec, NodeSpec):
        raise InvalidArgument(f"workflow node {index}: {validate.short(spec)}: expected a NodeSpec")
    where = f"workflow node {spec.key!r}"
    if not isinstance(spec.key, str) or not NODE_KEY.fullmatch(spec.key):
        raise InvalidArgument(
            f"workflow node key {validate.short(spec.key)}: expected 1 to 200 letters, digits "
            "or _ . : @ / + -"
        )
    if spec.key in keys:
        raise InvalidArgument(f"{where}: the key is used twice; node keys are unique")
    for option in _REFUSED_OPTIONS:
        if spec.job.get(option) is not None:
            raise InvalidArgument(
                f"{where}: {option}={validate.short(spec.job[option])}: a workflow job takes no "
                f"{option} (its workflow's edges need the job itself, never another one)"
            )
    try:
        job = NewJob.build(**spec.job)
    except TypeError as exc:
        raise InvalidArgument(f"{where}: {exc}") from None
    except InvalidArgument as exc:
        raise InvalidArgument(f"{where}: {exc}") from None
    seen: set[int] = set()
    for parent, policy in spec.parents:
        if not isinstance(parent, int) or not 0 <= parent < index:
            raise InvalidArgument(
                f"{where}: parent {validate.short(parent)}: expected the index of an earlier "
                "node (a workflow has no cycles: a job depends only on jobs added before it)"
            )
        if parent in seen:
            raise InvalidArgument(f"{where}: parent {parent} is given twice")
        seen.add(parent)
        try:
            FailurePolicy(policy)
        except ValueError:
            raise InvalidArgument(
                f"{where}: on_parent_failure={validate.short(policy)}: expected one of "
                "'cancel', 'run', 'wait'"
            ) from None
    return job


def _check(
    ctx: Ctx, workflow: WorkflowSpec, workflow_id: uuid.UUID, meta: str | None = None
) -> _Checked:
    validate.name("workflow name", getattr(workflow, "name", None))
    specs = list(getattr(workflow, "specs", None) or ())
    if not specs:
        raise InvalidArgument(f"workflow {workflow.name!r}: expected at least one job")
    if len(specs) > MAX_NODES:
        raise InvalidArgument(
            f"workflow {workflow.name!r}: {len(specs)} jobs: expected at most {MAX_NODES}"
        )
    keys: dict[str, int] = {}
    jobs: list[NewJob] = []
    edges: list[tuple[int, int, str, bool]] = []
    waiting_on: list[int] = []
    correlation_id = current_correlation_id() or str(workflow_id)
    for index, spec in enumerate(specs):
        job = _check_node(index, spec, keys)
        parent_keys = {specs[p].key for p, _ in spec.parents}
        taken = placeholder_nodes(spec.job.get("payload"))
        unknown = sorted(taken - parent_keys)
        if unknown:
            raise InvalidArgument(
                f"workflow node {spec.key!r}: its payload takes the result of {unknown[0]!r}, "
                "which is not one of its parents"
            )
        keys[spec.key] = index
        if job.correlation_id is None:
            job = dataclasses.replace(job, correlation_id=correlation_id)
        jobs.append(job)
        edges.extend(
            (p, index, FailurePolicy(policy).value, specs[p].key in taken)
            for p, policy in spec.parents
        )
        waiting_on.append(len(spec.parents))
    rows = bulk.check(
        jobs,
        dialect=ctx.dialect,
        max_payload_bytes=ctx.max_payload_bytes,
        meta=meta,
        require_correlation_id=False,
    )
    return _Checked(rows, edges, waiting_on)


def enqueue_workflow(ctx: Ctx, workflow: WorkflowSpec, *, conn: Any = None) -> Plan[uuid.UUID]:
    """Insert a workflow (`jobvisor.Workflow`) whole, in one transaction: its
    jobs by COPY on PostgreSQL (executemany on SQLite), a job with parents
    `waiting`, the others `pending`. Returns the workflow's id. With `conn`,
    in the caller's transaction: the workflow exists if and only if the
    caller commits. Its jobs share a correlation id: the context's, else the
    workflow's id. `InvalidArgument` (nothing written) for a bad name, node,
    option or parent."""
    one_database(ctx, "enqueue_workflow")
    (workflow_id,) = new_job_ids(1)
    checked = _check(ctx, workflow, workflow_id)
    return Plan(_insert(ctx, workflow, workflow_id, checked), conn=conn)


def enqueue_workflow_once(
    ctx: Ctx, job_id: uuid.UUID | str, workflow: WorkflowSpec, *, meta: Mapping[str, Any]
) -> Plan[uuid.UUID]:
    """Insert `workflow` as the one workflow the job `job_id` starts (a
    schedule's tick: `jobvisor.worker.workflow_ticks`), each of its jobs
    with `meta`: in one transaction, the job's `meta.workflow` is set to the
    new workflow's id, only where it holds none, and the workflow goes in.
    A job that started one already (an attempt run again after a crash, two
    workers on one tick) writes nothing and gets that workflow's id, so a
    job starts one workflow however often it runs. `JobNotFound` for no
    such job; `InvalidArgument` (nothing written) as `enqueue_workflow`."""
    one_database(ctx, "a schedule's workflow")
    jid = _job_id(job_id)
    (workflow_id,) = new_job_ids(1)
    checked = _check(ctx, workflow, workflow_id, ctx.dialect.meta(dict(meta)))
    d = ctx.dialect
    sql = _workflow_sql(d.name)

    def steps() -> Steps[uuid.UUID]:
        mark = {"id": d.id(jid), "workflow": str(workflow_id)}
        if (yield Stmt(sql.WORKFLOW_START_MARK, mark, fetch="one")) is None:
            row = yield Stmt(sql.WORKFLOW_STARTED_BY, {"id": d.id(jid)}, fetch="one")
            if row is None:
                raise JobNotFound(jid)
            return uuid.UUID(str(row[0]))
        return (yield from _insert(ctx, workflow, workflow_id, checked))

    return Plan(steps())


def _insert(
    ctx: Ctx, workflow: WorkflowSpec, workflow_id: uuid.UUID, checked: _Checked
) -> Steps[uuid.UUID]:
    """The statements of a checked workflow's insert."""
    specs = list(workflow.specs)
    d = ctx.dialect
    sql = _workflow_sql(d.name)
    (now,) = yield Stmt(d.sql.CLOCK_NOW, {"now": ctx.now()}, fetch="one")
    rows = checked.rows
    rows.timed(d, now)
    wid = d.id(workflow_id)
    for index, row in enumerate(rows.rows):
        waiting = checked.waiting_on[index]
        status = JobStatus.WAITING if waiting else JobStatus.PENDING
        row.extend((wid, specs[index].key, status.value, waiting))
    yield Stmt(sql.WORKFLOW_INSERT, {"id": wid, "name": workflow.name, "now": now})
    yield Stmt(
        sql.WORKFLOW_JOBS_COPY,
        fetch="copy",
        rows=rows.rows,
        types=(*d.copy_types, "uuid", "text", "text", "int4") if d.copy_types else (),
    )
    if checked.edges:
        ids = rows.ids
        edges = [
            [wid, d.id(ids[parent]), d.id(ids[child]), policy, takes]
            for parent, child, policy, takes in checked.edges
        ]
        types = ("uuid", "uuid", "uuid", "text", "bool") if d.copy_types else ()
        yield Stmt(sql.WORKFLOW_EDGES_COPY, fetch="copy", rows=edges, types=types)
    if d.notifies:
        queues = {row[bulk.QUEUE] for i, row in enumerate(rows.rows) if not checked.waiting_on[i]}
        for queue in sorted(queues):
            yield Stmt(d.sql.JOB_NOTIFY, {"queue": queue}, fetch="all")
    return workflow_id


# --- reading, cancelling, retrying ---------------------------------------------


def _time_out(ctx: Ctx, value: Any) -> dt.datetime | None:
    if value is None or isinstance(value, dt.datetime):
        return value
    return dt.datetime.fromtimestamp(value, UTC)


def _json_out(ctx: Ctx, value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) and ctx.dialect.name == "sqlite" else value


def workflow(ctx: Ctx, workflow_id: uuid.UUID | str) -> Plan[WorkflowStatus]:
    """A workflow's status: its name, and each job with its node key, status,
    attempts, result, last error and parents. `WorkflowNotFound` if there is
    no such workflow (or cleanup removed it)."""
    wid = uuid_of("workflow id", workflow_id)
    d = ctx.dialect
    sql = _workflow_sql(d.name)

    def steps() -> Steps[WorkflowStatus]:
        params = {"id": d.id(wid)}
        head = yield Stmt(sql.WORKFLOW_GET, params, fetch="one")
        if head is None:
            raise WorkflowNotFound(wid)
        rows = yield Stmt(sql.WORKFLOW_JOB_LIST, params, fetch="all")
        edges = yield Stmt(sql.WORKFLOW_EDGE_LIST, params, fetch="all")
        nodes = {d.id_out(row[0]): row[1] for row in rows}
        parents: dict[uuid.UUID, list[str]] = {}
        for parent, child, _ in edges:
            parents.setdefault(d.id_out(child), []).append(nodes[d.id_out(parent)])
        jobs = []
        for job_id, node, job_type, status, attempts, result, error, finished in rows:
            jid = d.id_out(job_id)
            jobs.append(
                WorkflowJob(
                    jid,
                    node,
                    job_type,
                    JobStatus(status),
                    attempts,
                    _json_out(ctx, result),
                    error,
                    _time_out(ctx, finished),
                    tuple(sorted(parents.get(jid, ()))),
                )
            )
        created = _time_out(ctx, head[1])
        assert created is not None
        return WorkflowStatus(wid, head[0], created, tuple(jobs))

    return Plan(steps(), write=False, transaction=False)


def cancel_workflow(
    ctx: Ctx, workflow_id: uuid.UUID | str, *, reason: str | None = None
) -> Plan[int]:
    """Cancel every unfinished job of a workflow: waiting, pending and
    retryable ones now; a running one's worker is asked to stop it, and it
    ends cancelled when it settles (as `cancel` does). Returns how many jobs
    were cancelled or asked to stop; `WorkflowNotFound` if there is no such
    workflow."""
    wid = uuid_of("workflow id", workflow_id)
    text = (
        f"cancelled by {_requester()}"
        if reason is None
        else validate.text("reason", reason, max_bytes=validate.MAX_KEY_BYTES)
    )
    d = ctx.dialect
    sql = _workflow_sql(d.name)

    def steps() -> Steps[int]:
        params = {"id": d.id(wid)}
        if (yield Stmt(sql.WORKFLOW_GET, params, fetch="one")) is None:
            raise WorkflowNotFound(wid)
        params.update(error=text, now=ctx.now())
        rows = yield Stmt(sql.WORKFLOW_CANCEL, params, fetch="all")
        return len(rows)

    return Plan(steps())


def retry_workflow(ctx: Ctx, workflow_id: uuid.UUID | str) -> Plan[int]:
    """Start a workflow's failed part again: its dead and cancelled jobs, and
    the jobs not yet running that went on after one of them failed, go back
    to `waiting` (or `pending` when every parent of theirs has completed),
    their attempts reset. Completed jobs keep their results, which their
    children have already. A job that went on and is running still finishes
    its attempt; should that attempt not complete, it waits for its restarted
    parents like the rest. Returns how many jobs were requeued (0: nothing
    had failed); `WorkflowNotFound` if there is no such workflow."""
    wid = uuid_of("workflow id", workflow_id)
    d = ctx.dialect
    sql = _workflow_sql(d.name)

    def steps() -> Steps[int]:
        params = {"id": d.id(wid)}
        if (yield Stmt(sql.WORKFLOW_GET, params, fetch="one")) is None:
            raise WorkflowNotFound(wid)
        yield Stmt(sql.WORKFLOW_LOCK, params, fetch="all")
        picked = yield Stmt(sql.WORKFLOW_RETRY_PICK, params, fetch="all")
        if not picked:
            return 0
        ids = [d.id_out(row[0]) for row in picked]
        if d.name == "sqlite":
            id_param: Any = json.dumps([str(i) for i in ids])
        else:
            id_param = ids
        yield Stmt(sql.WORKFLOW_RETRY_EDGES, {"ids": id_param})
        yield Stmt(sql.WORKFLOW_RETRY_HOLD_JOBS, {"ids": id_param})
        yield Stmt(sql.WORKFLOW_RETRY_HOLD_EDGES, {"ids": id_param})
        queues = yield Stmt(sql.WORKFLOW_RETRY_JOBS, {"ids": id_param, "now": ctx.now()}, "all")
        if d.notifies:
            for queue in sorted({row[0] for row in queues}):
                yield Stmt(d.sql.JOB_NOTIFY, {"queue": queue}, fetch="all")
        return len(queues)

    return Plan(steps())


# --- the dashboard's and the service's reads -------------------------------------

WORKFLOW_PAGE_DEFAULT: Final = 50
WORKFLOW_PAGE_MAX: Final = 500


class WorkflowState(enum.StrEnum):
    """Where a workflow stands, from its jobs' statuses."""

    ACTIVE = "active"  # a job of it has not finished (waiting, pending, retryable, running)
    COMPLETED = "completed"  # every job of it completed
    FAILED = "failed"  # every job finished, one or more dead or cancelled


def state_of(counts: Mapping[JobStatus, int]) -> WorkflowState:
    """The state of a workflow whose jobs have these counts by status."""
    if any(n for status, n in counts.items() if status not in TERMINAL):
        return WorkflowState.ACTIVE
    if any(n for status, n in counts.items() if status is not JobStatus.COMPLETED):
        return WorkflowState.FAILED
    return WorkflowState.COMPLETED


@dataclasses.dataclass(frozen=True, slots=True)
class WorkflowListing:
    """A workflow as a list shows it: its name, when it was enqueued, and
    its jobs by status (statuses with none left out)."""

    id: uuid.UUID
    name: str
    created_at: dt.datetime
    counts: Mapping[JobStatus, int]

    @property
    def state(self) -> WorkflowState:
        return state_of(self.counts)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclasses.dataclass(frozen=True, slots=True)
class WorkflowPage:
    """One page of workflows, newest first, and the cursor of the next
    (None: this is the last)."""

    workflows: tuple[WorkflowListing, ...]
    next_cursor: str | None


def workflow_page(
    ctx: Ctx, *, cursor: str | None = None, limit: int = WORKFLOW_PAGE_DEFAULT
) -> Plan[WorkflowPage]:
    """A page of at most `limit` workflows (up to `WORKFLOW_PAGE_MAX`), newest
    first, after `cursor` (the page before's `next_cursor`; None or "" for
    the first): a walk of the workflows' primary key backwards (their ids
    are time-ordered), then one count of the listed workflows' jobs by
    status over the workflow index. A cursor that is no workflow id or a
    limit out of range raises `InvalidArgument`."""
    validate.count("limit", limit, high=WORKFLOW_PAGE_MAX)
    d = ctx.dialect
    sql = _workflow_sql(d.name)
    before: Any = None
    if cursor:
        try:
            before = d.id(uuid.UUID(cursor))
        except ValueError:
            raise InvalidArgument(f"cursor={cursor!r}: expected a workflow id") from None

    def steps() -> Steps[WorkflowPage]:
        rows = yield Stmt(sql.WORKFLOW_PAGE, {"before": before, "limit": limit + 1}, "all")
        more = len(rows) > limit
        rows = rows[:limit]
        ids = [d.id_out(row[0]) for row in rows]
        counts: dict[uuid.UUID, dict[JobStatus, int]] = {i: {} for i in ids}
        if ids:
            id_param: Any = json.dumps([str(i) for i in ids]) if d.name == "sqlite" else ids
            found = yield Stmt(sql.WORKFLOW_COUNTS_OF, {"ids": id_param}, fetch="all")
            for wid, status, n in found:
                counts[d.id_out(wid)][JobStatus(status)] = int(n)
        listed = []
        for (_, name, created), wid in zip(rows, ids, strict=True):
            when = _time_out(ctx, created)
            assert when is not None
            listed.append(WorkflowListing(wid, name, when, counts[wid]))
        return WorkflowPage(tuple(listed), str(ids[-1]) if more else None)

    return Plan(steps(), write=False, transaction=False)


def workflow_of_job(ctx: Ctx, job_id: uuid.UUID | str) -> Plan[tuple[uuid.UUID, str] | None]:
    """The workflow a job belongs to and its node key; None for a job of no
    workflow, or no such job."""
    jid = _job_id(job_id)
    d = ctx.dialect
    sql = _workflow_sql(d.name)

    def steps() -> Steps[tuple[uuid.UUID, str] | None]:
        row = yield Stmt(sql.WORKFLOW_OF_JOB, {"id": d.id(jid)}, fetch="one")
        if row is None or row[0] is None:
            return None
        return d.id_out(row[0]), str(row[1])

    return Plan(steps(), write=False, transaction=False)


def workflow_states(ctx: Ctx) -> Plan[dict[WorkflowState, int]]:
    """How many workflows are in each state (every state present, 0 for
    none), from their jobs: one pass over the workflow index."""
    d = ctx.dialect
    sql = _workflow_sql(d.name)

    def steps() -> Steps[dict[WorkflowState, int]]:
        rows = yield Stmt(sql.WORKFLOW_STATE_COUNTS, {}, fetch="all")
        found = {WorkflowState(state): int(n) for state, n in rows}
        return {state: found.get(state, 0) for state in WorkflowState}

    return Plan(steps(), write=False, transaction=False)
