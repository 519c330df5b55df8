"""Who may act: the admin token, the session that remembers a login, and the
CSRF token every form carries.

- Without a token the dashboard is read-only: every action is refused.
- With one, a page's action needs a session that logged in with it (a
  cookie signed with a key derived from the token, so changing the token
  ends every session), and the JSON API needs `Authorization: Bearer <token>`.
- A login is also recorded in the database (`queue.web_sessions`), under a
  digest of a random session id the cookie carries; a session acts only
  while its record is there. Logging out deletes it, so a copy of the
  cookie saved before acts no more, in this process or any other serving
  the dashboard over the same database.
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

from ..queue.api import AsyncQueue
from ..queue.internal import dashboard_ops

SESSION_COOKIE: Final = "jobvisor_session"
SESSION_MAX_AGE: Final = 12 * 3600
_CSRF: Final = "csrf"
_ADMIN: Final = "admin"
_SESSION_ID: Final = "sid"


class Guard:
    """The admin token's keeper. `token` None: read-only. Logins are
    recorded in `queue`'s database."""

    def __init__(self, token: str | None, queue: AsyncQueue) -> None:
        self._token = token or None
        self._queue = queue
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

    async def logged_in(self, request: Request) -> bool:
        """Whether the request's session logged in with the token and has not
        logged out since (asked of the database once per request)."""
        known = getattr(request.state, "logged_in", None)
        if isinstance(known, bool):
            return known
        held, session = request.session.get(_ADMIN), request.session.get(_SESSION_ID)
        found = (
            not self.read_only
            and isinstance(held, str)
            and hmac.compare_digest(held.encode(), self._digest.encode())
            and isinstance(session, str)
            and await dashboard_ops(self._queue).web_session_alive(_session_digest(session))
        )
        request.state.logged_in = found
        return found

    async def log_in(self, request: Request) -> None:
        request.session.clear()  # a fresh session (and CSRF token) at login
        session = secrets.token_urlsafe(32)
        await dashboard_ops(self._queue).web_session_start(
            _session_digest(session), ttl=SESSION_MAX_AGE
        )
        request.session[_ADMIN] = self._digest
        request.session[_SESSION_ID] = session
        request.state.logged_in = True

    async def log_out(self, request: Request) -> None:
        """End the session everywhere: its record goes, then its cookie."""
        session = request.session.get(_SESSION_ID)
        if isinstance(session, str):
            await dashboard_ops(self._queue).web_session_end(_session_digest(session))
        request.session.clear()
        request.state.logged_in = False

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


def _session_digest(session: str) -> str:
    """What the database holds of a session id: nothing a cookie could carry."""
    return hashlib.sha256(session.encode()).hexdigest()
