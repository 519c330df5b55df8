"""Bad input is refused at the call, before anything is written, with an
error that names the value and says what was expected (issue 2, point 10)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from typing import Any

import pytest

import jobvisor
from jobvisor import InvalidArgument, Queue, RetryPolicy
from jobvisor.queue.internal import service_ops
from jobvisor.queue.model import UTC
from jobvisor.schedules import ScheduleSpec
from tests.support.queue import close_to, row_count, table_snapshot

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


# --- bounds: every value out of its documented range is refused the same way on
# both engines, naming the value, with the table unchanged ------------------------

DEEP: Any = []
for _ in range(3000):
    DEEP = [DEEP]


def nested(depth: int) -> Any:
    value: Any = {}
    for _ in range(depth - 1):
        value = [value]
    return value


BOUND_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("payload nested 257 deep", {"payload": nested(257)}, "expected JSON nested at most 256"),
    ("run_at year 1 east of UTC",
     {"run_at": dt.datetime(1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=14)))}, "run_at="),
    ("run_at year 9999 west of UTC",
     {"run_at": dt.datetime(9999, 12, 31, 23, tzinfo=dt.timezone(dt.timedelta(hours=-5)))},
     "run_at="),
    ("run_at before 1970", {"run_at": dt.datetime(1900, 1, 1, tzinfo=UTC)}, "run_at="),
    ("delay 1e12", {"delay": 1e12}, "delay=1000000000000.0"),
    ("delay a huge int", {"delay": 10**400}, "delay=1000"),
    ("delay a huge timedelta", {"delay": dt.timedelta(days=999_999_999)}, "delay=datetime"),
    ("payload nested 3,000 deep", {"payload": DEEP}, "payload=<list nested too deep"),
    ("payload 10**5000", {"payload": {"n": 10**5000}}, "payload="),
    ("payload with a lone surrogate", {"payload": {"s": "a\udc80"}}, "payload={'s': 'a\\udc80'}"),
    ("job type with a lone surrogate", {"job_type": "t\udc80"}, "job_type='t\\udc80'"),
    ("queue of 8,000 bytes", {"queue": "q" * 8000}, "queue='qqqq"),
    ("queue of 202 bytes", {"queue": "é" * 101}, "expected at most 200 UTF-8 bytes, got 202"),
    ("job type of 201 bytes", {"job_type": "t" * 201}, "job_type='tttt"),
    ("run_at past 10 years ahead", {"run_at": dt.datetime(2200, 1, 1, tzinfo=UTC)}, "run_at="),
    ("dedupe key of 100 kB", {"dedupe_key": "k" * 100_000}, "dedupe_key='kkkk"),
    ("dedupe key of 1,001 bytes", {"dedupe_key": "k" * 1001}, "at most 1000 UTF-8 bytes"),
    ("dedupe key with a lone surrogate", {"dedupe_key": "\ud800"}, "dedupe_key='\\ud800'"),
    ("correlation id of 2 kB", {"correlation_id": "c" * 2000}, "correlation_id='cccc"),
    ("max_attempts 2**63", {"max_attempts": 2**63}, "max_attempts=9223372036854775808"),
    ("priority -2**63", {"priority": -(2**63)}, "priority=-9223372036854775808"),
]  # fmt: skip


@pytest.mark.parametrize(("kwargs", "named"), [c[1:] for c in BOUND_CASES],
                         ids=[c[0] for c in BOUND_CASES])  # fmt: skip
def test_enqueue_refuses_values_out_of_bounds(
    queue: Queue, url: str, kwargs: dict[str, Any], named: str
) -> None:
    queue.enqueue("kept")
    before = table_snapshot(url)
    for call in (
        lambda: queue.enqueue(**{"job_type": "t", **kwargs}),
        lambda: queue.enqueue_many([{"job_type": "ok"}, {"job_type": "t", **kwargs}]),
    ):
        with pytest.raises(InvalidArgument) as info:
            call()
        message = str(info.value)
        assert named in message and "expected" in message, message
        assert len(message) < 400, message
    assert table_snapshot(url) == before


def test_the_largest_values_in_bounds_are_written_and_read_back(queue: Queue) -> None:
    """The edges of each bound are accepted, and what they wrote reads back."""
    latest = dt.datetime.now(UTC) + dt.timedelta(days=3649)
    ids = [
        queue.enqueue("t", run_at=latest),
        queue.enqueue("t", run_at=dt.datetime(1970, 1, 1, tzinfo=UTC)),
        queue.enqueue("t", delay=10 * 365 * 86400),
        queue.enqueue("é" * 100, queue="q" * 200, dedupe_key="k" * 1000),
        queue.enqueue("t", {"n": 10**300, "s": "\u00e9\U0001f600"}),
        queue.enqueue("t", nested(256)),
    ]
    jobs = [queue.get(i) for i in ids]
    assert close_to(jobs[0].run_at, latest)
    assert jobs[3].queue == "q" * 200 and jobs[3].dedupe_key == "k" * 1000
    assert jobs[4].payload == {"n": 10**300, "s": "\u00e9\U0001f600"}
    assert jobs[5].payload == nested(256)


def test_the_payload_size_limit(url: str, make_queue: Any) -> None:
    small = make_queue(max_payload_bytes=2048)
    small.enqueue("t", "x" * 2000)
    before = table_snapshot(url)
    for payload, size in (("x" * 2047, 2049), ("é" * 1100, 2202)):
        with pytest.raises(InvalidArgument) as info:
            small.enqueue("t", payload)
        assert f"expected at most 2048 bytes of JSON, got {size}" in str(info.value)
        assert "JOBVISOR_MAX_PAYLOAD_BYTES" in str(info.value)
        with pytest.raises(InvalidArgument, match=r"jobs\[1\]: payload="):
            small.enqueue_many([{"job_type": "t"}, {"job_type": "t", "payload": payload}])
    assert table_snapshot(url) == before


def test_the_default_payload_size_limit_is_one_mib(queue: Queue, url: str) -> None:
    queue.enqueue("t", "x" * (1024 * 1024 - 2))
    before = table_snapshot(url)
    with pytest.raises(InvalidArgument, match="expected at most 1048576 bytes"):
        queue.enqueue("t", "x" * (1024 * 1024 - 1))
    assert table_snapshot(url) == before


def test_the_payload_size_limit_comes_from_the_environment(
    url: str, make_queue: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOBVISOR_MAX_PAYLOAD_BYTES", "4096")
    q = make_queue()
    with pytest.raises(InvalidArgument, match="expected at most 4096 bytes"):
        q.enqueue("t", "x" * 5000)
    for bad in ("0", "-1", "1e9", "lots", str(2**63)):
        monkeypatch.setenv("JOBVISOR_MAX_PAYLOAD_BYTES", bad)
        with pytest.raises(InvalidArgument) as info:
            jobvisor.connect(url)
        assert f"JOBVISOR_MAX_PAYLOAD_BYTES={bad!r}" in str(info.value)


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda q: q.claim("w", lease=1e12), "lease=1000000000000.0"),
        (lambda q: q.claim("w", lease=86401), "lease=86401"),
        (lambda q: q.claim("w", limit=2**63), "limit=9223372036854775808"),
        (lambda q: q.claim("w", limit=10_001), "limit=10001"),
        (lambda q: q.claim("w" * 201), "worker_id='wwww"),
        (lambda q: service_ops(q).leader_attempt_elect("l", "h", ttl=0.5), "ttl=0.5"),
        (lambda q: service_ops(q).leader_attempt_elect("l", "h", ttl=86401), "ttl=86401"),
        (lambda q: q.claim("w\udc80"), "worker_id='w\\udc80'"),
        (lambda q: q.claim("w", queues=["q" * 8000]), "queues[0]='qqqq"),
        (lambda q: q.claim("w", job_types=["a\x00"]), "job_types[0]='a\\x00'"),
        (lambda q: q.dead.list(2**63), "limit=9223372036854775808"),
        (lambda q: q.dead.list(10_001), "limit=10001"),
        (lambda q: q.dead.list(job_type="a\x00"), "job_type='a\\x00'"),
        (lambda q: q.dead.count(job_type="a\x00"), "job_type='a\\x00'"),
        (lambda q: q.cleanup(1e308), "older_than=1e+308"),
        (lambda q: q.cleanup({"dead": 1e12}), "older_than[dead]=1000000000000.0"),
        (lambda q: q.cleanup(1, batch_size=2**63), "batch_size=9223372036854775808"),
        (lambda q: q.requeue_crashed("w" * 300), "worker_id='wwww"),
        (
            lambda q: q.dead.requeue_type("t", run_at=dt.datetime(10, 1, 1, tzinfo=UTC)),
            "run_at=datetime.datetime(10, 1, 1",
        ),
    ],
)
def test_queue_calls_refuse_values_out_of_bounds(
    queue: Queue, url: str, call: Any, named: str
) -> None:
    queue.enqueue("t")
    before = table_snapshot(url)
    with pytest.raises(InvalidArgument) as info:
        call(queue)
    assert named in str(info.value) and "expected" in str(info.value), str(info.value)
    assert table_snapshot(url) == before


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda q, j: q.fail(j, "boom", retry_in=1e308), "retry_in=1e+308"),
        (lambda q, j: q.fail(j, "boom", retry_in=1e12), "retry_in=1000000000000.0"),
        (lambda q, j: q.snooze(j, 1e12), "delay=1000000000000.0"),
        (lambda q, j: q.snooze(j, dt.timedelta(days=3651)), "delay=datetime.timedelta"),
        (lambda q, j: q.fail(j, "boom", retry_in=10 * 365 * 86400 + 1), "retry_in=315360001"),
        (lambda q, j: q.renew(j, lease=1e12), "lease=1000000000000.0"),
    ],
)
def test_held_job_calls_refuse_values_out_of_bounds(
    queue: Queue, url: str, call: Any, named: str
) -> None:
    queue.enqueue("t")
    (job,) = queue.claim("w")
    before = table_snapshot(url)
    with pytest.raises(InvalidArgument) as info:
        call(queue, job)
    assert named in str(info.value) and "expected" in str(info.value), str(info.value)
    assert table_snapshot(url) == before
    queue.complete(job)  # the claim is still held


def test_an_error_text_with_a_lone_surrogate_is_recorded(queue: Queue) -> None:
    queue.enqueue("t", max_attempts=1)
    (job,) = queue.claim("w")
    queue.fail(job, "bad \udc80 byte")
    assert queue.get(job.id).last_error == "bad ? byte"


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"lease": 1e12}, "lease=1000000000000.0"),
        ({"lease": math.nan}, "lease=nan"),
        ({"pool_size": 0}, "pool_size=0"),
        ({"pool_size": 10**6}, "pool_size=1000000"),
        ({"max_payload_bytes": 10}, "max_payload_bytes=10"),
        ({"busy_timeout": -1}, "busy_timeout=-1"),
        ({"busy_timeout": 3601}, "busy_timeout=3601"),
    ],
)
def test_connect_refuses_options_out_of_bounds(
    url: str, options: dict[str, Any], named: str
) -> None:
    with pytest.raises(InvalidArgument, match="expected") as info:
        jobvisor.connect(url, **options)
    assert named in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [({"cap": 1e12}, "cap=1000000000000.0"), ({"base": math.inf, "cap": math.inf}, "base=inf")],
)
def test_retry_policy_refuses_values_out_of_bounds(kwargs: dict[str, float], named: str) -> None:
    with pytest.raises(InvalidArgument, match="expected") as info:
        RetryPolicy(**kwargs)
    assert named in str(info.value)


# --- control characters: a name is refused with one, anywhere a name comes in ---

CONTROL_NAMES = ["a\x1b]0;owned\x07\x1b[2J", "tab\there", "line\nbreak", "del\x7f", "c1\x9b",
                 "rtl\u202egpj.exe", "sep\u2028"]  # fmt: skip


@pytest.mark.parametrize("bad", CONTROL_NAMES)
def test_a_name_with_a_control_character_is_refused_everywhere(
    queue: Queue, url: str, bad: str
) -> None:
    queue.enqueue("kept")
    queue.pause("held")
    before = (table_snapshot(url), queue.paused(), queue.limits(), queue.schedules())
    calls: list[tuple[str, Any]] = [
        ("job_type=", lambda: queue.enqueue(bad)),
        ("queue=", lambda: queue.enqueue("t", queue=bad)),
        ("jobs[1]: job_type=", lambda: queue.enqueue_many([{"job_type": "ok"}, {"job_type": bad}])),
        ("jobs[0]: queue=", lambda: queue.enqueue_many([{"job_type": "t", "queue": bad}] * 2)),
        ("queue=", lambda: queue.pause(bad)),
        ("queue=", lambda: queue.resume(bad)),
        ("queue=", lambda: queue.set_limit(queue=bad, concurrency=1)),
        ("job_type=", lambda: queue.set_limit(job_type=bad, concurrency=1)),
        ("queue=", lambda: queue.clear_limit(queue=bad)),
        ("job_type=", lambda: queue.cancel_many(job_type=bad)),
        ("queue=", lambda: queue.cancel_many(queue=bad)),
        ("job_type=", lambda: queue.dead.requeue_type(bad)),
        ("job_type=", lambda: queue.dead.discard_type(bad)),
        ("worker_id=", lambda: queue.claim(bad)),
        ("queues[0]=", lambda: queue.claim("w", queues=[bad])),
        ("job_types[0]=", lambda: queue.claim("w", job_types=[bad])),
        ("schedule name=", lambda: ScheduleSpec.build(bad, every=60, job_type="t")),
        ("job_type=", lambda: ScheduleSpec.build("s", every=60, job_type=bad)),
        ("queue=", lambda: ScheduleSpec.build("s", every=60, job_type="t", queue=bad)),
    ]  # fmt: skip
    for named, call in calls:
        with pytest.raises(InvalidArgument) as info:
            call()
        message = str(info.value)
        assert f"{named}{bad!r}" in message, message
        assert "expected a name without control characters" in message, message
    assert (table_snapshot(url), queue.paused(), queue.limits(), queue.schedules()) == before


def test_a_schedule_row_with_a_control_character_is_refused(queue: Queue, url: str) -> None:
    """Schedules reach the database through `schedule_sync`, which checks
    again what a `Schedule` built by hand carries."""
    row = ScheduleSpec.build("s", every=60, job_type="t").row(dt.datetime.now(UTC))
    bad = dataclasses.replace(row, job_type="t\x1b[2J")
    with pytest.raises(InvalidArgument, match=r"job_type='t\\x1b\[2J': expected a name"):
        service_ops(queue).schedule_sync([bad])
    assert queue.schedules() == []


def test_printable_text_and_other_names_are_accepted(queue: Queue) -> None:
    names = ["café", "emoji \U0001f600", "日本語", "with space", "a\u200db"]
    for name in names:
        job = queue.get(queue.enqueue(name, queue=name))
        assert (job.job_type, job.queue) == (name, name)
    # Only names are held to this: a dedupe key, an error or a payload may
    # carry any character but NUL (the command line escapes them when printing).
    job_id = queue.enqueue("t", {"s": "\x1b[2J"}, queue="q", dedupe_key="k\x1b", max_attempts=1)
    (job,) = queue.claim("w", queues=["q"])
    queue.fail(job, "boom\x1b]0;x\x07")
    dead = queue.get(job_id)
    assert dead.payload == {"s": "\x1b[2J"} and dead.dedupe_key == "k\x1b"
    assert dead.last_error is not None and "\x1b]0;x\x07" in dead.last_error
