"""Keeping the database password out of everything jobvisor prints.

A password can reach a log line or an error message in two ways: inside the
URL itself (userinfo `postgresql://u:S3cret@h/db`, a query parameter
`?password=S3cret`, a key/value DSN `host=db password=hunter2`, or a URL so
malformed that no parser splits it), or inside a message derived from it (libpq
quotes the offending token: `invalid percent-encoded token: "S3cret%zz"`).

`redact_url` masks the first kind by shape, without needing the URL to parse.
`remember_secrets` keeps the passwords of every URL jobvisor opened, and
`redact_text` masks both kinds in any text: every URL-looking word, every
`password=` pair, and every remembered password wherever it appears.
`RedactFilter` applies `redact_text` to log records: it sits on jobvisor's
log handler and on psycopg's own loggers, so the pool's warnings are masked
too."""

from __future__ import annotations

import logging
import re
import threading
import traceback
import urllib.parse
from collections.abc import Iterable
from typing import Any

MASK = "***"

# A password shorter than this is masked in URLs and `password=` pairs, but not
# wherever its letters happen to appear in other text (that would mask every "a").
MIN_REMEMBERED = 4

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*:)(/*)")
# Only URLs of the schemes jobvisor opens are searched for in free text.
_URL_IN_TEXT = re.compile(r"(?i)\bpostgres(?:ql)?:[^\s\"'<>]*")
# `password=value` in a URL's query: the value ends at the next parameter.
_QUERY_PASSWORD = re.compile(r"(?i)([?&;]password=)[^&#;]*")
# `password = value` in a key/value DSN: a quoted value (with \' escapes) or a word.
_KV_PASSWORD = re.compile(r"(?i)(?<![\w.-])(password\s*=\s*)('(?:[^'\\]|\\.)*'?|\S+)")
# In free text a bare value also ends at a quote or a URL separator.
_KV_PASSWORD_IN_TEXT = re.compile(
    r"(?i)(?<![\w.-])(password\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s\"'&#;,]+)"
)

_remembered: set[str] = set()
_lock = threading.Lock()


def _userinfo_span(rest: str) -> tuple[int, int] | None:
    """Where the password sits in `rest` (the URL after `scheme://`), or None.

    The userinfo ends at the last `@` before the query; when there is none
    there (a password holding a raw `?`), at the last `@` of all."""
    query = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    at = rest.rfind("@", 0, query)
    if at < 0:
        at = rest.rfind("@")
    if at < 0:
        return None
    colon = rest.find(":", 0, at)
    if colon < 0:
        return None
    return colon + 1, at


def redact_url(url: str) -> str:
    """The URL with any password replaced by ***, safe to print.

    Works by shape, so a URL that no parser accepts (`…:S3cret%zz@…`,
    `postgresql:/u:S3cret@…`, `…@[::1/db`) is masked as well as a well-formed
    one; a key/value DSN has its `password=` value masked."""
    if not isinstance(url, str):
        return MASK
    match = _SCHEME.match(url)
    if match is None or "=" in url[: match.end()]:  # a key/value DSN
        return _KV_PASSWORD.sub(rf"\g<1>{MASK}", url)
    if match.group(1).lower() == "sqlite:":  # a file path: no password, any character
        return url
    head, rest = url[: match.end()], url[match.end() :]
    span = _userinfo_span(rest)
    if span is not None:
        rest = rest[: span[0]] + MASK + rest[span[1] :]
    return head + _QUERY_PASSWORD.sub(rf"\g<1>{MASK}", rest)


def secrets_of(url: str) -> set[str]:
    """The password(s) a database URL or DSN carries, as written and decoded."""
    found: set[str] = set()
    if not isinstance(url, str):
        return found
    match = _SCHEME.match(url)
    if match is not None and match.group(1).lower() == "sqlite:":
        return found
    if match is not None and "=" not in url[: match.end()]:
        found = _url_secrets(url[match.end() :])
    else:
        found = _dsn_secrets(url)
    found |= {urllib.parse.unquote(s) for s in found}
    return {s for s in found if s}


def _url_secrets(rest: str) -> set[str]:
    """The passwords of a URL after its scheme: the userinfo's, `?password=`."""
    found: set[str] = set()
    span = _userinfo_span(rest)
    if span is not None:
        found.add(rest[span[0] : span[1]])
    for value in re.findall(r"(?i)[?&;]password=([^&#;]*)", rest):
        found |= {value, urllib.parse.unquote_plus(value)}
    return found


def _dsn_secrets(dsn: str) -> set[str]:
    """The passwords of a key/value DSN (`password=…`, quoted or not)."""
    found: set[str] = set()
    for _, value in _KV_PASSWORD.findall(dsn):
        quoted = value.startswith("'")
        found.add(re.sub(r"\\(.)", r"\1", value[1:].removesuffix("'")) if quoted else value)
    return found


def remember_secrets(url: str) -> None:
    """Remember the password(s) of `url`, so that `redact_text` masks them in any
    message, and make sure psycopg's loggers mask them too."""
    secrets = {s for s in secrets_of(url) if len(s) >= MIN_REMEMBERED}
    if not secrets:
        return
    with _lock:
        _remembered.update(secrets)
    install_library_filters()


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every database URL in it passed through `redact_url`, every
    `password=` value masked, and every remembered (or given) password replaced
    by ***."""
    if not text:
        return text
    with _lock:
        known = sorted({*_remembered, *(s for s in secrets if s)}, key=len, reverse=True)
    for secret in known:
        text = text.replace(secret, MASK)
    text = _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), text)
    return _KV_PASSWORD_IN_TEXT.sub(rf"\g<1>{MASK}", text)


def _redact_value(value: Any) -> Any:
    if isinstance(value, str):
        return redact_text(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    text = str(value)
    shown = redact_text(text)
    return value if shown == text else shown


class RedactFilter(logging.Filter):
    """Masks passwords in a log record: its message, its fields and its
    traceback. Never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: logging reports it itself
            return True
        record.msg, record.args = redact_text(message), None
        fields = getattr(record, "jv_fields", None)
        if isinstance(fields, dict):
            record.jv_fields = {k: _redact_value(v) for k, v in fields.items()}
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = redact_text("".join(traceback.format_exception(*record.exc_info)))
            record.exc_text = record.exc_text.rstrip("\n")
            record.exc_info = None
        elif record.exc_text:
            record.exc_text = redact_text(record.exc_text)
        if record.stack_info:
            record.stack_info = redact_text(record.stack_info)
        return True


# The libraries whose own log records can quote a connection string.
LIBRARY_LOGGERS = ("psycopg", "psycopg.pool", "py.warnings", "asyncio")


def install_library_filters() -> None:
    """Put a `RedactFilter` on the loggers of the libraries that may quote the
    URL (a logger's filter sees the records logged to it, whatever handler
    the application set up). Idempotent."""
    for name in LIBRARY_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactFilter) for f in logger.filters):
            logger.addFilter(RedactFilter())
