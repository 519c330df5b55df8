"""`jobvisor schedules` and `jobvisor schedules run NAME`, on both engines."""

from __future__ import annotations

import datetime as dt
import json

from jobvisor import Queue
from jobvisor.queue.internal import service_ops
from jobvisor.schedules import ScheduleSpec
from tests.support.cli import Cli

NOW = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)


def declare(db: Queue) -> None:
    service_ops(db).schedule_sync(
        [
            ScheduleSpec.build("hourly", cron="0 * * * *", job_type="t").row(NOW),
            ScheduleSpec.build("often", every=30, job_type="t", timezone="Europe/Berlin").row(NOW),
        ]
    )
    service_ops(db).schedule_sync(
        [ScheduleSpec.build("hourly", cron="0 * * * *", job_type="t").row(NOW)]
    )


def test_schedules_lists_each_with_its_state(cli: Cli, db: Queue) -> None:
    assert "no schedules" in cli.ok("schedules")
    declare(db)
    lines = cli.ok("schedules").splitlines()
    assert lines[0].split() == ["name", "spec", "zone", "next", "run", "last", "run", "enabled"]
    assert lines[2].split() == [
        "hourly",
        "0",
        "*",
        "*",
        "*",
        "*",
        "UTC",
        "2026-01-01",
        "13:00:00Z",
        "-",
        "yes",
    ]
    assert lines[3].split() == ["often", "every", "30s", "Europe/Berlin", "-", "-", "no"]
    shown = json.loads(cli.ok("schedules", "--json"))
    assert [(s["name"], s["enabled"]) for s in shown] == [("hourly", True), ("often", False)]


def test_schedules_run_enqueues_one_job_now(cli: Cli, db: Queue) -> None:
    declare(db)
    out = cli.ok("schedules", "run", "hourly")
    job_id = out.split()[1]
    job = db.get(job_id)
    assert job.job_type == "t" and job.meta == {"schedule": "hourly", "manual": True}


def test_schedules_run_of_an_unknown_name_fails_and_writes_nothing(cli: Cli, db: Queue) -> None:
    result = cli("schedules", "run", "nope")
    assert result.code == 2
    assert result.err.strip() == "jobvisor schedules run: error: schedule 'nope': no such schedule"
    assert db.summary().total == 0
