"""A payload, a result and a progress read back the same from both engines:
floats as floats (even those PostgreSQL's jsonb would print as integers),
-0.0 as 0.0, object keys in one order (by length in UTF-8 bytes, then
bytewise: jsonb's), and a key that is not a string refused before anything
is written."""

from __future__ import annotations

import math
from typing import Any

import pytest

from jobvisor import InvalidArgument, Queue
from jobvisor.queue.jsonvalue import progress_json
from jobvisor.schedules import ScheduleSpec
from tests.support.queue import table_snapshot

VALUE: dict[str, Any] = {
    "huge": 1e308,
    "wide": 12345678901234567890.5,
    "e16": 1.5e16,
    "tiny": 1e-300,
    "negative zero": -0.0,
    "one": 1.0,
    "big int": 10**30,
    "text": "1e+308 and -0.0 stay text",
    "nested": [{"zz": 1e20, "a": [-0.0, {"bb": 2, "c": 3}]}],
    "é": 1,
    "e": 2,
}
# What reads back: the same numbers (-0.0 as 0.0), keys in jsonb's order.
EXPECTED_KEYS = ["e", "é", "e16", "one", "huge", "text", "tiny", "wide", "nested",
                 "big int", "negative zero"]  # fmt: skip


def _check(value: Any) -> None:
    assert value == VALUE
    assert list(value) == EXPECTED_KEYS
    for key in ("huge", "wide", "e16", "tiny", "one", "negative zero"):
        assert type(value[key]) is float, (key, value[key])
    assert value["huge"] == 1e308 and value["wide"] == 12345678901234567890.5
    assert type(value["big int"]) is int
    assert math.copysign(1.0, value["negative zero"]) == 1.0
    (inner,) = value["nested"]
    assert list(inner) == ["a", "zz"] and type(inner["zz"]) is float
    assert math.copysign(1.0, inner["a"][0]) == 1.0 and list(inner["a"][1]) == ["c", "bb"]


def test_a_payload_reads_back_the_same_on_both_engines(queue: Queue) -> None:
    _check(queue.get(queue.enqueue("t", VALUE)).payload)
    (job_id,) = queue.enqueue_many([{"job_type": "t", "payload": VALUE}])
    _check(queue.get(job_id).payload)
    (job,) = queue.claim("w", limit=1)
    _check(job.payload)


def test_a_result_reads_back_the_same_on_both_engines(queue: Queue) -> None:
    job_id = queue.enqueue("t")
    (job,) = queue.claim("w")
    queue.complete(job, VALUE)
    _check(queue.get(job_id).result)


def test_progress_reads_back_the_same_on_both_engines(queue: Queue) -> None:
    job_id = queue.enqueue("t")
    (job,) = queue.claim("w")
    queue.renew_many([job], progress={job.id: progress_json(-0.0, "starting")})
    progress = queue.get(job_id).progress
    assert progress == {"note": "starting", "fraction": 0.0}
    assert list(progress or {}) == ["note", "fraction"]
    assert math.copysign(1.0, (progress or {})["fraction"]) == 1.0


@pytest.mark.parametrize(
    "bad", [{1: "a", "1": "b"}, {"x": [{None: 1}]}, {2.5: 1}, {True: 1}, {(1, 2): 1}]
)
def test_a_key_that_is_not_a_string_is_refused(queue: Queue, url: str, bad: Any) -> None:
    queue.enqueue("kept")
    before = table_snapshot(url)
    for call in (
        lambda: queue.enqueue("t", bad),
        lambda: queue.enqueue_many([{"job_type": "ok"}, {"job_type": "t", "payload": bad}]),
        lambda: ScheduleSpec.build("s", every=60, job_type="t", payload=bad),
    ):
        with pytest.raises(InvalidArgument) as info:
            call()
        message = str(info.value)
        assert "payload=" in message and "expected str keys only" in message, message
    assert table_snapshot(url) == before
    (job,) = queue.claim("w")
    held = table_snapshot(url)
    with pytest.raises(InvalidArgument, match=r"result=.*expected str keys only"):
        queue.complete(job, bad)
    assert table_snapshot(url) == held
    queue.complete(job)  # the claim is still held
