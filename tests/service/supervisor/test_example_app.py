"""`make run` on a fresh machine: `python -m jobvisor.example` seeds a demo
batch, then `jobvisor run` without JOBVISOR_APP says it runs the bundled
example app and runs every demo job to completion, some after a retry."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.invariants import assert_invariants
from tests.support.service import Service, by_status, clean_env
from tests.support.wait import wait_until


def test_the_example_app_is_seeded_and_run(sqlite_url: str, tmp_path: Path) -> None:
    env = clean_env(sqlite_url)
    env.pop("JOBVISOR_APP", None)
    seeded = subprocess.run(
        [sys.executable, "-m", "jobvisor.example"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert seeded.returncode == 0, seeded.stderr
    total = sum(by_status(sqlite_url).values())
    assert total > 0
    assert f"enqueued {total} demo jobs" in seeded.stderr

    service = Service(sqlite_url, tmp_path, {"JOBVISOR_LOG_LEVEL": "info"})
    service.env.pop("JOBVISOR_APP", None)
    try:
        service.start()
        (event,) = service.wait_event("supervisor.example_app")
        assert event["app"] == "jobvisor.example:registry"
        wait_until(lambda: by_status(sqlite_url).get("completed") == total, timeout=90,
                   what="every demo job completed")  # fmt: skip
        assert service.events("job.failed"), "resize_image fails before it succeeds"
        assert service.stop() == 0
    finally:
        service.kill_everything()
    assert_invariants(sqlite_url)
