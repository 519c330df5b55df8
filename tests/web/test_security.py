"""The dashboard's defences, over HTTP on both engines: the admin token it
accepts, the API's bounded JSON, and the throttle on wrong tokens."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from starlette.types import Receive, Scope, Send

from jobvisor import JobStatus, Queue
from jobvisor.queue.api import AsyncQueue
from jobvisor.queue.errors import InvalidArgument
from jobvisor.web import app
from jobvisor.web.proxy import ForwardedHeaders
from jobvisor.web.throttle import BURST, REFILL_SECONDS, Throttle
from tests.support.web import TOKEN, Browser, serving


@pytest.mark.parametrize(
    "token",
    [
        "Z7",  # too short
        "0123456789abcde",  # one short of 16
        "pässwört-geheim-0123456789",  # a header carries Latin-1: never matches
        "spaces in a long token 0123",  # stripped from a header
    ],
)
def test_app_refuses_an_admin_token_it_could_not_defend_or_match(
    aqueue: AsyncQueue, token: str
) -> None:
    with pytest.raises(InvalidArgument) as caught:
        app(aqueue, admin_token=token)
    message = str(caught.value)
    assert message.startswith("admin_token=(not shown): expected at least 16 characters")
    assert "printable ASCII without spaces" in message and token not in message


def test_deeply_nested_json_is_refused_with_400(
    dashboard: Browser, queue: Queue, caplog: pytest.LogCaptureFixture
) -> None:
    job_id = queue.enqueue("send")
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    deep = b"[" * 100_000 + b"]" * 100_000
    with caplog.at_level(logging.INFO):
        status, text, _ = dashboard.request("/api/actions/cancel", raw=deep, headers=headers)
        assert status == 400, text
        assert "nested more than 8 deep" in text
        body = b'{"ids": [[[[[[[[["' + str(job_id).encode() + b'"]]]]]]]]]}'
        status, text, _ = dashboard.request("/api/actions/cancel", raw=body, headers=headers)
        assert status == 400, text
    assert "RecursionError" not in caplog.text and "Traceback" not in caplog.text
    # Brackets inside a string are text, not nesting.
    status, done = dashboard.api("/api/actions/pause", {"queue": "q" + "[" * 20}, token=TOKEN)
    assert status == 200 and queue.paused() == ["q" + "[" * 20], done
    assert queue.get(job_id).status is JobStatus.PENDING  # nothing was done


def test_a_body_too_large_is_refused_with_413(dashboard: Browser, queue: Queue) -> None:
    job_id = queue.enqueue("send")
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    body = b'{"ids": ["' + str(job_id).encode() + b'"], "pad": "' + b"x" * 300_000 + b'"}'
    status, text, _ = dashboard.request("/api/actions/cancel", raw=body, headers=headers)
    assert status == 413 and "expected at most" in text
    assert queue.get(job_id).status is JobStatus.PENDING


def test_wrong_logins_are_throttled_and_the_token_never_logged(
    dashboard: Browser, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = "not-the-token-but-long-enough"
    with caplog.at_level(logging.INFO):
        for _ in range(BURST):
            status, page = dashboard.log_in(wrong)
            assert status == 400 and "That is not the admin token." in page
        # The right token too is refused now: it is not even compared.
        status, page, headers = dashboard.request(
            "/login", form={"csrf": dashboard.csrf("/login"), "token": TOKEN, "next": "/"}
        )
    assert status == 429 and "Too many wrong tokens from 127.0.0.1" in page
    assert 0 < int(headers["retry-after"]) <= REFILL_SECONDS
    assert "Logged in" not in page
    assert "web.throttled" in caplog.text
    assert TOKEN not in caplog.text and wrong not in caplog.text


def test_wrong_bearer_tokens_are_throttled(dashboard: Browser, queue: Queue) -> None:
    queue.enqueue("send", queue="mail")
    for _ in range(BURST):
        status, body = dashboard.api("/api/actions/pause", {"queue": "mail"}, token="wrong")
        assert status == 401, body
    status, body = dashboard.api("/api/actions/pause", {"queue": "mail"}, token=TOKEN)
    assert status == 429 and "try again in" in body["error"]
    _, _, headers = dashboard.request(
        "/api/actions/pause",
        body={"queue": "mail"},
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    assert int(headers["retry-after"]) > 0
    assert queue.paused() == []  # nothing was done


def test_a_bucket_refills_with_time_and_each_client_has_its_own() -> None:
    now = [1000.0]
    throttle = Throttle(burst=3, refill_seconds=10.0, clock=lambda: now[0])
    assert [throttle.failed("10.0.0.1") for _ in range(3)] == [False, False, True]
    assert throttle.retry_after("10.0.0.1") == 10
    assert throttle.retry_after("10.0.0.2") == 0
    now[0] += 4
    assert throttle.retry_after("10.0.0.1") == 6
    now[0] += 6
    assert throttle.retry_after("10.0.0.1") == 0
    assert throttle.failed("10.0.0.1") is True  # one try, then wait again


def test_the_table_of_clients_is_bounded() -> None:
    now = [0.0]
    throttle = Throttle(burst=2, refill_seconds=10.0, max_clients=3, clock=lambda: now[0])
    for i in range(3):
        throttle.failed(f"10.0.0.{i}")
        throttle.failed(f"10.0.0.{i}")
    throttle.failed("10.0.0.9")  # over the bound: the least recent goes
    assert throttle.retry_after("10.0.0.0") == 0
    assert throttle.retry_after("10.0.0.2") > 0


def _copy_cookies(source: Browser, target: Browser) -> None:
    for cookie in source.jar:
        target.jar.set_cookie(cookie)


def test_logout_ends_the_session_in_every_process(queue: Queue, url: str) -> None:
    """Two dashboards over one database (two supervisors' own): a cookie
    saved before its logout acts in neither, though its signature holds."""
    make = lambda q: app(q, admin_token=TOKEN)  # noqa: E731
    with serving(url, make) as one, serving(url, make) as two:
        admin = Browser(one)
        assert admin.log_in()[0] == 200
        here, there = Browser(one), Browser(two)
        _copy_cookies(admin, here)
        _copy_cookies(admin, there)
        csrf = admin.csrf()
        status, page = there.post("/actions/pause", csrf=csrf, queue="mail", confirmed="1")
        assert status == 200 and "Paused queue &#39;mail&#39;." in page
        status, _ = admin.post("/logout", csrf=csrf)
        assert status == 200
        for saved in (here, there):
            status, page = saved.post("/actions/resume", csrf=csrf, queue="mail", confirmed="1")
            assert status == 403 and "log in first" in page
            assert "Log out" not in saved.get("/")[1]
        assert queue.paused() == ["mail"]
        # Logging in again makes a new session; the old one stays ended.
        assert admin.log_in()[0] == 200
        status, _ = here.post("/actions/resume", csrf=csrf, queue="mail", confirmed="1")
        assert status == 403 and queue.paused() == ["mail"]


def test_auto_marks_the_cookie_secure_behind_a_local_tls_proxy(dashboard: Browser) -> None:
    _, _, plain = dashboard.request("/login")
    assert "secure" not in plain["set-cookie"].lower()
    proxy = Browser(dashboard.base)  # a new visitor, through the local proxy
    _, _, proxied = proxy.request("/login", headers={"X-Forwarded-Proto": "https"})
    assert "; secure" in proxied["set-cookie"].lower()


def test_a_trusted_proxy_says_the_scheme_and_client_by_its_own_entry() -> None:
    seen: list[Scope] = []

    async def inner(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope)

    headers = [
        (b"x-forwarded-proto", b"http, https"),
        (b"x-forwarded-for", b"198.51.100.7, 203.0.113.9"),  # the client's, the proxy's
    ]
    scope: Scope = {"type": "http", "scheme": "http", "client": ("10.0.0.2", 5), "headers": headers}
    asyncio.run(ForwardedHeaders(inner)(scope, _nothing, _nothing))
    assert seen[0]["scheme"] == "https" and seen[0]["client"] == ("203.0.113.9", 0)


async def _nothing(*_: object) -> Any:
    return None
