"""The dashboard over HTTP, on both engines: what each page shows, that
every value is escaped, and that actions need the token, a login and the
CSRF token, ask for confirmation and say what they did."""

from __future__ import annotations

import re
import uuid

import pytest

from jobvisor import JobStatus, Queue
from jobvisor.queue.fleet import SupervisorBeat
from jobvisor.queue.internal import dashboard_ops, service_ops
from jobvisor.schedules import ScheduleSpec
from jobvisor.web import views
from tests.support.invariants import assert_invariants
from tests.support.web import TOKEN, Browser, mounted, serving


def dead_job(queue: Queue, job_type: str = "boom", payload: object = None) -> uuid.UUID:
    """A job that failed its only attempt."""
    job_id = queue.enqueue(job_type, payload or {}, max_attempts=1, queue="dead-end")
    (job,) = queue.claim("w-test", queues=["dead-end"])
    queue.fail(job, "ValueError: no such account")
    return job_id


def test_the_overview_shows_queues_the_chart_and_the_fleet(
    dashboard: Browser, queue: Queue
) -> None:
    queue.enqueue_many([{"job_type": "send", "queue": "mail"}] * 3)
    dead_job(queue)
    queue.pause("mail")
    queue.set_limit(queue="mail", concurrency=3, rate="20/s")
    queue.set_limit(job_type="send", concurrency=5)
    workers = [{"id": "w-abc", "pid": 4242, "slot": 0, "restarts": 2}]
    service_ops(queue).supervisor_heartbeat(
        SupervisorBeat("s-1", "host-one", 99, "0.1.0", True, workers)
    )
    status, page = dashboard.get("/")
    assert status == 200
    row = re.search(r'<tr data-queue="mail">(.*?)</tr>', page, re.S)
    assert row is not None
    assert ">3</a>" in row.group(1) and "paused" in row.group(1)
    assert "Resume" in row.group(1)  # a paused queue offers resume
    assert "concurrency=3 rate=20/s" in row.group(1)
    limits = re.search(r'<table class="grid" id="type-limits">(.*?)</table>', page, re.S)
    assert limits is not None and "concurrency=5" in limits.group(1)
    assert '<svg class="chart"' in page and "dead (out of attempts)" in page
    assert "host-one" in page and "w-abc" in page and ">leader<" in page


def test_jobs_filter_and_page_by_keyset(dashboard: Browser, queue: Queue) -> None:
    ids = queue.enqueue_many([{"job_type": "send", "queue": "mail"}] * 60)
    other = queue.enqueue("bill", queue="money")
    status, page = dashboard.get("/jobs?queue=mail&status=pending")
    assert status == 200
    assert page.count('name="ids"') == 50 and str(other) not in page
    assert str(ids[0]) in page and "Listed in the order they will run." in page
    match = re.search(r'href="(/jobs\?[^"]*cursor=[^"]+)" id="next-page"', page)
    assert match is not None
    _, second = dashboard.get(match.group(1).replace("&amp;", "&"))
    assert second.count('name="ids"') == 10 and str(ids[-1]) in second
    assert 'id="next-page"' not in second
    _, by_type = dashboard.get("/jobs?job_type=bill")
    assert str(other) in by_type and str(ids[0]) not in by_type


def test_an_id_filter_opens_the_job_and_a_bad_filter_says_why(
    dashboard: Browser, queue: Queue
) -> None:
    job_id = queue.enqueue("send")
    status, page = dashboard.get(f"/jobs?id={job_id}")
    assert status == 200 and f"Job <code>{job_id}</code>" in page
    status, page = dashboard.get("/jobs?status=%3Cb%3Enope")
    assert status == 400
    assert "status=&#39;&lt;b&gt;nope&#39;: expected one of" in page


def test_a_script_in_a_payload_shows_as_text(dashboard: Browser, queue: Queue) -> None:
    evil = "<script>alert('owned')</script>"
    job_id = queue.enqueue(evil, {"note": evil}, queue=evil, correlation_id=evil)
    for path in ("/", "/jobs", f"/jobs/{job_id}", f"/jobs?queue={evil}"):
        status, page = dashboard.get(path)
        assert status == 200, path
        assert "<script>alert" not in page, path
        assert "&lt;script&gt;alert(" in page, path


def test_a_large_payload_is_cut_in_the_list_not_on_its_page(
    dashboard: Browser, queue: Queue
) -> None:
    job_id = queue.enqueue("big", {"blob": "y" * 20_000})
    _, listing = dashboard.get("/jobs")
    assert "y" * 300 not in listing and "y" * 150 in listing and "…" in listing
    _, detail = dashboard.get(f"/jobs/{job_id}")
    assert "y" * 20_000 in detail


def test_a_job_page_shows_everything_it_left_behind(dashboard: Browser, queue: Queue) -> None:
    job_id = queue.enqueue("charge", {"amount": 5}, correlation_id="req-42", max_attempts=2)
    (job,) = queue.claim("worker-one")
    queue.fail(job, "TimeoutError: bank did not answer", retry_in=0)
    (job,) = queue.claim("worker-two")
    queue.complete(job, {"receipt": "r-1"})
    status, page = dashboard.get(f"/jobs/{job_id}")
    assert status == 200
    assert "completed" in page and "req-42" in page and "worker-two" in page
    assert "&#34;receipt&#34;: &#34;r-1&#34;" in page
    errors = re.search(r'<table class="grid" id="errors">(.*?)</table>', page, re.S)
    assert errors is not None
    assert "TimeoutError: bank did not answer" in errors.group(1)
    assert '<td class="num">1</td>' in errors.group(1) and "worker-one" in errors.group(1)
    status, _ = dashboard.get(f"/jobs/{uuid.uuid4()}")
    assert status == 404


def test_the_schedules_page_lists_them(dashboard: Browser, queue: Queue) -> None:
    spec = ScheduleSpec.from_message(
        {"name": "nightly", "cron": "0 3 * * *", "job_type": "report", "timezone": "Europe/Paris"}
    )
    _, now = service_ops(queue).schedule_next_ticks()
    service_ops(queue).schedule_sync([spec.row(now)])
    status, page = dashboard.get("/schedules")
    assert status == 200
    assert "nightly" in page and "0 3 * * *" in page and "Europe/Paris" in page
    assert "Run now" in page


# --- actions and who may do them ------------------------------------------------------


def test_read_only_without_a_token(read_only: Browser, queue: Queue, url: str) -> None:
    job_id = dead_job(queue)
    _, page = read_only.get("/jobs")
    assert "read-only" in page and 'name="ids"' not in page and "Pause" not in page
    status, page = read_only.post(
        "/actions/requeue", csrf=read_only.csrf(), ids=str(job_id), confirmed="1"
    )
    assert status == 403 and "set JOBVISOR_ADMIN_TOKEN" in page
    status, answer = read_only.api("/api/actions/requeue", {"ids": [str(job_id)]}, token="x" * 20)
    assert status == 403 and "read-only" in answer["error"]
    assert queue.get(job_id).status == JobStatus.DEAD
    assert_invariants(url)


def test_an_action_is_refused_without_a_login(dashboard: Browser, queue: Queue) -> None:
    job_id = dead_job(queue)
    status, page = dashboard.post(
        "/actions/requeue", csrf=dashboard.csrf(), ids=str(job_id), confirmed="1", next="/jobs"
    )
    assert status == 403 and "log in first" in page
    assert queue.get(job_id).status == JobStatus.DEAD


def test_a_wrong_token_logs_nobody_in(dashboard: Browser, queue: Queue) -> None:
    status, page = dashboard.log_in("not-the-token-at-all")
    assert status == 400 and "not the admin token" in page
    assert "Log in" in dashboard.get("/")[1]


def test_requeue_asks_first_then_does_it_and_says_so(
    dashboard: Browser, queue: Queue, url: str
) -> None:
    job_id = dead_job(queue)
    status, page = dashboard.log_in()
    assert status == 200 and "Logged in" in page
    csrf = dashboard.csrf()
    status, page = dashboard.post("/actions/requeue", csrf=csrf, ids=str(job_id), next="/jobs")
    assert status == 200 and "Requeue 1 dead job" in page and 'name="confirmed"' in page
    assert queue.get(job_id).status == JobStatus.DEAD  # asked, not done
    status, page = dashboard.post(
        "/actions/requeue", csrf=csrf, ids=str(job_id), confirmed="1", next="/jobs"
    )
    assert status == 200 and "Requeued 1 dead job." in page
    assert queue.get(job_id).status == JobStatus.PENDING
    assert_invariants(url)


def test_a_post_without_the_csrf_token_changes_nothing(dashboard: Browser, queue: Queue) -> None:
    job_id = dead_job(queue)
    dashboard.log_in()
    status, page = dashboard.post("/actions/discard", ids=str(job_id), confirmed="1")
    assert status == 403 and "expired" in page
    status, _ = dashboard.post("/actions/discard", csrf="forged", ids=str(job_id), confirmed="1")
    assert status == 403
    assert queue.get(job_id).status == JobStatus.DEAD


def test_bad_input_is_refused_with_the_value_and_nothing_done(
    dashboard: Browser, queue: Queue
) -> None:
    job_id = dead_job(queue)
    dashboard.log_in()
    csrf = dashboard.csrf()
    status, page = dashboard.post("/actions/requeue", csrf=csrf, ids="not-an-id", confirmed="1")
    assert status == 400 and "not-an-id" in page and "is not a job id" in page
    status, page = dashboard.post("/actions/explode", csrf=csrf, ids=str(job_id), confirmed="1")
    assert status == 400 and "action=&#39;explode&#39;: expected one of" in page
    status, page = dashboard.post("/actions/pause", csrf=csrf, confirmed="1")
    assert status == 400 and "pause: expected queue" in page
    assert queue.get(job_id).status == JobStatus.DEAD


def test_discard_and_requeue_all_of_a_type_and_cancel_selected(
    dashboard: Browser, queue: Queue, url: str
) -> None:
    dead = [dead_job(queue, "sync") for _ in range(3)]
    waiting = queue.enqueue_many([{"job_type": "later"}] * 2)
    dashboard.log_in()
    csrf = dashboard.csrf()
    _, page = dashboard.post(
        "/actions/discard", csrf=csrf, job_type="sync", confirmed="1", next="/jobs"
    )
    assert "Discarded 3 dead jobs of type &#39;sync&#39;." in page
    assert dashboard_ops(queue).job_page(job_type="sync").jobs == ()
    _, page = dashboard.post(
        "/actions/cancel", csrf=csrf, ids=[str(i) for i in waiting], confirmed="1", next="/jobs"
    )
    assert "Cancelled 2 jobs." in page
    assert {queue.get(i).status for i in waiting} == {JobStatus.CANCELLED}
    assert len(dead) == 3
    assert_invariants(url)


def test_pause_and_resume_a_queue_from_the_overview(dashboard: Browser, queue: Queue) -> None:
    queue.enqueue("send", queue="mail")
    dashboard.log_in()
    csrf = dashboard.csrf("/")
    _, page = dashboard.post("/actions/pause", csrf=csrf, queue="mail", confirmed="1", next="/")
    assert "Paused queue &#39;mail&#39;." in page and queue.paused() == ["mail"]
    assert queue.claim("w", queues=["mail"]) == []
    _, page = dashboard.post("/actions/resume", csrf=csrf, queue="mail", confirmed="1", next="/")
    assert "Resumed queue &#39;mail&#39;." in page and queue.paused() == []


def test_the_api_needs_the_bearer_token(dashboard: Browser, queue: Queue, url: str) -> None:
    job_id = dead_job(queue)
    body = {"ids": [str(job_id)]}
    assert dashboard.api("/api/actions/requeue", body)[0] == 401
    assert dashboard.api("/api/actions/requeue", body, token="wrong-token-wrong-token")[0] == 401
    status, answer = dashboard.api("/api/actions/requeue", body, token=TOKEN)
    assert (status, answer) == (200, {"done": "Requeued 1 dead job.", "count": 1})
    status, answer = dashboard.api("/api/actions/pause", {"queue": "q", "ids": []}, token=TOKEN)
    assert status == 200 and queue.paused() == ["q"]
    status, answer = dashboard.api("/api/actions/pause", {"queue": ""}, token=TOKEN)
    assert status == 400 and "pause: expected queue" in answer["error"]
    assert_invariants(url)


def test_the_token_is_never_shown(dashboard: Browser, queue: Queue) -> None:
    dead_job(queue)
    dashboard.log_in()
    pages = [dashboard.get(p)[1] for p in ("/", "/jobs", "/schedules", "/login", "/api/queues")]
    assert all(TOKEN not in page for page in pages)
    assert all(TOKEN not in (cookie.value or "") for cookie in dashboard.jar)


def test_pages_forbid_framing_and_foreign_scripts(dashboard: Browser) -> None:
    status, _, headers = dashboard.request("/")
    assert status == 200
    assert "script-src 'self'" in headers["content-security-policy"]
    assert headers["x-frame-options"] == "DENY"
    assert headers["cache-control"] == "no-store"


def test_the_app_mounts_under_a_prefix(queue: Queue, url: str) -> None:
    job_id = dead_job(queue)
    with serving(url, mounted("/admin/jobvisor")) as base:
        browser = Browser(base)
        status, page = browser.get("/admin/jobvisor/jobs")
        assert status == 200 and 'href="/admin/jobvisor/jobs/' in page
        assert 'href="/admin/jobvisor/static/dashboard.css"' in page
        assert browser.get("/admin/jobvisor/static/dashboard.js")[0] == 200
        status, page = browser.post(
            "/admin/jobvisor/login",
            csrf=browser.csrf("/admin/jobvisor/login"),
            token=TOKEN,
            next="/jobs",
        )
        assert status == 200 and "Logged in" in page
        _, page = browser.post(
            "/admin/jobvisor/actions/requeue",
            csrf=browser.csrf("/admin/jobvisor/jobs"),
            ids=str(job_id),
            confirmed="1",
            next="/jobs",
        )
        assert "Requeued 1 dead job." in page


def test_a_redirect_never_leaves_the_app(dashboard: Browser) -> None:
    csrf = dashboard.csrf("/login")
    for target in ("//evil.example/", "https://evil.example/", "/\\evil"):
        status, page = dashboard.post("/login", csrf=csrf, token=TOKEN, next=target)
        assert status == 200 and "<h1>Queues" in page
        csrf = dashboard.csrf("/login")


@pytest.mark.parametrize(
    ("meta", "expected"),
    [
        ({"trace": {"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01"}}, "a" * 32),
        ({"trace": {"traceparent": "garbage"}}, None),
        (None, None),
    ],
)
def test_the_trace_id_is_read_from_the_traceparent(meta: object, expected: str | None) -> None:
    assert views.trace_id(meta) == expected  # type: ignore[arg-type]
