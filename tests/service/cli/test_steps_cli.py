"""`jobvisor signal` and the step log in `jobvisor show`, on both engines."""

from __future__ import annotations

import datetime as dt
import json

from jobvisor import Queue
from jobvisor.queue import internal
from tests.support.cli import Cli

NOW = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)


def test_signal_is_kept_and_show_prints_the_step_log(cli: Cli, db: Queue) -> None:
    job_id = db.enqueue("t")
    (job,) = db.claim("w")
    svc = internal.service_ops(db)
    svc.step_save(job, 0, "charge", started=NOW, result=json.dumps({"charged": 12}))
    svc.step_save(job, 1, "mail", started=NOW, error="SMTPError: down")
    out = cli.ok("signal", str(job_id), "approved", '{"by": "ann"}')
    assert "approved" in out
    svc.step_wait(job, 2, "signal:approved", signal="approved")  # takes it
    cli.ok("signal", str(job_id), "later")  # pending: no wait took it
    svc.event_set(job, "stage", {"n": 2})
    shown = cli.ok("show", str(job_id))
    assert "signal later: sent" in shown and "not taken yet" in shown
    assert 'event stage = {"n": 2}, set' in shown
    assert "charge" in shown and '{"charged": 12}' in shown
    assert "SMTPError: down" in shown
    assert "signal approved: sent" in shown and "taken" in shown
    data = json.loads(cli.ok("show", str(job_id), "--json"))
    assert [s["name"] for s in data["steps"]] == ["charge", "mail", "signal:approved"]
    assert data["steps"][2]["result"] == {"signal": "approved", "payload": {"by": "ann"}}
    assert [(s["name"], s["taken_at"] is None) for s in data["signals"]] == [
        ("approved", False),
        ("later", True),
    ]
    assert data["events"]["stage"]["value"] == {"n": 2}


def test_signal_refuses_bad_json_and_unknown_jobs(cli: Cli, db: Queue) -> None:
    job_id = db.enqueue("t")
    bad = cli("signal", str(job_id), "approved", "{nope")
    assert bad.code != 0 and "payload=" in bad.err and "expected JSON" in bad.err
    missing = cli("signal", "00000000-0000-0000-0000-000000000000", "approved")
    assert missing.code != 0 and "not found" in missing.err
    assert internal.dashboard_ops(db).step_history(job_id).signals == ()
