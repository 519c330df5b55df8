"""A durable job on the dashboard, on both engines: its page shows the step
log, the signals (pending or taken) and the events, every value escaped; a
signal is sent from the page behind the admin token (asked first, then sent)
or through the JSON API, and bad input sends nothing."""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid

from jobvisor import Job, JobStatus, Queue
from jobvisor.queue import ops
from jobvisor.queue.internal import dashboard_ops, service_ops
from tests.support.web import TOKEN, Browser

NOW = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
SCRIPT = "<script>alert(1)</script>"


def _claimed(queue: Queue) -> Job:
    queue.enqueue("approval", {"order": 7})
    (job,) = queue.claim("w")
    return job


def _section(page: str, table: str) -> str:
    found = re.search(rf'<table class="grid" id="{table}">(.*?)</table>', page, re.S)
    assert found is not None, f"no table {table!r}"
    return found.group(1)


def test_the_job_page_shows_steps_signals_and_events_escaped(
    dashboard: Browser, queue: Queue
) -> None:
    job = _claimed(queue)
    svc = service_ops(queue)
    svc.step_save(job, 0, "charge", started=NOW, result=json.dumps({"note": SCRIPT}))
    svc.step_save(job, 1, f"mail {SCRIPT}", started=NOW, error=f"SMTPError: {SCRIPT}")
    svc.event_set(job, "stage", SCRIPT)
    queue.signal(job.id, "early")
    svc.step_wait(job, 2, "signal:early", signal="early")  # takes it
    queue.signal(job.id, SCRIPT)  # not taken: pending
    assert svc.step_wait(job, 3, "signal:approved", signal="approved").outcome == "parked"
    status, page = dashboard.get(f"/jobs/{job.id}")
    assert status == 200
    assert SCRIPT not in page
    steps = _section(page, "steps")
    assert "<code>charge</code>" in steps and "&lt;script&gt;" in steps
    assert "SMTPError: &lt;script&gt;alert(1)&lt;/script&gt;" in steps
    assert "until a signal (signal <code>approved</code>)" in steps
    assert steps.count("<tr>") == 5  # the head and four steps
    assert "completed" in steps and "failed" in steps
    signals = _section(page, "signals")
    assert "<code>early</code>" in signals and "<code>&lt;script&gt;" in signals
    assert signals.count(">pending</span>") == 1  # the one no wait took yet
    events = _section(page, "events")
    assert (
        "<code>stage</code>" in events
        and "&#34;&lt;script&gt;alert(1)&lt;/script&gt;&#34;" in events
    )


def test_a_job_without_steps_says_so(dashboard: Browser, queue: Queue) -> None:
    job_id = queue.enqueue("plain")
    _, page = dashboard.get(f"/jobs/{job_id}")
    assert "None recorded." in page and "None sent." in page and "None published." in page
    assert 'id="signal-form"' in page  # an unfinished job takes a signal
    (job,) = queue.claim("w")
    queue.complete(job)
    _, page = dashboard.get(f"/jobs/{job_id}")
    assert 'id="signal-form"' not in page  # a finished one does not


def test_a_signal_is_asked_first_then_sent_and_wakes_the_parked_job(
    dashboard: Browser, queue: Queue
) -> None:
    job = _claimed(queue)
    assert service_ops(queue).step_wait(job, 0, "signal:ok", signal="ok").outcome == "parked"
    dashboard.log_in()
    csrf = dashboard.csrf(f"/jobs/{job.id}")
    fields = {"csrf": csrf, "ids": str(job.id), "signal": "ok", "payload": '{"by": "ann"}'}
    status, page = dashboard.post("/actions/signal", **fields, next=f"/jobs/{job.id}")
    assert status == 200 and f"Send the signal &#39;ok&#39; to job {job.id}" in page
    assert 'name="confirmed"' in page and "&#34;by&#34;" in page
    assert dashboard_ops(queue).step_history(job.id).signals == ()  # asked, not sent
    status, page = dashboard.post(
        "/actions/signal", **fields, confirmed="1", next=f"/jobs/{job.id}"
    )
    assert status == 200 and "Sent the signal &#39;ok&#39;" in page
    (sent,) = dashboard_ops(queue).step_history(job.id).signals
    assert sent.name == "ok" and sent.taken_at is None
    (again,) = queue.claim("w")  # the signal made the parked job due
    wait = service_ops(queue).step_wait(again, 0, "signal:ok", signal="ok")
    assert wait == ops.Wait(ops.Waited.DONE, {"by": "ann"})


def test_a_signal_needs_the_token_and_refuses_bad_input(
    dashboard: Browser, read_only: Browser, queue: Queue
) -> None:
    job = _claimed(queue)
    form = {"ids": str(job.id), "signal": "ok", "confirmed": "1"}
    status, _ = read_only.post("/actions/signal", csrf=read_only.csrf(), **form)
    assert status == 403
    status, page = dashboard.post("/actions/signal", csrf=dashboard.csrf(), **form)
    assert status == 403 and "log in first" in page
    dashboard.log_in()
    csrf = dashboard.csrf()
    status, page = dashboard.post("/actions/signal", csrf=csrf, **{**form, "payload": "{nope"})
    assert status == 400 and "payload=&#39;{nope&#39;: expected JSON text" in page
    status, page = dashboard.post("/actions/signal", csrf=csrf, ids=str(job.id), confirmed="1")
    assert status == 400 and "signal: expected one job id and a signal name" in page
    status, page = dashboard.post(
        "/actions/cancel", csrf=csrf, ids=str(job.id), signal="ok", confirmed="1"
    )
    assert status == 400 and "signal and payload go with a signal only" in page
    missing = uuid.uuid4()
    status, page = dashboard.post("/actions/signal", csrf=csrf, **{**form, "ids": str(missing)})
    assert status == 409 and str(missing) in page
    assert dashboard_ops(queue).step_history(job.id).signals == ()
    assert queue.get(job.id).status is JobStatus.RUNNING
    body = {"ids": [str(job.id)], "signal": "ok", "payload": "[1, 2]"}
    assert dashboard.api("/api/actions/signal", body)[0] == 401
    status, answer = dashboard.api("/api/actions/signal", body, token=TOKEN)
    assert status == 200 and answer["count"] == 1
    (sent,) = dashboard_ops(queue).step_history(job.id).signals
    assert sent.name == "ok"
