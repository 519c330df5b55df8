"""Who may act: the admin token, the session that remembers a login, and the
CSRF token every form carries.

- Without a token the dashboard is read-only: every action is refused.
- With one, a page's action needs a session that logged in with it (a
  cookie signed with a key derived from the token, so changing the token
  ends every session), and the JSON API needs `Authorization: Bearer <token>`.
- Every form (login included) carries the session's CSRF token, checked
  on every POST. The API takes no cookie, so it needs none.

The token is compared in constant time and never written anywhere: not in a
page, a log line, a cookie (the session holds a digest of it) or an error.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Final

from starlette.requests import Request

SESSION_COOKIE: Final = "jobvisor_session"
SESSION_MAX_AGE: Final = 12 * 3600
_CSRF: Final = "csrf"
_ADMIN: Final = "admin"


class Guard:
    """The admin token's keeper. `token` None: read-only."""

    def __init__(self, token: str | None) -> None:
        self._token = token or None
        # The session cookie's signing key and the digest a logged-in session
        # holds both come from the token; neither gives it back.
        seed = self._token.encode() if self._token else secrets.token_bytes(32)
        self.session_key = hmac.new(seed, b"jobvisor session key", hashlib.sha256).hexdigest()
        self._digest = hmac.new(seed, b"jobvisor admin", hashlib.sha256).hexdigest()

    @property
    def read_only(self) -> bool:
        return self._token is None

    def matches(self, given: str) -> bool:
        if self._token is None:
            return False
        return hmac.compare_digest(given.encode(), self._token.encode())

    def bearer(self, request: Request) -> bool:
        """Whether the request carries `Authorization: Bearer <the token>`."""
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and self.matches(given.strip())

    def logged_in(self, request: Request) -> bool:
        held = request.session.get(_ADMIN)
        return (
            not self.read_only
            and isinstance(held, str)
            and hmac.compare_digest(held.encode(), self._digest.encode())
        )

    def log_in(self, request: Request) -> None:
        request.session.clear()  # a fresh session (and CSRF token) at login
        request.session[_ADMIN] = self._digest

    @staticmethod
    def log_out(request: Request) -> None:
        request.session.clear()

    @staticmethod
    def csrf_token(request: Request) -> str:
        """The session's CSRF token, made on first use."""
        token = request.session.get(_CSRF)
        if not isinstance(token, str):
            token = secrets.token_urlsafe(32)
            request.session[_CSRF] = token
        return token

    @staticmethod
    def csrf_ok(request: Request, given: object) -> bool:
        token = request.session.get(_CSRF)
        return (
            isinstance(token, str)
            and isinstance(given, str)
            and hmac.compare_digest(token.encode(), given.encode())
        )
