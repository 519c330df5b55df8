"""Durable steps, sleeps, signals and events on both engines: the step log
fenced by the claim token, parking without an attempt or a slot, signals
kept until a wait takes them, events, and retention."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import uuid

import pytest

from jobvisor import InvalidArgument, Job, JobNotFound, JobStatus, LeaseLost, Queue
from jobvisor.queue import internal, ops
from jobvisor.queue.errors import EventNotSet
from tests.support.invariants import assert_invariants
from tests.support.queue import Clock, MakeQueue, table_snapshot

NOW = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)


def _claimed(q: Queue, job_type: str = "t") -> Job:
    q.enqueue(job_type)
    (job,) = q.claim("w")
    return job


def _forged(job: Job) -> Job:
    return dataclasses.replace(job, claim_token=uuid.uuid4())


def test_a_saved_step_is_in_the_log_with_its_result(queue: Queue) -> None:
    job = _claimed(queue)
    svc = internal.service_ops(queue)
    svc.step_save(job, 0, "charge", started=NOW, result=json.dumps({"id": 7}))
    svc.step_save(job, 1, "mail", started=NOW, error="SMTPError: down")
    log = svc.step_log(job.id)
    assert [(s.seq, s.name, s.status, s.result, s.error) for s in log] == [
        (0, "charge", ops.StepStatus.COMPLETED, {"id": 7}, None),
        (1, "mail", ops.StepStatus.FAILED, None, "SMTPError: down"),
    ]
    svc.step_save(job, 1, "mail", started=NOW, result=json.dumps("sent"))  # a rerun succeeds
    assert svc.step_log(job.id)[1].status is ops.StepStatus.COMPLETED
    assert svc.step_log(job.id)[1].result == "sent"


def test_a_lost_lease_cannot_record_a_step(queue: Queue, url: str) -> None:
    job = _claimed(queue)
    svc = internal.service_ops(queue)
    before = table_snapshot(url)
    with pytest.raises(LeaseLost):
        svc.step_save(_forged(job), 0, "charge", started=NOW, result="1")
    with pytest.raises(LeaseLost):
        svc.step_wait(_forged(job), 0, "sleep", timeout=60)
    with pytest.raises(LeaseLost):
        svc.event_set(_forged(job), "k", 1)
    assert table_snapshot(url) == before
    assert svc.step_log(job.id) == []
    queue.complete(job)
    with pytest.raises(LeaseLost):
        svc.step_save(job, 0, "charge", started=NOW, result="1")
    assert svc.step_log(job.id) == []


def test_a_sleep_parks_the_job_without_an_attempt_and_ends_when_due(
    make_queue: MakeQueue, clock: Clock
) -> None:
    q = make_queue(clock=clock)
    job = _claimed(q)
    svc = internal.service_ops(q)
    wait = svc.step_wait(job, 0, "sleep", timeout=60)
    assert wait.outcome is ops.Waited.PARKED
    parked = q.get(job.id)
    assert parked.status is JobStatus.PENDING and parked.attempts == 0
    assert parked.run_at == clock() + dt.timedelta(seconds=60)
    assert q.claim("w") == []  # holds no worker until then
    clock.advance(61)
    (again,) = q.claim("w")
    assert again.attempts == 1
    assert svc.step_wait(again, 0, "sleep", timeout=60).outcome is ops.Waited.DONE
    assert svc.step_log(job.id)[0].status is ops.StepStatus.COMPLETED


def test_a_signal_sent_before_the_wait_is_kept_and_taken_once(queue: Queue) -> None:
    job = _claimed(queue)
    svc = internal.service_ops(queue)
    queue.signal(job.id, "approved", {"by": "ann"})
    wait = svc.step_wait(job, 0, "approved", signal="approved")
    assert wait == ops.Wait(ops.Waited.DONE, {"by": "ann"})
    second = svc.step_wait(job, 1, "approved#1", signal="approved", timeout=3600)
    assert second.outcome is ops.Waited.PARKED  # the first signal was taken


def test_a_signal_wakes_a_job_parked_in_its_wait(make_queue: MakeQueue, clock: Clock) -> None:
    q = make_queue(clock=clock)
    job = _claimed(q)
    svc = internal.service_ops(q)
    assert svc.step_wait(job, 0, "approved", signal="approved").outcome is ops.Waited.PARKED
    assert q.claim("w") == []
    q.signal(job.id, "other")  # not the one it waits for
    assert q.claim("w") == []
    q.signal(job.id, "approved", [1, 2])
    (again,) = q.claim("w")
    assert svc.step_wait(again, 0, "approved", signal="approved").payload == [1, 2]


def test_a_wait_times_out_at_its_first_deadline(make_queue: MakeQueue, clock: Clock) -> None:
    q = make_queue(clock=clock)
    job = _claimed(q)
    svc = internal.service_ops(q)
    assert svc.step_wait(job, 0, "ok", signal="ok", timeout=30).outcome is ops.Waited.PARKED
    clock.advance(31)
    (again,) = q.claim("w")
    # The deadline stays the first attempt's, whatever timeout comes later.
    assert svc.step_wait(again, 0, "ok", signal="ok", timeout=3600).outcome is ops.Waited.TIMED_OUT


def test_cancel_of_a_parked_job_ends_it_cancelled_at_once(queue: Queue, url: str) -> None:
    job = _claimed(queue)
    internal.service_ops(queue).step_wait(job, 0, "sleep", timeout=3600)
    queue.cancel(job.id)
    assert queue.get(job.id).status is JobStatus.CANCELLED
    with pytest.raises(InvalidArgument, match="cancelled"):
        queue.signal(job.id, "approved")
    assert_invariants(url)


def test_signal_refuses_bad_input_and_writes_nothing(queue: Queue, url: str) -> None:
    job = _claimed(queue)
    before = table_snapshot(url)
    with pytest.raises(JobNotFound):
        queue.signal(uuid.uuid4(), "x")
    with pytest.raises(InvalidArgument, match="job id 'nope'"):
        queue.signal("nope", "x")
    with pytest.raises(InvalidArgument, match="signal="):
        queue.signal(job.id, "")
    with pytest.raises(InvalidArgument, match="payload="):
        queue.signal(job.id, "x", {"a": object()})
    assert table_snapshot(url) == before


def test_events_are_published_and_read(queue: Queue) -> None:
    job = _claimed(queue)
    svc = internal.service_ops(queue)
    assert queue.get_event(job.id, "stage") is None
    assert queue.get_event(job.id, "stage", "none yet") == "none yet"
    svc.event_set(job, "stage", {"n": 1})
    svc.event_set(job, "stage", {"n": 2})
    assert queue.get_event(job.id, "stage") == {"n": 2}
    assert queue.wait_event(job.id, "stage", timeout=5) == {"n": 2}
    with pytest.raises(TimeoutError, match="'other'"):
        queue.wait_event(job.id, "other", timeout=0.05)
    queue.complete(job)
    with pytest.raises(EventNotSet, match="'other'"):
        queue.wait_event(job.id, "other", timeout=5)
    with pytest.raises(JobNotFound):
        queue.get_event(uuid.uuid4(), "stage")


def test_retention_removes_steps_signals_and_events_with_their_job(
    make_queue: MakeQueue, clock: Clock, url: str
) -> None:
    q = make_queue(clock=clock)
    job = _claimed(q)
    svc = internal.service_ops(q)
    q.signal(job.id, "s")
    svc.step_save(job, 0, "a", started=NOW, result="1")
    svc.event_set(job, "k", 1)
    q.complete(job)
    assert internal.dashboard_ops(q).step_history(job.id).steps
    clock.advance(3600)
    assert q.cleanup(60) == 1
    history = internal.dashboard_ops(q).step_history(job.id)
    assert history == ops.StepHistory((), (), ())
