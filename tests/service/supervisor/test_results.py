"""Results and waiting through a real `jobvisor run`, on both engines: a
handler's return value comes back from `wait`; one that cannot be stored
fails the job, each failure in its error history."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

import jobvisor
from jobvisor import JobStatus, Queue
from tests.support.service import Service


def test_wait_returns_each_handlers_result(
    queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    ids = {
        queue.enqueue("answer", {"value": {"n": 42}}): {"n": 42},
        queue.enqueue("sync_answer", {"value": ["a", 1]}): ["a", 1],
        queue.enqueue("answer", {}): None,
    }
    start_service(queue.url, tmp_path)
    for jid, expected in ids.items():
        done = queue.wait(jid, timeout=60)
        assert done.status is JobStatus.COMPLETED
        assert done.result == expected


def test_an_unstorable_result_fails_the_job_with_a_clear_error(
    queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    jid = queue.enqueue("unstorable", max_attempts=2)
    start_service(queue.url, tmp_path)
    dead = queue.wait(jid, timeout=60)
    assert dead.status is JobStatus.DEAD
    assert dead.result is None
    assert [e["attempt"] for e in dead.errors] == [1, 2]
    for entry in dead.errors:
        assert entry["error"].startswith("InvalidResult: result=")
        assert "expected a JSON-serialisable value" in entry["error"]
        assert entry["worker_id"]


def test_a_result_over_the_configured_cap_fails_the_job(
    queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    jid = queue.enqueue("answer", {"value": "x" * 2000}, max_attempts=1)
    start_service(queue.url, tmp_path, {"JOBVISOR_RESULT_MAX_BYTES": "1024"})
    dead = queue.wait(jid, timeout=60)
    assert dead.status is JobStatus.DEAD
    assert "at most 1024 bytes" in str(dead.last_error)


def test_async_wait_sees_the_completion(
    queue: Queue, tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    jid = queue.enqueue("answer", {"value": 7})

    async def main() -> jobvisor.Job:
        async with jobvisor.connect_async(queue.url) as aq:
            with pytest.raises(TimeoutError, match=f"job {jid} is still pending after 0.05s"):
                await aq.wait(jid, timeout=0.05)
            start_service(queue.url, tmp_path)
            return await aq.wait(jid, timeout=60)

    done = asyncio.run(main())
    assert done.result == 7
