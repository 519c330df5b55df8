"""What a PostgreSQL URL must be before any connection is tried.

libpq checks little when it splits a URL and much when it connects: a
password holding a raw `@` makes it read the rest of the password as the host
name (which then goes to DNS and into every error message), and an option
value it cannot use (`sslmode=bogus`, a port `notaport`) is refused only by
each connection attempt, which a pool retries for ever as if the server were
away. Both are mistakes in the URL that no retry fixes, so they are refused
here, once, with a message that names the option and quotes no password.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from ..redact import redact_url
from .errors import InvalidArgument

# Options libpq reads as an integer (a sign and digits, blanks around).
INTEGER_OPTIONS: Final = frozenset(
    {
        "connect_timeout",
        "keepalives",
        "keepalives_idle",
        "keepalives_interval",
        "keepalives_count",
        "tcp_user_timeout",
    }
)

# Options libpq accepts only a few words for.
CHOICE_OPTIONS: Final[Mapping[str, tuple[str, ...]]] = {
    "sslmode": ("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
    "gssencmode": ("disable", "prefer", "require"),
    "channel_binding": ("disable", "prefer", "require"),
    "target_session_attrs": (
        "any",
        "read-write",
        "read-only",
        "primary",
        "standby",
        "prefer-standby",
    ),
    "load_balance_hosts": ("disable", "random"),
    "sslnegotiation": ("postgres", "direct"),
}


class InvalidURL(InvalidArgument):
    """A database URL refused before any connection: `expected` says what
    was wanted, in words that quote no password."""

    def __init__(self, shown: str, expected: str) -> None:
        self.expected = expected
        super().__init__(f"{shown}: expected {expected}")


_INTEGER = re.compile(r"\s*[-+]?\d+\s*")
MAX_PORT: Final = 65535


def check_authority(url: str) -> None:
    """Refuse a URL with more than one raw `@` before its query: libpq takes
    the first as the end of the user and password, and the rest of the
    password as the host. An `@` in a password (or a database name) must be
    percent-encoded as `%40`. The message masks the password."""
    rest = url.split("://", 1)[1] if "://" in url else url
    before_query = re.split(r"[?#]", rest, maxsplit=1)[0]
    authority = before_query.split("/", 1)[0]
    ats = before_query.count("@")
    if ats > 1 or (ats == 1 and "@" not in authority):
        raise InvalidURL(
            f"database URL {redact_url(url)!r}",
            "at most one '@', the one before the host: percent-encode an '@' in the"
            " password as %40",
        )


def check_options(options: Mapping[str, str | None]) -> None:
    """Refuse an option value libpq would refuse at every connection attempt:
    a port that is not a number from 1 to 65535 (one per host), an integer
    option that is not an integer, a choice that is none of its words."""
    ports = options.get("port")
    if ports:
        for port in ports.split(","):
            text = port.strip()
            if text and not (text.isdigit() and 1 <= int(text) <= MAX_PORT):
                raise InvalidURL(
                    f"database URL: port {port!r}", f"the port to be a number from 1 to {MAX_PORT}"
                )
    for name in sorted(INTEGER_OPTIONS & options.keys()):
        value = options[name]
        if value is not None and not _INTEGER.fullmatch(value):
            raise InvalidURL(f"database URL: {name}={value!r}", f"{name} to be an integer")
    for name, choices in CHOICE_OPTIONS.items():
        value = options.get(name)
        if value is not None and value not in choices:
            raise InvalidURL(
                f"database URL: {name}={value!r}", f"{name} to be one of {', '.join(choices)}"
            )
