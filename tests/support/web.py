"""The dashboard served for real: uvicorn on an ephemeral port, on a loop in
a thread of its own, over a queue on a test's database; and a
cookie-keeping HTTP client to speak to it."""

from __future__ import annotations

import asyncio
import contextlib
import http.cookiejar
import json
import re
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.types import ASGIApp

from jobvisor.http import serve
from jobvisor.queue.api import connect_async
from jobvisor.web import app

TOKEN = "test-admin-token-0123456789"


@contextlib.contextmanager
def serving(url: str, make: Callable[[Any], ASGIApp]) -> Iterator[str]:
    """Serve `make(async_queue)` until the block ends; yields its base URL."""
    started = threading.Event()
    found: dict[str, Any] = {}
    loop = asyncio.new_event_loop()

    async def main() -> None:
        queue = connect_async(url, pool_size=2)
        stop = asyncio.Event()
        found["stop"] = stop
        try:
            server = await serve(make(queue), "127.0.0.1:0")
            found["base"] = "http://{}:{}".format(*server.address)
        finally:
            started.set()
        await stop.wait()
        await server.close()
        await queue.close()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    assert started.wait(30), "the dashboard did not start"
    try:
        yield found["base"]
    finally:
        loop.call_soon_threadsafe(found["stop"].set)
        thread.join(30)
        loop.close()


class Browser:
    """An HTTP client that keeps cookies and follows redirects."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def request(
        self,
        path: str,
        *,
        form: Mapping[str, Any] | None = None,
        body: Any = None,
        raw: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> tuple[int, str, dict[str, str]]:
        data = raw
        if form is not None:
            data = urllib.parse.urlencode(form, doseq=True).encode()
        elif body is not None:
            data = json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, headers=dict(headers or {}))
        try:
            with self.opener.open(req, timeout=30) as response:
                return response.status, response.read().decode(), dict(response.headers)
        except urllib.error.HTTPError as exc:
            with exc:
                return exc.code, exc.read().decode(), dict(exc.headers)

    def get(self, path: str) -> tuple[int, str]:
        status, text, _ = self.request(path)
        return status, text

    def csrf(self, path: str = "/jobs") -> str:
        """The CSRF token of this session's forms, read from a page."""
        _, text = self.get(path)
        match = re.search(r'name="csrf" value="([^"]+)"', text)
        assert match, text
        return match.group(1)

    def post(self, path: str, **fields: Any) -> tuple[int, str]:
        status, text, _ = self.request(path, form=fields)
        return status, text

    def api(self, path: str, body: Any = None, token: str | None = None) -> tuple[int, Any]:
        headers = {"Content-Type": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        status, text, _ = self.request(path, body=body if body is not None else {}, headers=headers)
        return status, json.loads(text)

    def log_in(self, token: str = TOKEN) -> tuple[int, str]:
        return self.post("/login", csrf=self.csrf("/login"), token=token, next="/")


def mounted(prefix: str) -> Callable[[Any], ASGIApp]:
    """A user's own Starlette application with the dashboard under `prefix`."""
    return lambda q: Starlette(routes=[Mount(prefix, app=app(q, admin_token=TOKEN))])
