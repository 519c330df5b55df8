"""The `workflow` group: `workflow show` (a workflow's counts by status and
each job with its node, status, attempts, parents and last error),
`workflow cancel` and `workflow retry` (`Queue.workflow`,
`Queue.cancel_workflow`, `Queue.retry_workflow`).
"""

from __future__ import annotations

import argparse
import uuid
from typing import Any

from ..config import Config
from ..queue import JobStatus, validate
from ..queue.workflows import WorkflowJob, WorkflowStatus
from .args import _database_flag, _no_op, _Parser, _subcommand
from .common import EXIT_OK, UsageError, _queue
from .output import _one_line, _print_json, _table, _when

ERROR_WIDTH = 60


def _workflow_id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise UsageError(f"workflow id {text!r}: expected a UUID") from None


def _counts(status: WorkflowStatus) -> dict[str, int]:
    """Its jobs' counts by status, in `JobStatus` order (none left out)."""
    counts = status.counts
    return {s.value: counts[s] for s in JobStatus if s in counts}


def _first_line(text: str | None) -> str:
    lines = (text or "").strip().splitlines()
    return _one_line(lines[0] if lines else None, ERROR_WIDTH)


def _job_json(job: WorkflowJob) -> dict[str, Any]:
    return {
        "id": str(job.id),
        "node": job.node,
        "job_type": job.job_type,
        "status": job.status.value,
        "attempts": job.attempts,
        "parents": list(job.parents),
        "last_error": job.last_error,
        "result": job.result,
        "finished_at": job.finished_at,
    }


def cmd_workflow_show(args: argparse.Namespace, config: Config) -> int:
    """A workflow: its name, counts by status, and each job in the order
    added, with its last error's first line (`jobvisor show ID` for all)."""
    workflow_id = _workflow_id(args.id)
    with _queue(config) as q:
        status = q.workflow(workflow_id)
    if args.json:
        _print_json(
            {
                "id": str(status.id),
                "name": status.name,
                "created_at": status.created_at,
                "finished": status.finished,
                "counts": _counts(status),
                "jobs": [_job_json(job) for job in status.jobs],
            }
        )
        return EXIT_OK
    state = "finished" if status.finished else "unfinished"
    total = len(status.jobs)
    print(
        f"workflow {status.id} {validate.printable(status.name)}: {state}, "
        f"{total} job{'s' if total != 1 else ''}, created {_when(status.created_at)}"
    )
    for name, count in _counts(status).items():
        print(f"  {name + ':':<12}{count}")
    print()
    rows = [
        [
            job.node,
            str(job.id),
            job.job_type,
            job.status.value,
            str(job.attempts),
            ",".join(job.parents) or "-",
            _first_line(job.last_error),
        ]
        for job in status.jobs
    ]
    print(_table(["node", "id", "type", "status", "attempts", "parents", "last error"], rows))
    return EXIT_OK


def cmd_workflow_cancel(args: argparse.Namespace, config: Config) -> int:
    """Cancel every unfinished job of a workflow; a running one's worker is
    asked to stop it."""
    workflow_id = _workflow_id(args.id)
    with _queue(config) as q:
        done = q.cancel_workflow(workflow_id, reason=args.reason)
    if done:
        print(
            f"cancelled {done} job{'s' if done != 1 else ''} of workflow {workflow_id} "
            "(a running one's worker stops it)"
        )
    else:
        print(f"workflow {workflow_id} has no unfinished job: nothing to cancel")
    return EXIT_OK


def cmd_workflow_retry(args: argparse.Namespace, config: Config) -> int:
    """Requeue a workflow's dead and cancelled jobs and those that went on
    after them; completed jobs keep their results."""
    workflow_id = _workflow_id(args.id)
    with _queue(config) as q:
        done = q.retry_workflow(workflow_id)
    if done:
        print(f"requeued {done} job{'s' if done != 1 else ''} of workflow {workflow_id}")
    else:
        print(f"workflow {workflow_id} has no dead or cancelled job: nothing to retry")
    return EXIT_OK


def add_workflow(commands: Any) -> None:
    """Add `jobvisor workflow` to the top-level parser."""
    workflow = _subcommand(
        commands, "workflow", "inspect, cancel or retry a workflow (`Queue.workflow`)", _no_op
    )
    actions = workflow.add_subparsers(
        dest="workflow_command", metavar="ACTION", parser_class=_Parser
    )
    actions.required = True
    show = _subcommand(
        actions,
        "show",
        "one workflow: counts by status; each job's node, status, attempts, parents, last error",
        cmd_workflow_show,
    )
    cancel = _subcommand(
        actions,
        "cancel",
        "cancel every unfinished job of a workflow; a running job's worker is asked to stop it",
        cmd_workflow_cancel,
    )
    retry = _subcommand(
        actions,
        "retry",
        "requeue a workflow's dead and cancelled jobs and those that went on after them",
        cmd_workflow_retry,
    )
    for sub in (show, cancel, retry):
        _database_flag(sub)
        sub.add_argument("id", metavar="ID", help="the workflow's id")
    show.add_argument("--json", action="store_true", help="a JSON object")
    cancel.add_argument("--reason", metavar="TEXT", help="why, kept in each job's last error")
