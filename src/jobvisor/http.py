"""A tiny HTTP/1.1 server for `/healthz`, `/readyz` and `/metrics`.

It runs on the supervisor's event loop (`asyncio.start_server`, no
framework) and answers from callables the supervisor provides, so a probe
never waits on the database:

    server = await start_http_server(
        config.http_addr,
        health=supervisor.health,  # () -> (ok, detail)
        ready=supervisor.readiness,
        metrics=metrics.exposition,
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
- Anything else: 404; a method other than GET or HEAD: 405.

A check may return a bool, or `(ok, detail)` to put one line of detail in
the body. A check that raises answers 503 (and `metrics` 500). Requests are
bounded (`MAX_REQUEST_BYTES` of request line and headers, bodies ignored),
each connection gets `REQUEST_TIMEOUT` seconds to send its request, and every
response closes the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from http import HTTPStatus
from typing import Final

from .log import get_logger

MAX_REQUEST_BYTES: Final = 8192
REQUEST_TIMEOUT: Final = 5.0
WRITE_TIMEOUT: Final = 10.0
METRICS_CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"

Check = Callable[[], "bool | tuple[bool, str]"]

log = get_logger("http")


def parse_addr(addr: str) -> tuple[str, int]:
    """(host, port) from `host:port`, `[v6]:port` or `:port` (every interface).
    Raises ValueError naming the value."""
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"http_addr={addr!r}: expected host:port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host or "0.0.0.0", int(port)


class HttpServer:
    """A running server; `address` is the (host, port) it listens on, with the
    real port when 0 was asked for."""

    def __init__(self, server: asyncio.Server) -> None:
        self._server = server
        sockname = server.sockets[0].getsockname()
        self.address: tuple[str, int] = (str(sockname[0]), int(sockname[1]))

    async def close(self) -> None:
        """Stop listening and wait for the connections being answered."""
        self._server.close()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._server.wait_closed(), WRITE_TIMEOUT)


async def start_http_server(
    addr: str,
    *,
    health: Check,
    ready: Check,
    metrics: Callable[[], bytes],
) -> HttpServer:
    """Listen on `addr` (`host:port`) and serve the three endpoints until
    `close()`. Raises OSError when the address cannot be bound (in use,
    not local) and ValueError when it does not parse."""
    host, port = parse_addr(addr)
    handler = _Handler(health=health, ready=ready, metrics=metrics)
    server = await asyncio.start_server(
        handler, host, port, limit=MAX_REQUEST_BYTES, reuse_address=True
    )
    http = HttpServer(server)
    log.info("http.listening", host=http.address[0], port=http.address[1])
    return http


class _Handler:
    def __init__(self, *, health: Check, ready: Check, metrics: Callable[[], bytes]) -> None:
        self.routes: dict[str, Callable[[], tuple[HTTPStatus, str, bytes]]] = {
            "/healthz": lambda: _probe(health),
            "/readyz": lambda: _probe(ready),
            "/metrics": lambda: _metrics(metrics),
        }

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            status, content_type, body, head_only = await self._answer(reader)
            lines = [
                f"HTTP/1.1 {status.value} {status.phrase}",
                f"Content-Type: {content_type}",
                f"Content-Length: {len(body)}",
                "Cache-Control: no-store",
                "X-Content-Type-Options: nosniff",
                "Connection: close",
                "",
                "",
            ]
            writer.write("\r\n".join(lines).encode("latin-1"))
            if not head_only:
                writer.write(body)
            await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT)
        except (TimeoutError, OSError):
            pass  # the client went away or stalled: nothing to answer
        finally:
            writer.close()
            with contextlib.suppress(OSError, asyncio.TimeoutError):
                await asyncio.wait_for(writer.wait_closed(), WRITE_TIMEOUT)

    async def _answer(self, reader: asyncio.StreamReader) -> tuple[HTTPStatus, str, bytes, bool]:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), REQUEST_TIMEOUT)
        except TimeoutError:
            return _text(HTTPStatus.REQUEST_TIMEOUT, "request timeout")
        except asyncio.LimitOverrunError:
            return _text(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "request too large")
        except asyncio.IncompleteReadError as exc:
            if len(exc.partial) >= MAX_REQUEST_BYTES:
                return _text(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "request too large")
            return _text(HTTPStatus.BAD_REQUEST, "incomplete request")
        request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = request_line.split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return _text(HTTPStatus.BAD_REQUEST, "malformed request line")
        method, target, _version = parts
        path = target.split("?", 1)[0]
        route = self.routes.get(path)
        if route is None:
            return _text(HTTPStatus.NOT_FOUND, f"no such endpoint: {path[:100]}")
        if method not in ("GET", "HEAD"):
            return _text(HTTPStatus.METHOD_NOT_ALLOWED, f"method {method[:20]} not allowed")
        status, content_type, body = route()
        return status, content_type, body, method == "HEAD"


def _text(status: HTTPStatus, text: str) -> tuple[HTTPStatus, str, bytes, bool]:
    return status, "text/plain; charset=utf-8", (text + "\n").encode(), False


def _probe(check: Check) -> tuple[HTTPStatus, str, bytes]:
    try:
        result = check()
    except Exception as exc:
        log.warning("http.check_failed", error=f"{type(exc).__name__}: {exc}")
        result = (False, "check raised an error")
    ok, detail = result if isinstance(result, tuple) else (bool(result), "")
    status = HTTPStatus.OK if ok else HTTPStatus.SERVICE_UNAVAILABLE
    body = ("ok" if ok else "unavailable") + (f": {detail}" if detail else "")
    return status, "text/plain; charset=utf-8", (body + "\n").encode()


def _metrics(metrics: Callable[[], bytes]) -> tuple[HTTPStatus, str, bytes]:
    try:
        body = metrics()
    except Exception as exc:
        log.warning("http.metrics_failed", error=f"{type(exc).__name__}: {exc}")
        return HTTPStatus.INTERNAL_SERVER_ERROR, "text/plain; charset=utf-8", b"error\n"
    return HTTPStatus.OK, METRICS_CONTENT_TYPE, body
