"""What a job leaves behind: its result stored with the completion, and the
error of every failed attempt (failures, reaped leases, crashes), on both engines."""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path

import pytest

import jobvisor
from jobvisor import InvalidArgument, JobStatus, LeaseLost, Queue
from jobvisor.queue import ops
from jobvisor.queue.jsonvalue import progress_json
from tests.support.queue import Clock, MakeQueue, close_to, table_snapshot


def test_a_result_is_stored_with_the_completion(queue: Queue) -> None:
    jid = queue.enqueue("t")
    (job,) = queue.claim("w")
    queue.complete(job, {"rows": 3, "names": ["é", "b"]})
    done = queue.get(jid)
    assert done.status is JobStatus.COMPLETED
    assert done.result == {"rows": 3, "names": ["é", "b"]}


@pytest.mark.parametrize("value", [0, "text", [1, 2], False, 1.5])
def test_any_json_value_is_a_result(queue: Queue, value: object) -> None:
    jid = queue.enqueue("t")
    (job,) = queue.claim("w")
    queue.complete(job, value)
    assert queue.get(jid).result == value


def test_none_stores_nothing(queue: Queue) -> None:
    jid = queue.enqueue("t")
    (job,) = queue.claim("w")
    queue.complete(job, None)
    assert queue.get(jid).result is None
    assert queue.get(jid).errors == ()


def test_complete_many_stores_each_jobs_result_in_one_batch(queue: Queue) -> None:
    ids = [queue.enqueue("t") for _ in range(4)]
    jobs = queue.claim("w", limit=4)
    results = {jobs[0].id: '{"a":1}', jobs[2].id: '"two"'}
    assert queue.complete_many(jobs, results=results) == []
    got = {jid: queue.get(jid).result for jid in ids}
    assert got == {jobs[0].id: {"a": 1}, jobs[1].id: None, jobs[2].id: "two", jobs[3].id: None}


def test_a_result_of_a_lost_lease_is_dropped(queue: Queue, url: str) -> None:
    queue.enqueue("t")
    (job,) = queue.claim("w")
    queue.release(job)
    before = table_snapshot(url)
    with pytest.raises(LeaseLost):
        queue.complete(job, {"late": True})
    assert table_snapshot(url) == before


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({1, 2}, "expected a JSON-serialisable value"),
        (float("nan"), "expected a JSON-serialisable value"),
        ("\x00", "expected JSON without NUL"),
    ],
)
def test_a_result_that_is_not_json_is_refused_and_nothing_changes(
    queue: Queue, url: str, value: object, expected: str
) -> None:
    jid = queue.enqueue("t")
    (job,) = queue.claim("w")
    before = table_snapshot(url)
    with pytest.raises(InvalidArgument, match=expected) as info:
        queue.complete(job, value)
    assert str(info.value).startswith("result=")
    assert table_snapshot(url) == before
    assert queue.get(jid).status is JobStatus.RUNNING


def test_a_result_over_the_cap_is_refused(make_queue: MakeQueue, url: str) -> None:
    q = make_queue(max_result_bytes=1024)
    q.enqueue("t")
    (job,) = q.claim("w")
    before = table_snapshot(url)
    with pytest.raises(InvalidArgument, match=r"at most 1024 bytes.*JOBVISOR_RESULT_MAX_BYTES"):
        q.complete(job, "x" * 1100)
    assert table_snapshot(url) == before
    q.complete(job, "x" * 1000)


def test_the_cap_is_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JOBVISOR_RESULT_MAX_BYTES", "2048")
    assert ops.result_json("x" * 2000, 2048) is not None
    q = jobvisor.connect("sqlite:///unused.db")
    try:
        assert q.max_result_bytes == 2048
    finally:
        q.close()
    monkeypatch.setenv("JOBVISOR_RESULT_MAX_BYTES", "12")
    with pytest.raises(InvalidArgument, match="JOBVISOR_RESULT_MAX_BYTES='12': expected"):
        jobvisor.connect("sqlite:///unused.db")


def test_complete_many_refuses_results_that_are_not_text(queue: Queue) -> None:
    queue.enqueue("t")
    jobs = queue.claim("w")
    with pytest.raises(InvalidArgument, match="expected JSON text"):
        queue.complete_many(jobs, results={jobs[0].id: {"a": 1}})  # type: ignore[dict-item]
    assert queue.get(jobs[0].id).status is JobStatus.RUNNING


# --- error history -----------------------------------------------------------


def test_every_failed_attempt_is_in_the_history(cqueue: Queue, clock: Clock) -> None:
    jid = cqueue.enqueue("t", max_attempts=3)
    for attempt in (1, 2, 3):
        (job,) = cqueue.claim(f"w{attempt}")
        cqueue.fail(job, f"boom {attempt}", retry_in=0)
        clock.advance(1)
    dead = cqueue.get(jid)
    assert dead.status is JobStatus.DEAD
    assert dead.last_error == "boom 3"
    assert [(e["attempt"], e["error"], e["worker_id"]) for e in dead.errors] == [
        (1, "boom 1", "w1"),
        (2, "boom 2", "w2"),
        (3, "boom 3", "w3"),
    ]
    assert close_to(dead.errors[0]["at"], clock() - dt.timedelta(seconds=3))
    assert cqueue.dead.get(jid).errors == dead.errors
    assert cqueue.dead.list()[0].errors == dead.errors


def test_the_history_keeps_the_last_20(queue: Queue) -> None:
    jid = queue.enqueue("t", max_attempts=25)
    for attempt in range(1, 26):
        (job,) = queue.claim("w")
        queue.fail(job, f"e{attempt}", retry_in=0)
    errors = queue.get(jid).errors
    assert [e["attempt"] for e in errors] == list(range(6, 26))
    assert errors[-1]["error"] == "e25"


def test_a_reaped_lease_is_in_the_history(cqueue: Queue, clock: Clock) -> None:
    jid = cqueue.enqueue("t", max_attempts=2)
    cqueue.claim("w1", lease=5)
    clock.advance(10)
    assert cqueue.reap_expired() == 1
    (entry,) = cqueue.get(jid).errors
    assert entry["attempt"] == 1
    assert entry["worker_id"] == "w1"
    assert entry["error"] == "lease expired on worker w1"
    assert close_to(entry["at"], clock())


def test_a_crash_charges_the_history_of_the_culprit_only(queue: Queue) -> None:
    culprit = queue.enqueue("t")
    other = queue.enqueue("t")
    queue.claim("w", limit=2)
    assert queue.requeue_crashed("w", error="killed past its hard limit", culprit=culprit) == 2
    (entry,) = queue.get(culprit).errors
    assert entry["error"] == "killed past its hard limit"
    assert entry["worker_id"] == "w"
    assert queue.get(other).errors == ()
    queue.claim("w2", job_types=["t"], limit=1)
    queue.claim("w3", limit=1)
    queue.requeue_crashed("w3")  # alone in its worker: charged
    assert [e["worker_id"] for e in queue.get(other).errors] == ["w3"]
    assert "w3 exited" in queue.get(other).errors[0]["error"]


def test_a_claim_reads_none_of_it(queue: Queue) -> None:
    queue.enqueue("t")
    (job,) = queue.claim("w")
    queue.fail(job, "boom", retry_in=0)
    (again,) = queue.claim("w")
    assert again.errors == () and again.result is None and again.progress is None
    assert isinstance(again.id, uuid.UUID)


# --- progress -----------------------------------------------------------------


def test_a_renewal_writes_the_reported_progress(queue: Queue) -> None:
    a, b = queue.enqueue("t"), queue.enqueue("t")
    jobs = queue.claim("w", limit=2)
    first = {jobs[0].id: progress_json(0.25, "a quarter")}
    assert queue.renew_many(jobs, progress=first) == []
    assert queue.get(jobs[0].id).progress == {"fraction": 0.25, "note": "a quarter"}
    assert queue.get(jobs[1].id).progress is None
    queue.renew_many(jobs)  # nothing new: each keeps its own
    queue.renew_many(jobs, progress={jobs[1].id: progress_json(1)})
    assert queue.get(jobs[0].id).progress == {"fraction": 0.25, "note": "a quarter"}
    assert queue.get(jobs[1].id).progress == {"fraction": 1.0, "note": None}
    assert {a, b} == {j.id for j in jobs}


@pytest.mark.parametrize(
    ("fraction", "note", "expected"),
    [
        (1.5, None, "fraction=1.5: expected a number 0.0..1.0"),
        (-0.1, None, "fraction=-0.1: expected a number 0.0..1.0"),
        (True, None, "fraction=True: expected a number"),
        (float("nan"), None, "fraction=nan: expected a number"),
        ("0.5", None, "fraction='0.5': expected a number"),
        (0.5, "x" * 201, "note='xxx.*: expected text of at most 200 characters"),
        (0.5, 3, "note=3: expected text"),
        (0.5, "a\x00b", "note='a\\\\x00b': expected text without NUL"),
    ],
)
def test_bad_progress_is_refused(fraction: object, note: object, expected: str) -> None:
    with pytest.raises(InvalidArgument, match=expected):
        progress_json(fraction, note)  # type: ignore[arg-type]
