"""`jobvisor workflow show/cancel/retry` through the real console script, on
both engines: what each prints and does, --json, and unknown and malformed
ids."""

from __future__ import annotations

import json
import uuid

import pytest

import jobvisor
from jobvisor import Job, JobStatus, Queue
from tests.support.cli import Cli
from tests.support.invariants import assert_invariants
from tests.support.wait import wait_until

ERROR = "bad row 7\x1b]0;owned\x07\nTraceback, second line"


def _claim(q: Queue, job_type: str) -> Job:
    """The one job of `job_type`, once claimable (a bounded poll: a child
    just made pending may be passed by a claim for a moment)."""
    jobs: list[Job] = []

    def claimed() -> bool:
        jobs.extend(q.claim("w-test", job_types=[job_type], limit=1))
        return bool(jobs)

    wait_until(claimed, what=f"a claimable {job_type} job")
    return jobs[0]


def _failed_workflow(db: Queue) -> uuid.UUID:
    """fetch -> parse -> store: fetch completed, parse dead with a two-line
    error holding a terminal escape, store cancelled after it."""
    wf = jobvisor.Workflow("nightly")
    fetch = wf.add("fetch", {"day": 1})
    parse = wf.add("parse", {"rows": fetch.result}, max_attempts=1)
    wf.add("store", {"parsed": parse.result})
    wid = db.enqueue_workflow(wf)
    db.complete(_claim(db, "fetch"), result=[1, 2])
    db.fail(_claim(db, "parse"), ERROR)
    statuses = {job.node: job.status for job in db.workflow(wid).jobs}
    assert statuses == {
        "fetch": JobStatus.COMPLETED, "parse": JobStatus.DEAD, "store": JobStatus.CANCELLED,
    }  # fmt: skip
    return wid


def _row(out: str, node: str) -> str:
    (line,) = [line for line in out.splitlines() if line.startswith(node + " ")]
    return line


def test_workflow_show_prints_counts_and_each_job(cli: Cli, db: Queue) -> None:
    wid = _failed_workflow(db)
    out = cli.ok("workflow", "show", str(wid))
    assert out.startswith(f"workflow {wid} nightly: finished, 3 jobs, created ")
    for status in ("completed", "dead", "cancelled"):
        assert f"  {status + ':':<12}1\n" in out
    parse = _row(out, "parse")
    parse_job = db.workflow(wid).job("parse")
    assert str(parse_job.id) in parse
    assert " dead " in parse and " fetch " in parse
    assert parse.endswith("bad row 7\\x1b]0;owned\\x07")  # escaped, its first line only
    assert "\x1b" not in out and "\x07" not in out and "second line" not in out
    store = _row(out, "store")
    assert " cancelled " in store and " parse " in store
    assert " - " in _row(out, "fetch")  # no parents, no error

    data = json.loads(cli.ok("workflow", "show", str(wid), "--json"))
    assert (data["id"], data["name"], data["finished"]) == (str(wid), "nightly", True)
    assert data["counts"] == {"completed": 1, "dead": 1, "cancelled": 1}
    assert [j["node"] for j in data["jobs"]] == ["fetch", "parse", "store"]
    jobs = {j["node"]: j for j in data["jobs"]}
    assert jobs["fetch"]["result"] == [1, 2] and jobs["fetch"]["parents"] == []
    assert jobs["parse"]["last_error"].startswith("bad row 7")
    assert (jobs["parse"]["attempts"], jobs["parse"]["status"]) == (1, "dead")
    assert jobs["store"]["parents"] == ["parse"]


def test_workflow_show_of_a_new_workflow(cli: Cli, db: Queue) -> None:
    wf = jobvisor.Workflow("fresh")
    first = wf.add("a")
    wf.add("b", after=[first])
    wid = db.enqueue_workflow(wf)
    out = cli.ok("workflow", "show", str(wid))
    assert out.startswith(f"workflow {wid} fresh: unfinished, 2 jobs, created ")
    assert "  pending:    1\n  waiting:    1\n" in out
    data = json.loads(cli.ok("workflow", "show", str(wid), "--json"))
    assert data["counts"] == {"pending": 1, "waiting": 1} and data["finished"] is False


def test_workflow_retry_then_cancel(cli: Cli, db: Queue) -> None:
    wid = _failed_workflow(db)
    assert cli.ok("workflow", "retry", str(wid)) == f"requeued 2 jobs of workflow {wid}\n"
    status = db.workflow(wid)
    assert status.job("fetch").status is JobStatus.COMPLETED
    assert status.job("parse").status is JobStatus.PENDING
    assert status.job("store").status is JobStatus.WAITING
    assert cli.ok("workflow", "retry", str(wid)) == (
        f"workflow {wid} has no dead or cancelled job: nothing to retry\n"
    )

    out = cli.ok("workflow", "cancel", str(wid), "--reason", "wrong day")
    assert out.startswith(f"cancelled 2 jobs of workflow {wid} ")
    status = db.workflow(wid)
    assert [j.status for j in status.jobs] == [
        JobStatus.COMPLETED, JobStatus.CANCELLED, JobStatus.CANCELLED,
    ]  # fmt: skip
    assert "wrong day" in (status.job("parse").last_error or "")
    assert cli.ok("workflow", "cancel", str(wid)) == (
        f"workflow {wid} has no unfinished job: nothing to cancel\n"
    )
    assert_invariants(cli.url)


@pytest.mark.parametrize("action", ["show", "cancel", "retry"])
def test_workflow_ids_unknown_and_malformed(cli: Cli, db: Queue, action: str) -> None:
    wid = _failed_workflow(db)
    before = db.workflow(wid)
    unknown = uuid.uuid4()
    missing = cli("workflow", action, str(unknown))
    assert missing.code == 1, missing
    assert missing.out == ""
    assert missing.err == f"jobvisor workflow {action}: error: workflow {unknown} not found\n"
    bad = cli("workflow", action, "not-a-uuid")
    assert bad.code == 2, bad
    assert bad.err == (
        f"jobvisor workflow {action}: error: workflow id 'not-a-uuid': expected a UUID\n"
    )
    assert db.workflow(wid) == before  # nothing written
