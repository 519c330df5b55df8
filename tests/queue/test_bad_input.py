"""Bad input is refused at the call, before anything is written, with an
error that names the value and says what was expected (issue 2, point 10)."""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

import pytest

import jobvisor
from jobvisor import InvalidArgument, Queue, RetryPolicy
from jobvisor.queue.model import UTC
from tests.queue.helpers import row_count

NAIVE = dt.datetime(2030, 1, 1, 12, 0)
AWARE = dt.datetime(2030, 1, 1, 12, 0, tzinfo=UTC)

CASES: list[tuple[str, dict[str, Any], str]] = [
    ("payload not JSON", {"payload": {"when": NAIVE}}, "payload="),
    ("payload a set", {"payload": {1, 2}}, "payload={1, 2}"),
    ("payload an object", {"payload": object()}, "payload=<object object"),
    ("payload NaN", {"payload": {"x": math.nan}}, "payload={'x': nan}"),
    ("payload with NUL", {"payload": {"s": "a\x00b"}}, "payload={'s': 'a\\x00b'}"),
    ("empty job type", {"job_type": ""}, "job_type=''"),
    ("blank job type", {"job_type": "   "}, "job_type='   '"),
    ("job type not a string", {"job_type": 7}, "job_type=7"),
    ("job type with NUL", {"job_type": "a\x00"}, "job_type='a\\x00'"),
    ("empty queue", {"queue": ""}, "queue=''"),
    ("queue None", {"queue": None}, "queue=None"),
    ("negative delay", {"delay": -1}, "delay=-1"),
    ("negative timedelta", {"delay": dt.timedelta(seconds=-5)}, "delay=datetime.timedelta"),
    ("infinite delay", {"delay": math.inf}, "delay=inf"),
    ("delay a string", {"delay": "5"}, "delay='5'"),
    ("max_attempts zero", {"max_attempts": 0}, "max_attempts=0"),
    ("max_attempts negative", {"max_attempts": -3}, "max_attempts=-3"),
    ("max_attempts a float", {"max_attempts": 2.5}, "max_attempts=2.5"),
    ("both run_at and delay", {"run_at": AWARE, "delay": 5}, "run_at="),
    ("naive run_at", {"run_at": NAIVE}, "run_at=datetime.datetime(2030, 1, 1, 12, 0)"),
    ("run_at a string", {"run_at": "2030-01-01"}, "run_at='2030-01-01'"),
    ("priority a float", {"priority": 1.5}, "priority=1.5"),
    ("priority too large", {"priority": 2**40}, "priority=1099511627776"),
    ("priority a bool", {"priority": True}, "priority=True"),
    ("empty dedupe key", {"dedupe_key": ""}, "dedupe_key=''"),
    ("empty correlation id", {"correlation_id": ""}, "correlation_id=''"),
]


def test_enqueue_refuses_bad_input(queue: Queue, url: str) -> None:
    for case, kwargs, named in CASES:
        with pytest.raises(InvalidArgument) as info:
            queue.enqueue(**{"job_type": "t", **kwargs})
        message = str(info.value)
        assert named in message, (case, message)
        assert "expected" in message, (case, message)
    assert row_count(url) == 0


def test_enqueue_many_refuses_the_same_input(queue: Queue, url: str) -> None:
    for case, kwargs, named in CASES:
        with pytest.raises(InvalidArgument) as info:
            queue.enqueue_many([{"job_type": "ok"}, {"job_type": "t", **kwargs}])
        message = str(info.value)
        assert "jobs[1]" in message and named in message, (case, message)
    assert row_count(url) == 0


def test_bad_input_is_refused_in_the_callers_transaction_too(queue: Queue, url: str) -> None:
    with pytest.raises(InvalidArgument):
        queue.enqueue("", conn=object())
    assert row_count(url) == 0


def test_a_payload_may_carry_a_literal_backslash_u0000(queue: Queue) -> None:
    text = "\\u0000 is how JSON spells NUL"
    assert queue.get(queue.enqueue("t", {"doc": text})).payload == {"doc": text}


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"base": -1}, "base=-1"),
        ({"base": 10, "cap": 5}, "cap=5"),
        ({"jitter": 1.5}, "jitter=1.5"),
    ],
)
def test_retry_policy_refuses_bad_values(kwargs: dict[str, float], named: str) -> None:
    with pytest.raises(InvalidArgument, match="expected") as info:
        RetryPolicy(**kwargs)
    assert named in str(info.value)


def test_connect_refuses_a_bad_lease(url: str) -> None:
    with pytest.raises(InvalidArgument, match=r"lease=0"):
        jobvisor.connect(url, lease=0)


@pytest.mark.parametrize("bad", ["not-a-uuid", "", "1234"])
def test_bad_job_ids_are_named(queue: Queue, bad: str) -> None:
    for call in (queue.get, queue.cancel, queue.dead.get, queue.dead.requeue, queue.dead.discard):
        with pytest.raises(InvalidArgument, match="expected a UUID") as info:
            call(bad)
        assert repr(bad) in str(info.value)
