"""The health and metrics server, spoken to over real TCP connections."""

from __future__ import annotations

import asyncio
import re
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from jobvisor import http
from jobvisor.http import HttpServer, parse_addr, start_http_server
from jobvisor.metrics import Metrics


class State:
    def __init__(self) -> None:
        self.alive = True
        self.ready: bool | tuple[bool, str] = True
        self.metrics = Metrics()


def serve(body: Callable[[HttpServer, State], Awaitable[None]]) -> None:
    """Start a server on an ephemeral port, run `body`, close the server."""

    async def main() -> None:
        state = State()

        def ready() -> bool | tuple[bool, str]:
            return state.ready

        server = await start_http_server(
            "127.0.0.1:0",
            health=lambda: state.alive,
            ready=ready,
            metrics=state.metrics.exposition,
        )
        try:
            await asyncio.wait_for(body(server, state), 60)
        finally:
            await server.close()

    asyncio.run(main())


async def request(server: HttpServer, raw: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send `raw` and read the whole response (the server closes the connection)."""
    reader, writer = await asyncio.open_connection(*server.address)
    writer.write(raw)
    await writer.drain()
    data = await reader.read()
    writer.close()
    await writer.wait_closed()
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split(" ")[1]), headers, body


async def get(
    server: HttpServer, path: str, method: str = "GET"
) -> tuple[int, dict[str, str], bytes]:
    return await request(server, f"{method} {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())


def test_healthz_follows_the_health_check() -> None:
    async def body(server: HttpServer, state: State) -> None:
        status, headers, text = await get(server, "/healthz")
        assert (status, text) == (200, b"ok\n")
        assert headers["connection"] == "close"
        assert headers["content-length"] == str(len(text))
        state.alive = False
        status, _, text = await get(server, "/healthz")
        assert (status, text) == (503, b"unavailable\n")

    serve(body)


def test_readyz_follows_the_ready_check_with_its_detail() -> None:
    async def body(server: HttpServer, state: State) -> None:
        assert (await get(server, "/readyz"))[0] == 200
        state.ready = (False, "database last answered 40s ago")
        status, _, text = await get(server, "/readyz?verbose=1")
        assert status == 503
        assert text == b"unavailable: database last answered 40s ago\n"

    serve(body)


def test_a_check_that_raises_answers_503() -> None:
    async def main() -> None:
        def broken() -> bool:
            raise RuntimeError("boom")

        server = await start_http_server(
            "127.0.0.1:0", health=broken, ready=broken, metrics=lambda: b""
        )
        try:
            assert (await get(server, "/healthz"))[0] == 503
            assert (await get(server, "/readyz"))[0] == 503
        finally:
            await server.close()

    asyncio.run(main())


def test_metrics_serves_the_prometheus_exposition() -> None:
    async def body(server: HttpServer, state: State) -> None:
        state.metrics.record_restart("crashed")
        status, headers, text = await get(server, "/metrics")
        assert status == 200
        assert headers["content-type"].startswith("text/plain; version=0.0.4")
        assert b'jobvisor_worker_restarts_total{reason="crashed"} 1.0' in text

    serve(body)


def test_unknown_paths_methods_and_head() -> None:
    async def body(server: HttpServer, state: State) -> None:
        assert (await get(server, "/"))[0] == 404
        assert (await get(server, "/healthz/extra"))[0] == 404
        assert (await get(server, "/healthz", method="POST"))[0] == 405
        status, headers, text = await get(server, "/healthz", method="HEAD")
        assert (status, text) == (200, b"")
        assert headers["content-length"] == "3"
        assert (await request(server, b"nonsense\r\n\r\n"))[0] == 400

    serve(body)


def test_an_oversized_request_is_refused() -> None:
    async def body(server: HttpServer, state: State) -> None:
        huge = b"GET /healthz HTTP/1.1\r\nX-Filler: " + b"a" * (2 * http.MAX_REQUEST_BYTES)
        status, headers, _ = await request(server, huge + b"\r\n\r\n")
        assert status == 400
        assert headers["connection"] == "close"

    serve(body)


def test_a_client_that_never_sends_a_request_is_timed_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(http, "REQUEST_TIMEOUT", 0.2)

    async def body(server: HttpServer, state: State) -> None:
        status, _, _ = await request(server, b"GET /healthz HTTP/1.1\r\n")  # never ends
        assert status == 408

    serve(body)


def test_a_standard_client_reads_the_endpoints() -> None:
    async def body(server: HttpServer, state: State) -> None:
        url = f"http://{server.address[0]}:{server.address[1]}"

        def fetch(path: str) -> tuple[int, bytes]:
            try:
                with urllib.request.urlopen(url + path, timeout=10) as response:
                    return int(response.status), bytes(response.read())
            except urllib.error.HTTPError as exc:
                with exc:
                    return exc.code, exc.read()

        assert await asyncio.to_thread(fetch, "/healthz") == (200, b"ok\n")
        state.ready = False
        assert (await asyncio.to_thread(fetch, "/readyz"))[0] == 503
        assert (
            b"# TYPE jobvisor_claims_total counter"
            in (await asyncio.to_thread(fetch, "/metrics"))[1]
        )

    serve(body)


def test_an_address_in_use_raises_oserror() -> None:
    async def body(server: HttpServer, state: State) -> None:
        with pytest.raises(OSError):
            await start_http_server(
                f"127.0.0.1:{server.address[1]}",
                health=lambda: True, ready=lambda: True, metrics=lambda: b"",
            )  # fmt: skip

    serve(body)


@pytest.mark.parametrize(
    ("addr", "expected"),
    [
        ("127.0.0.1:9090", ("127.0.0.1", 9090)),
        (":9090", ("0.0.0.0", 9090)),
        ("[::1]:80", ("::1", 80)),
        ("localhost:0", ("localhost", 0)),
    ],
)
def test_parse_addr(addr: str, expected: tuple[str, int]) -> None:
    assert parse_addr(addr) == expected


@pytest.mark.parametrize(
    "addr", ["9090", "host:", "host:http", "host:70000", "[::1", "[::1:9090", "[nope]:80", "a b:80"]
)
def test_parse_addr_refuses_bad_values(addr: str) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(addr))):
        parse_addr(addr)


def test_every_response_says_nosniff() -> None:
    """The 404 echoes the path as text: no browser may sniff it into HTML."""

    async def body(server: HttpServer, state: State) -> None:
        state.ready = False
        answers = [
            await get(server, "/healthz"),
            await get(server, "/readyz"),
            await get(server, "/metrics"),
            await get(server, "/<script>alert(1)</script>"),
            await get(server, "/healthz", method="POST"),
            await get(server, "/healthz", method="HEAD"),
            await request(server, b"nonsense\r\n\r\n"),
            await request(server, b"GET / HTTP/1.1\r\nX: " + b"a" * 2 * http.MAX_REQUEST_BYTES),
        ]
        assert {status for status, _, _ in answers} == {200, 503, 404, 405, 400}
        for status, headers, _ in answers:
            assert headers.get("x-content-type-options") == "nosniff", status

    serve(body)


def test_close_lets_a_request_in_flight_finish() -> None:
    """A stop waits (up to WRITE_TIMEOUT) for the answer being written."""

    async def main() -> None:
        arrived, release = asyncio.Event(), asyncio.Event()

        async def slow(scope: Any, receive: Any, send: Any) -> None:
            arrived.set()
            await release.wait()
            headers = [(b"content-length", b"14")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": b"late but whole"})

        server = await start_http_server(
            "127.0.0.1:0", health=lambda: True, ready=lambda: True, metrics=lambda: b"",
            dashboard=slow,
        )  # fmt: skip
        answer = asyncio.create_task(get(server, "/slow"))
        await asyncio.wait_for(arrived.wait(), 10)
        closing = asyncio.create_task(server.close())
        await asyncio.sleep(0.3)
        assert not closing.done()  # it waits for the answer
        release.set()
        status, _, body = await asyncio.wait_for(answer, 10)
        assert (status, body) == (200, b"late but whole")
        await asyncio.wait_for(closing, 10)

    asyncio.run(main())
