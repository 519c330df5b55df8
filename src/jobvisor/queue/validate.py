"""What jobvisor accepts, defined once: every bound, every default that more
than one module needs, and the checks that apply them.

The queue's operations, the job model, the registry, the configuration and
the command line all check their values here, so a value is refused with
the same words wherever it comes in: `InvalidArgument` naming the value and
what was expected, before anything is written. The configuration turns the
same refusal into a `ConfigError` (exit 78).

Why the bounds are where they are:

- Every time jobvisor writes must read back as a Python `datetime` on both
  engines (years 1 to 9999, in any session time zone): `run_at` is from
  `MIN_RUN_AT` to `MAX_DELAY` ahead of now, and a delay, a snooze, a retry or
  a retention at most `MAX_DELAY`, so "now + delay" is far from year 9999.
- A lease is renewed at half its length while the job runs; one longer than
  `MAX_LEASE` only delays the recovery of a crashed worker's jobs.
- A name goes into a PostgreSQL `NOTIFY` payload (under 8,000 bytes) and into
  indexes; a dedupe key into a unique index (a B-tree entry holds about
  2,700 bytes). Both are counted in UTF-8 bytes, and text must encode as
  UTF-8 (no lone surrogates): PostgreSQL refuses what SQLite would store.
  A name holds no control character either (see `printable`): it is printed
  by the command line and the dashboard, and must show as it was written.
- A payload is JSON of at most `max_payload_bytes` (UTF-8) nested at most
  `MAX_PAYLOAD_DEPTH` deep: deeper JSON cannot be read back by the worker.
- Counts (concurrency, pool size, limits) are capped well below what a
  64-bit database integer holds and where a larger value is a typo.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import math
import os
import re
from collections.abc import Mapping
from typing import Any, Final

from .errors import InvalidArgument

UTC = dt.UTC

HOUR: Final = 3600.0
DAY: Final = 86400.0
YEAR: Final = 365 * DAY

# --- defaults used in more than one place ----------------------------------------

DEFAULT_LEASE: Final = 30.0
"""Seconds a claim holds a job before the reaper may take it back."""

DEFAULT_POOL_SIZE: Final = 4
"""Database connections a queue (a worker) keeps open at most."""

DEFAULT_BUSY_TIMEOUT: Final = 10.0
"""Seconds a SQLite statement waits for a lock before it gives up."""

DEFAULT_POLL_INTERVAL: Final = 1.0
"""Seconds at most between a worker's claims while it hears no notice."""

DEFAULT_SHUTDOWN_TIMEOUT: Final = 30.0
"""Seconds SIGTERM lets running jobs finish before they are released."""

DEFAULT_CANCEL_GRACE: Final = 10.0
"""Seconds a cancelled thread handler has to end before its worker is replaced."""

DEFAULT_MAX_PAYLOAD_BYTES: Final = 1024 * 1024
"""The payload size limit (UTF-8 bytes of its JSON) unless configured."""

MAX_PAYLOAD_BYTES_ENV: Final = "JOBVISOR_MAX_PAYLOAD_BYTES"

DEFAULT_MAX_RESULT_BYTES: Final = 1024 * 1024
"""The result size limit (UTF-8 bytes of its JSON) unless configured."""

MAX_RESULT_BYTES_ENV: Final = "JOBVISOR_RESULT_MAX_BYTES"

# --- durations (seconds) ---------------------------------------------------------

MAX_LEASE: Final = DAY
MAX_DELAY: Final = 10 * YEAR
"""delay, run_at ahead of now, snooze, retry_in, a retry policy's cap, retention."""
MAX_INTERVAL: Final = DAY
"""Intervals and timeouts of the service (poll, reap, shutdown, worker timeout),
a handler's timeouts and a leadership's time to live."""
MIN_INTERVAL: Final = 0.01
"""A loop interval shorter than this only burns CPU."""
MAX_BUSY_TIMEOUT: Final = HOUR
"""How long SQLite waits for another writer's lock."""
MIN_LEASE: Final = 1.0
"""A configured lease (or leadership) shorter than this expires between two renewals."""
MIN_WORKER_TIMEOUT: Final = 3.0
"""Three heartbeats: a shorter timeout kills healthy workers."""

MIN_RUN_AT: Final = dt.datetime(1970, 1, 1, tzinfo=UTC)
"""The earliest `run_at` (a time in the past is due at once); the latest is
`MAX_DELAY` ahead of now."""

# --- counts ----------------------------------------------------------------------

MAX_WORKERS: Final = 1024
MAX_CONCURRENCY: Final = 10_000
MAX_POOL_SIZE: Final = 1000
MAX_CLAIM_LIMIT: Final = MAX_CONCURRENCY
MAX_LIST_LIMIT: Final = 10_000
MAX_BATCH_SIZE: Final = 100_000
MAX_RESTARTS: Final = 1_000_000
MAX_INT32: Final = 2**31 - 1
# A fleet-wide limit (concurrency, key_concurrency, a rate's count) counts
# jobs across every host; past a million it is a typo.
MAX_FLEET_LIMIT: Final = 1_000_000
# A rate's period, by its unit: "100/s", "5/m", "1000/h".
RATE_UNITS: Final = {"s": 1.0, "m": 60.0, "h": 3600.0}

# --- text and payloads -----------------------------------------------------------

MAX_NAME_BYTES: Final = 200
"""A queue name, job type or worker id, in UTF-8 bytes."""
MAX_KEY_BYTES: Final = 1000
"""A dedupe key or correlation id, in UTF-8 bytes."""
MAX_PAYLOAD_DEPTH: Final = 256
MAX_PAYLOAD_BYTES_LIMIT: Final = 64 * 1024 * 1024
"""The largest payload size limit that may be configured."""


def flag(text: str) -> bool:
    """An on/off word as settings and environment variables spell it: 1, true,
    yes, on; 0, false, no, off or nothing. ValueError for anything else."""
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(text)


def short(value: Any, width: int = 80) -> str:
    """`repr(value)` cut to `width` characters, for a message; never raises
    (an integer too long to print is described instead)."""
    try:
        text = repr(value)
    except ValueError:  # an integer of more digits than Python will print
        text = f"<{type(value).__name__} too large to show>"
    except RecursionError:
        text = f"<{type(value).__name__} nested too deep to show>"
    return text if len(text) <= width else text[: width - 3] + "..."


# What a terminal acts on rather than shows: the C0 and C1 controls and DEL
# (an escape sequence retitles or clears it), the line and paragraph
# separators, and the marks that reorder text (a right-to-left override makes
# "gpj.exe" look like "exe.jpg").
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u2028-\u202e\u2066-\u2069]")
_CONTROLS_BUT_LINES = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u2028-\u202e\u2066-\u2069]"
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, lines: bool = False) -> str:
    """`text` (from the database: a name, an error, a payload) safe to print
    to a terminal: every control character written as its escape (`\\x1b`,
    `\\u202e`); with `lines`, newlines and tabs are kept."""
    return (_CONTROLS_BUT_LINES if lines else _CONTROLS).sub(_escape, text)


def seconds(
    name: str,
    value: object,
    *,
    high: float,
    low: float = 0.0,
    positive: bool = False,
) -> float:
    """A duration given as seconds (int or float) or a `timedelta`: finite,
    at least `low` (above it when `positive`) and at most `high`."""
    if isinstance(value, dt.timedelta):
        result = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        try:
            result = float(value)
        except OverflowError:
            result = math.inf
    else:
        result = math.nan
    if not (result > low if positive else result >= low) or not result <= high:
        raise InvalidArgument(
            f"{name}={short(value)}: expected {seconds_range(low, high, positive)}"
        )
    return result


def seconds_range(low: float, high: float, positive: bool = False) -> str:
    """How `seconds` describes its bounds in a message."""
    if positive and low == 0:
        start = "positive seconds"
    elif low == 0:
        start = "non-negative seconds"
    else:
        start = f"seconds >= {_number(low)}"
    return f"{start}, at most {_number(high)}"


def _number(value: float) -> str:
    return str(int(value)) if value.is_integer() else f"{value:g}"


def count(name: str, value: object, *, high: int, low: int = 1) -> int:
    """An integer (not a bool) within `low`..`high`."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidArgument(f"{name}={short(value)}: expected {count_range(low, high)}")
    return value


def count_range(low: int, high: int) -> str:
    """How `count` describes its bounds in a message."""
    return f"an integer >= {low}, at most {high}"


def text(name: str, value: object, *, max_bytes: int, strip: bool = False) -> str:
    """A non-empty string without NUL that encodes as UTF-8 in at most
    `max_bytes` bytes (with `strip`, not only blanks either)."""
    if not isinstance(value, str) or not (value.strip() if strip else value) or "\x00" in value:
        raise InvalidArgument(f"{name}={short(value)}: expected a non-empty string")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidArgument(
            f"{name}={short(value)}: expected text that encodes as UTF-8 (a lone surrogate?)"
        ) from None
    if size > max_bytes:
        raise InvalidArgument(
            f"{name}={short(value, 40)}: expected at most {max_bytes} UTF-8 bytes, got {size}"
        )
    return value


def name(label: str, value: object) -> str:
    """A queue name, job type or worker id: text as `text` takes it, without
    control characters (see `printable`), so it prints as it was written."""
    checked = text(label, value, max_bytes=MAX_NAME_BYTES, strip=True)
    found = _CONTROLS.search(checked)
    if found is not None:
        raise InvalidArgument(
            f"{label}={short(value)}: expected a name without control characters "
            f"(found {_escape(found)})"
        )
    return checked


def key(label: str, value: object) -> str | None:
    """A dedupe key or correlation id, or None."""
    return None if value is None else text(label, value, max_bytes=MAX_KEY_BYTES)


def run_at(label: str, value: object, now: dt.datetime | None = None) -> dt.datetime:
    """A timezone-aware datetime from `MIN_RUN_AT` to `MAX_DELAY` after `now`
    (the local clock by default), as UTC."""
    if not isinstance(value, dt.datetime):
        raise InvalidArgument(f"{label}={short(value)}: expected a datetime")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidArgument(
            f"{label}={value!r}: expected a timezone-aware datetime, got a naive one"
        )
    latest = (now or dt.datetime.now(UTC)) + dt.timedelta(seconds=MAX_DELAY)
    try:
        utc = value.astimezone(UTC)
    except OverflowError:
        utc = None
    if utc is None or not MIN_RUN_AT <= utc <= latest:
        raise InvalidArgument(
            f"{label}={value!r}: expected a time from {MIN_RUN_AT:%Y-%m-%d} UTC to "
            f"{_number(MAX_DELAY / YEAR)} years from now"
        )
    return utc


def payload_depth(value: Any) -> int:
    """How deep containers nest in `value`, counted without recursion and
    stopping as soon as `MAX_PAYLOAD_DEPTH` is passed."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > MAX_PAYLOAD_DEPTH:
            break
        stack.extend((child, depth + 1) for child in children)
    return deepest


def payload_size(name: str, value: Any, size: int, limit: int) -> None:
    """Refuse a payload whose JSON is `size` UTF-8 bytes when over `limit`."""
    if size > limit:
        raise InvalidArgument(
            f"{name}={short(value, 40)}: expected at most {limit} bytes of JSON, got {size} "
            f"(raise {MAX_PAYLOAD_BYTES_ENV} to allow more)"
        )


def max_payload_bytes(value: object = None, env: Mapping[str, str] | None = None) -> int:
    """The payload size limit: `value` if given, else `JOBVISOR_MAX_PAYLOAD_BYTES`
    from the environment, else the default."""
    return _byte_limit(
        "max_payload_bytes", value, MAX_PAYLOAD_BYTES_ENV, DEFAULT_MAX_PAYLOAD_BYTES, env
    )


def max_result_bytes(value: object = None, env: Mapping[str, str] | None = None) -> int:
    """The result size limit: `value` if given, else `JOBVISOR_RESULT_MAX_BYTES`
    from the environment, else the default. Same range as the payload's."""
    return _byte_limit(
        "max_result_bytes", value, MAX_RESULT_BYTES_ENV, DEFAULT_MAX_RESULT_BYTES, env
    )


def _byte_limit(
    name: str, value: object, variable: str, default: int, env: Mapping[str, str] | None
) -> int:
    """A size limit in bytes (1 KiB to `MAX_PAYLOAD_BYTES_LIMIT`): `value`,
    else the environment's `variable`, else `default`."""
    if value is not None:
        return count(name, value, low=1024, high=MAX_PAYLOAD_BYTES_LIMIT)
    raw = (os.environ if env is None else env).get(variable)
    if raw is None:
        return default
    try:
        return count(variable, int(raw), low=1024, high=MAX_PAYLOAD_BYTES_LIMIT)
    except (ValueError, InvalidArgument):
        raise InvalidArgument(
            f"{variable}={short(raw)}: expected {count_range(1024, MAX_PAYLOAD_BYTES_LIMIT)}"
        ) from None


_HOST_LABEL = re.compile(r"(?!-)[A-Za-z0-9_-]{1,63}(?<!-)")
MAX_HOST_CHARS: Final = 253


def _host(host: str) -> str:
    """The host of a listen address: empty (every interface), an IPv4
    address or host name, or an IPv6 address in brackets; without them."""
    bracketed = host.startswith("[") and host.endswith("]")
    if bracketed or ":" in host:  # `::1:9090` is read as host ::1, port 9090
        try:
            return str(ipaddress.IPv6Address(host[1:-1] if bracketed else host))
        except ValueError:
            raise InvalidArgument(f"host {host!r}: expected an IPv6 address in brackets") from None
    labels = host.removesuffix(".").split(".")
    if host and (len(host) > MAX_HOST_CHARS or not all(map(_HOST_LABEL.fullmatch, labels))):
        raise InvalidArgument(f"host {host!r}: expected a host name, an IPv4 or [IPv6] address")
    return host


def listen_addr(label: str, addr: str) -> tuple[str, int]:
    """(host, port) of `host:port`, `[v6]:port` or `:port` (host empty: every
    interface); the port from 0 (any free one) to 65535."""
    expected = "host:port, [IPv6]:port or :port, the port from 0 to 65535"
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise InvalidArgument(f"{label}={addr!r}: expected {expected}")
    try:
        return _host(host), int(port)
    except InvalidArgument as exc:
        raise InvalidArgument(f"{label}={addr!r}: {exc}") from None


def module_attr(spec: str) -> tuple[str, str]:
    """Split `module:attribute` (the attribute may be dotted)."""
    module, sep, attr = spec.partition(":")
    if not sep or not module or not attr or any(not part for part in attr.split(".")):
        raise InvalidArgument(f"app={spec!r}: expected module:attribute")
    return module, attr


def fleet_limit(label: str, value: object) -> int | None:
    """A fleet-wide concurrency (or key_concurrency), or None for no limit."""
    return None if value is None else count(label, value, high=MAX_FLEET_LIMIT)


def rate(label: str, value: object) -> tuple[int, float] | None:
    """A rate such as "100/s", "5/m" or "1000/h" as (count, period in
    seconds), or None for no limit."""
    if value is None:
        return None
    number, _, unit = value.partition("/") if isinstance(value, str) else ("", "", "")
    number, unit = number.strip(), unit.strip()
    digits = number.isascii() and number.isdigit()
    if not digits or unit not in RATE_UNITS or not 1 <= int(number) <= MAX_FLEET_LIMIT:
        raise InvalidArgument(
            f'{label}={short(value)}: expected a rate such as "100/s", "5/m" or '
            f'"1000/h" (a count from 1 to {MAX_FLEET_LIMIT}, per s, m or h)'
        )
    return int(number), RATE_UNITS[unit]


def rate_text(count: int, period: float) -> str:
    """A rate as `rate` reads it: (100, 1.0) is "100/s"."""
    unit = next((u for u, seconds in RATE_UNITS.items() if seconds == period), None)
    return f"{count}/{unit}" if unit is not None else f"{count}/{period:g}s"
