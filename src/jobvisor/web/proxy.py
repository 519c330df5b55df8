"""What the dashboard believes about a request's way in: whether it came over
HTTPS (its session cookie is then marked `Secure`) and from which client
address (the throttle counts wrong tokens by it).

The server's word is taken by default. Uvicorn, which `jobvisor web` and
the supervisor serve with, already believes `X-Forwarded-Proto` and
`X-Forwarded-For` from a proxy on the loopback address. A proxy elsewhere
(a load balancer, an ingress) is believed only with `trust_proxy`, and
then only its own entry: the last value of each header, the one it wrote,
not those a client sent ahead of it."""

from __future__ import annotations

from typing import Final

from starlette.datastructures import Headers
from starlette.middleware.sessions import SessionMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

SCHEMES: Final = {"http", "https"}


def _last(headers: Headers, name: str) -> str:
    values = ",".join(headers.getlist(name))
    return values.rpartition(",")[2].strip()


class ForwardedHeaders:
    """Take the request's scheme and client address from the nearest proxy's
    `X-Forwarded-Proto` and `X-Forwarded-For`, when it sent them."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = Headers(scope=scope)
            proto, client = (
                _last(headers, "x-forwarded-proto").lower(),
                _last(headers, "x-forwarded-for"),
            )
            if proto in SCHEMES:
                scope = {**scope, "scheme": proto}
            if client:
                scope = {**scope, "client": (client, 0)}
        await self.app(scope, receive, send)


class SessionCookie:
    """Starlette's signed-cookie session, its cookie `Secure` on a request
    that came over HTTPS, or on every request with `always_secure`."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        secret_key: str,
        session_cookie: str,
        max_age: int,
        always_secure: bool,
    ) -> None:
        def sessions(https_only: bool) -> SessionMiddleware:
            return SessionMiddleware(
                app,
                secret_key=secret_key,
                session_cookie=session_cookie,
                max_age=max_age,
                same_site="strict",
                https_only=https_only,
            )

        self._plain, self._secure = sessions(False), sessions(True)
        self._always_secure = always_secure

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        secure = self._always_secure or scope.get("scheme") == "https"
        await (self._secure if secure else self._plain)(scope, receive, send)
