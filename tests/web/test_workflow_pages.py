"""Workflows and batches on the dashboard, on both engines: the workflow
list and page (counts, the graph with a node per job coloured by status, the
failed node named), every name escaped, cancel and retry behind the token
(pages and API), and a batch's progress and members."""

from __future__ import annotations

import json
import re
import uuid

import jobvisor
from jobvisor import JobStatus, Queue
from jobvisor.queue.internal import dashboard_ops
from jobvisor.queue.workflows import WorkflowState
from jobvisor.web import views
from tests.support.invariants import assert_invariants
from tests.support.web import TOKEN, Browser

EVIL = "<script>alert('wf')</script>"


def diamond(queue: Queue, name: str = "nightly", job_type: str = "step") -> uuid.UUID:
    """a -> (b, c) -> d, each a job of `job_type` with one attempt."""
    wf = jobvisor.Workflow(name)
    a = wf.add(job_type, {"n": 1}, max_attempts=1, queue="wf")
    b = wf.add(job_type, {"x": a.result}, max_attempts=1, queue="wf")
    c = wf.add(job_type, {"y": a.result}, max_attempts=1, queue="wf")
    wf.add(job_type, {"both": [b.result, c.result]}, max_attempts=1, queue="wf")
    return queue.enqueue_workflow(wf)


def settle(queue: Queue, *, fail: int = 0) -> None:
    """Claim the workflow's claimable jobs once: fail the first `fail`,
    complete the rest."""
    for job in queue.claim("w-test", limit=10, queues=["wf"]):
        if fail:
            queue.fail(job, f"ValueError: {EVIL}")
            fail -= 1
        else:
            queue.complete(job, {"ok": True})


def nodes(page: str) -> dict[str, str]:
    """The graph's nodes: node key -> status."""
    graph = re.search(r'<svg class="graph" id="graph".*?</svg>', page, re.S)
    assert graph is not None, page
    return dict(re.findall(r'data-node="([^"]+)" data-status="([^"]+)"', graph.group(0)))


def test_a_workflow_page_draws_its_graph_by_status_and_names_the_failed_node(
    dashboard: Browser, queue: Queue
) -> None:
    wid = diamond(queue)
    settle(queue)  # a completes
    settle(queue, fail=1)  # b dies, c completes; d is cancelled with b
    status, page = dashboard.get(f"/workflows/{wid}")
    assert status == 200
    wf = queue.workflow(wid)
    by_node = {j.node: j for j in wf.jobs}
    statuses = {j.node: j.status.value for j in wf.jobs}
    assert sorted(statuses.values()) == ["cancelled", "completed", "completed", "dead"]
    assert nodes(page) == statuses
    assert page.count('<line class="edge"') == 4
    dead = next(j for j in wf.jobs if j.status is JobStatus.DEAD)
    failed = re.search(r'<ul id="failed">(.*?)</ul>', page, re.S)
    assert failed is not None and f"/jobs/{dead.id}" in failed.group(1)
    assert f'<g class="node dead failed" data-node="{dead.node}"' in page
    counts = re.search(r'<table class="fields" id="counts">(.*?)</table>', page, re.S)
    assert counts is not None
    assert re.search(r'data-status="completed">.*?<td class="num">2</td>', counts.group(1))
    for job in by_node.values():
        assert f'href="/jobs/{job.id}"' in page
    assert 'id="workflow-state">failed<' in page
    _, listing = dashboard.get("/workflows")
    assert f"/workflows/{wid}" in listing and 'data-state="failed"' in listing
    _, job_page = dashboard.get(f"/jobs/{dead.id}")
    assert f'href="/workflows/{wid}" id="workflow-link"' in job_page
    assert dashboard.get(f"/workflows/{uuid.uuid4()}")[0] == 404
    assert dashboard.get("/workflows/not-an-id")[0] == 404


def test_graph_depths_follow_the_longest_path_from_a_root(queue: Queue) -> None:
    wf = jobvisor.Workflow("depths")
    a = wf.add("s", {})
    b = wf.add("s", {"a": a.result})
    wf.add("s", {"a": a.result, "b": b.result})  # depth 2, not 1
    wf.add("s", {})
    wid = queue.enqueue_workflow(wf)
    jobs = queue.workflow(wid).jobs
    assert list(views.depths(jobs).values()) == [0, 1, 2, 0]


def test_hostile_names_are_escaped_on_every_workflow_page(dashboard: Browser, queue: Queue) -> None:
    wid = diamond(queue, name=EVIL, job_type=EVIL)
    settle(queue, fail=1)
    pages = [f"/workflows/{wid}", "/workflows", f"/api/workflows/{wid}"]
    for path in pages[:2]:
        status, page = dashboard.get(path)
        assert status == 200, path
        assert "<script>alert" not in page, path
        assert "&lt;script&gt;alert(" in page, path
    _, page = dashboard.get(pages[0])
    graph = re.search(r"<svg.*?</svg>", page, re.S)
    assert graph is not None and "<script" not in graph.group(0)
    status, text, headers = dashboard.request(pages[2])  # JSON, never read as markup
    assert status == 200 and headers["content-type"] == "application/json"
    assert json.loads(text)["name"] == EVIL


def test_workflow_actions_are_refused_without_the_token(
    read_only: Browser, queue: Queue, url: str
) -> None:
    wid = diamond(queue)
    _, page = read_only.get(f"/workflows/{wid}")
    assert 'data-action="cancel-workflow"' not in page
    status, page = read_only.post(
        "/actions/cancel-workflow", csrf=read_only.csrf(), workflow=str(wid), confirmed="1"
    )
    assert status == 403 and "set JOBVISOR_ADMIN_TOKEN" in page
    status, answer = read_only.api("/api/actions/cancel-workflow", {"workflow": str(wid)})
    assert status == 403 and "read-only" in answer["error"]
    assert JobStatus.CANCELLED not in queue.workflow(wid).counts
    assert_invariants(url)


def test_cancel_then_retry_a_workflow_from_its_page(
    dashboard: Browser, queue: Queue, url: str
) -> None:
    wid = diamond(queue)
    path = f"/workflows/{wid}"
    status, page = dashboard.post(
        "/actions/cancel-workflow", csrf=dashboard.csrf(path), workflow=str(wid), confirmed="1"
    )
    assert status == 403 and "log in first" in page
    assert queue.workflow(wid).counts == {JobStatus.PENDING: 1, JobStatus.WAITING: 3}
    dashboard.log_in()
    csrf = dashboard.csrf(path)
    _, page = dashboard.get(path)
    assert 'data-action="cancel-workflow"' in page and 'data-action="retry-workflow"' not in page
    status, page = dashboard.post(
        "/actions/cancel-workflow", csrf=csrf, workflow=str(wid), next=path
    )
    assert status == 200 and f"Cancel workflow {wid}" in page and 'name="confirmed"' in page
    assert JobStatus.CANCELLED not in queue.workflow(wid).counts  # asked, not done
    status, page = dashboard.post(
        "/actions/cancel-workflow", csrf=csrf, workflow=str(wid), confirmed="1", next=path
    )
    assert status == 200 and f"Cancelled 4 jobs of workflow {wid} (" in page
    assert queue.workflow(wid).counts == {JobStatus.CANCELLED: 4}
    assert set(nodes(page).values()) == {"cancelled"}
    assert 'data-action="retry-workflow"' in page
    status, page = dashboard.post(
        "/actions/retry-workflow", csrf=csrf, workflow=str(wid), confirmed="1", next=path
    )
    assert status == 200 and f"Requeued 4 jobs of workflow {wid}." in page
    assert queue.workflow(wid).counts == {JobStatus.PENDING: 1, JobStatus.WAITING: 3}
    status, page = dashboard.post(
        "/actions/retry-workflow", csrf=csrf, workflow="nope", confirmed="1", next=path
    )
    assert status == 400 and "workflow=&#39;nope&#39;: expected a workflow id" in page
    status, page = dashboard.post(
        "/actions/cancel-workflow", csrf=csrf, workflow=str(uuid.uuid4()), confirmed="1"
    )
    assert status == 409 and "not found" in page
    assert_invariants(url)


def test_the_api_cancels_and_retries_a_workflow_with_the_bearer_token(
    dashboard: Browser, queue: Queue, url: str
) -> None:
    wid = diamond(queue)
    body = {"workflow": str(wid)}
    assert dashboard.api("/api/actions/cancel-workflow", body)[0] == 401
    assert dashboard.api("/api/actions/cancel-workflow", body, token="wrong-" * 5)[0] == 401
    assert JobStatus.CANCELLED not in queue.workflow(wid).counts
    status, answer = dashboard.api("/api/actions/cancel-workflow", body, token=TOKEN)
    assert (status, answer["count"]) == (200, 4)
    status, answer = dashboard.api("/api/actions/retry-workflow", body, token=TOKEN)
    assert (status, answer["count"]) == (200, 4)
    status, answer = dashboard.api("/api/actions/retry-workflow", body, token=TOKEN)
    assert status == 200 and answer["count"] == 0 and "Nothing to retry" in answer["done"]
    status, answer = dashboard.api(
        "/api/actions/retry-workflow", {"workflow": str(wid), "ids": [str(wid)]}, token=TOKEN
    )
    assert status == 400 and "expected workflow" in answer["error"]
    status, text, _ = dashboard.request(f"/api/workflows/{wid}")
    assert status == 200 and '"state": "active"' in text
    assert_invariants(url)


def test_the_workflow_list_pages_newest_first(dashboard: Browser, queue: Queue) -> None:
    ids = [diamond(queue, name=f"wf-{n}") for n in range(3)]
    page = dashboard_ops(queue).workflow_page(limit=2)
    assert [w.id for w in page.workflows] == ids[::-1][:2]
    assert page.workflows[0].state is WorkflowState.ACTIVE and page.workflows[0].total == 4
    assert page.next_cursor is not None
    second = dashboard_ops(queue).workflow_page(cursor=page.next_cursor, limit=2)
    assert [w.id for w in second.workflows] == [ids[0]] and second.next_cursor is None
    status, text = dashboard.get("/workflows?cursor=junk")
    assert status == 400 and "cursor=&#39;junk&#39;: expected a workflow id" in text
    status, text, _ = dashboard.request("/api/workflows?limit=2")
    assert status == 200 and str(ids[2]) in text and str(ids[0]) not in text


def test_a_batch_page_shows_progress_callbacks_and_members_by_page(
    dashboard: Browser, queue: Queue
) -> None:
    with queue.batch(on_finish="done", on_failure="bad", meta={"note": EVIL}) as b:
        ids = b.enqueue_many(
            [{"job_type": EVIL, "payload": {"n": i}, "max_attempts": 1} for i in range(60)]
        )
    status, page = dashboard.get(f"/batches/{b.id}")
    assert status == 200 and "0 of 60 finished" in page and 'id="batch-state">closed<' in page
    assert "<script>alert" not in page and "&lt;script&gt;alert(" in page
    for n, job in enumerate(queue.claim("w-test", limit=60)):
        if n == 0:
            queue.fail(job, "ValueError: no")
        else:
            queue.complete(job, {"n": n})
    status, page = dashboard.get(f"/batches/{b.id}")
    assert "60 of 60 finished" in page and 'id="batch-state">finished<' in page
    assert '<progress max="60" value="60">' in page
    callbacks = re.search(r'<ul id="callbacks">(.*?)</ul>', page, re.S)
    assert callbacks is not None
    for kind, job_id in queue.get_batch(b.id).callbacks.items():
        assert kind in callbacks.group(1) and f"/jobs/{job_id}" in callbacks.group(1)
    members = re.search(r'<table class="grid" id="members">(.*?)</table>', page, re.S)
    assert members is not None and members.group(1).count("<tr data-status=") == 50
    match = re.search(r'href="(/batches/[^"]+cursor=[^"]+)" id="next-page"', page)
    assert match is not None
    _, second = dashboard.get(match.group(1))
    assert str(ids[-1]) in second and 'id="next-page"' not in second
    _, member = dashboard.get(f"/jobs/{ids[0]}")
    assert f'href="/batches/{b.id}" id="batch-link"' in member
    assert dashboard.get(f"/batches/{uuid.uuid4()}")[0] == 404
    status, text, _ = dashboard.request(f"/api/batches/{b.id}")
    assert status == 200 and '"total": 60' in text
