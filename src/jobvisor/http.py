"""The supervisor's HTTP server: `/healthz`, `/readyz`, `/metrics`, and the
dashboard when one is given.

It is a Starlette application served by uvicorn on the caller's event loop
(the supervisor's: no thread, no second loop), answering the probes from
callables the caller provides, so a probe never waits on the database:

    server = await start_http_server(
        config.http_addr,
        health=supervisor.health,  # () -> (ok, detail)
        ready=supervisor.readiness,
        metrics=metrics.exposition,
        dashboard=jobvisor.web.app(queue),  # optional: mounted at /
    )
    ...
    await server.close()

- `GET /healthz`: 200 when `health()` is true, else 503. Liveness: the parent
  loop turns (it answered at all), its workers are alive and none reports a
  failing loop. It must not depend on the database, or a database outage
  would restart every pod.
- `GET /readyz`: 200 when `ready()` is true, else 503. Readiness: the database
  answered within seconds and the workers are up.
- `GET /metrics`: 200 with `metrics()` in the Prometheus text format.
- Anything else: the dashboard's, or 404; a method other than GET or HEAD
  on a probe: 405.

A check may return a bool, or `(ok, detail)` to put one line of detail in
the body. A check that raises answers 503 (and `metrics` 500). The probes'
answers close their connection (a kubelet opens one per probe anyway). A
request line and headers are bounded (`MAX_REQUEST_BYTES`: uvicorn answers
400 past it) and a connection that has not sent a whole request within
`REQUEST_TIMEOUT` seconds gets 408 and is closed, which uvicorn alone does
not do (it times out only idle keep-alive connections).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable
from typing import Final

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from .log import get_logger
from .queue import validate

MAX_REQUEST_BYTES: Final = 8192
REQUEST_TIMEOUT: Final = 5.0
WRITE_TIMEOUT: Final = 10.0
METRICS_CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
PROBE_HEADERS: Final = {"Cache-Control": "no-store", "Connection": "close"}

Check = Callable[[], "bool | tuple[bool, str]"]

log = get_logger("http")


def parse_addr(addr: str) -> tuple[str, int]:
    """(host, port) from `host:port`, `[v6]:port` or `:port` (every interface).
    Raises ValueError naming the value (`validate.listen_addr`)."""
    host, port = validate.listen_addr("http_addr", addr)
    return host or "0.0.0.0", port


class HttpServer:
    """A running server; `address` is the (host, port) it listens on, with the
    real port when 0 was asked for."""

    def __init__(self, server: uvicorn.Server, sock: socket.socket) -> None:
        self._server = server
        sockname = sock.getsockname()
        self.address: tuple[str, int] = (str(sockname[0]), int(sockname[1]))
        self._ticking = asyncio.create_task(server.main_loop(), name="http-server")

    async def close(self) -> None:
        """Stop listening, close the idle connections and wait (at most
        `WRITE_TIMEOUT`) for the requests being answered; then cut the rest."""
        server = self._server
        server.should_exit = True
        with contextlib.suppress(asyncio.TimeoutError):
            async with asyncio.timeout(WRITE_TIMEOUT):
                await self._ticking  # its next turn (a tenth of a second) sees should_exit
        loop = asyncio.get_running_loop()
        cut = loop.call_later(WRITE_TIMEOUT, setattr, server, "force_exit", True)
        try:
            await server.shutdown()
        finally:
            cut.cancel()


class _GuardedProtocol(H11Protocol):
    """uvicorn's h11 protocol, with a deadline for the request's head: a
    connection that has not sent a whole request within `REQUEST_TIMEOUT`
    seconds is answered 408 and closed, so idle sockets cannot pile up."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_timer: asyncio.TimerHandle | None = self.loop.call_later(
            REQUEST_TIMEOUT, self._head_timeout
        )

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.cycle is not None:
            self._cancel_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        # uvicorn's own answer to a malformed or oversized request, with
        # nosniff like every other answer (its text is fixed, never the input).
        self.transport.write(_raw_answer(b"400 Bad Request", msg.encode("ascii") + b"\n"))
        self.transport.close()

    def _cancel_head_timer(self) -> None:
        timer = getattr(self, "_head_timer", None)
        if timer is not None:
            timer.cancel()
            self._head_timer = None

    def _head_timeout(self) -> None:
        self._head_timer = None
        if self.cycle is None and not self.transport.is_closing():
            self.transport.write(_raw_answer(b"408 Request Timeout", b"request timeout\n"))
            self.transport.close()


def _raw_answer(status: bytes, body: bytes) -> bytes:
    """A whole response, for the answers given before any request was read."""
    return (
        b"HTTP/1.1 " + status + b"\r\n"
        b"Content-Type: text/plain; charset=utf-8\r\n"
        b"X-Content-Type-Options: nosniff\r\n"
        b"Connection: close\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )


def _nosniff(app: ASGIApp) -> ASGIApp:
    """Every answer of the application says `X-Content-Type-Options: nosniff`:
    a 404 echoes the path as text, and no browser may sniff it into HTML."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.append((b"x-content-type-options", b"nosniff"))
                message = {**message, "headers": headers}
            await send(message)

        await app(scope, receive, sending)

    return wrapped


def probe_app(
    *,
    health: Check,
    ready: Check,
    metrics: Callable[[], bytes],
    dashboard: ASGIApp | None = None,
) -> ASGIApp:
    """The ASGI application the server runs: the three probes, then the
    `dashboard` (when given) for every other path."""

    def probe(check: Check) -> Callable[[Request], Response]:
        return lambda _request: _probe(check)

    routes: list[Route | Mount] = [
        Route("/healthz", probe(health), methods=["GET", "HEAD"]),
        Route("/readyz", probe(ready), methods=["GET", "HEAD"]),
        Route("/metrics", lambda _request: _metrics(metrics), methods=["GET", "HEAD"]),
    ]
    if dashboard is not None:
        routes.append(Mount("/", app=dashboard))
    app = Starlette(routes=routes)
    app.add_exception_handler(404, _not_found)
    app.add_exception_handler(405, _not_allowed)
    return _nosniff(app)


async def start_http_server(
    addr: str,
    *,
    health: Check,
    ready: Check,
    metrics: Callable[[], bytes],
    dashboard: ASGIApp | None = None,
) -> HttpServer:
    """Listen on `addr` (`host:port`) and serve the three endpoints (and the
    `dashboard`) until `close()`. Raises OSError when the address cannot be
    bound (in use, not local) and ValueError when it does not parse."""
    app = probe_app(health=health, ready=ready, metrics=metrics, dashboard=dashboard)
    return await serve(app, addr)


async def serve(app: ASGIApp, addr: str) -> HttpServer:
    """Serve an ASGI `app` on `addr` on the running loop until `close()`.
    Raises OSError when the address cannot be bound, ValueError when it
    does not parse."""
    host, port = parse_addr(addr)
    sock = _bind(host, port)
    config = uvicorn.Config(
        app,
        http=_GuardedProtocol,
        lifespan="off",
        log_config=None,
        access_log=False,
        server_header=False,
        h11_max_incomplete_event_size=MAX_REQUEST_BYTES,
    )
    config.load()
    server = uvicorn.Server(config)
    server.lifespan = config.lifespan_class(config)  # "off": nothing to start
    try:
        await server.startup(sockets=[sock])
    except BaseException:
        sock.close()
        raise
    http = HttpServer(server, sock)
    log.info("http.listening", host=http.address[0], port=http.address[1])
    return http


def _bind(host: str, port: int) -> socket.socket:
    """A listening socket: bound here, so a busy address raises OSError
    (uvicorn would log it and exit the process)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, sockaddr = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(sockaddr)
        sock.listen(128)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def _text(status: int, text: str) -> Response:
    return PlainTextResponse(text + "\n", status_code=status, headers=PROBE_HEADERS)


async def _not_found(request: Request, exc: Exception) -> Response:
    return _text(404, f"no such endpoint: {request.url.path[:100]}")


async def _not_allowed(request: Request, exc: Exception) -> Response:
    return _text(405, f"method {request.method[:20]} not allowed")


def _probe(check: Check) -> Response:
    try:
        result = check()
    except Exception as exc:
        log.warning("http.check_failed", error=f"{type(exc).__name__}: {exc}")
        result = (False, "check raised an error")
    ok, detail = result if isinstance(result, tuple) else (bool(result), "")
    body = ("ok" if ok else "unavailable") + (f": {detail}" if detail else "")
    return _text(200 if ok else 503, body)


def _metrics(metrics: Callable[[], bytes]) -> Response:
    try:
        body = metrics()
    except Exception as exc:
        log.warning("http.metrics_failed", error=f"{type(exc).__name__}: {exc}")
        return _text(500, "error")
    return Response(body, media_type=METRICS_CONTENT_TYPE, headers=PROBE_HEADERS)
