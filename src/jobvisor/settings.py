"""Every setting of `jobvisor run`: its `JOBVISOR_*` variable and flag, its
default, and the parser that checks a value (a `ConfigError` naming the
variable, the value and what is expected). `jobvisor.config` reads them into
a `Config`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from .exitcodes import ExitCode
from .queue import validate
from .queue.api import parse_url
from .queue.conninfo import InvalidURL
from .queue.errors import InvalidArgument, JobvisorError
from .redact import redact_url

EX_CONFIG = ExitCode.CONFIG
ENV_PREFIX = "JOBVISOR_"


# The settings that may hold a password: shown with it masked.
SECRET_FIELDS = frozenset({"database_url", "listen_url"})


class ConfigError(JobvisorError):
    """One invalid setting: names the variable, the value and what is expected."""

    def __init__(self, variable: str, value: str, expected: str) -> None:
        self.variable, self.value, self.expected = variable, value, expected
        name = variable.upper().replace("-", "_")  # env or --flag
        secret = any(name.endswith(field.upper()) for field in SECRET_FIELDS)
        shown = redact_url(value) if secret else value
        super().__init__(f"{variable}={shown!r}: expected {expected}")


@dataclasses.dataclass(frozen=True, slots=True)
class _Seconds:
    """Parse a duration in seconds within its bounds (see `jobvisor.queue.validate`)."""

    high: float
    low: float = 0.0
    positive: bool = False

    def __call__(self, text: str) -> float:
        try:
            return validate.seconds(
                "", float(text), high=self.high, low=self.low, positive=self.positive
            )
        except InvalidArgument:
            raise ValueError from None

    @property
    def expected(self) -> str:
        return validate.seconds_range(self.low, self.high, self.positive)


@dataclasses.dataclass(frozen=True, slots=True)
class _Count:
    """Parse an integer within its bounds."""

    high: int
    low: int = 1

    def __call__(self, text: str) -> int:
        try:
            return validate.count("", int(text), high=self.high, low=self.low)
        except InvalidArgument:
            raise ValueError from None

    @property
    def expected(self) -> str:
        return validate.count_range(self.low, self.high)


# `JOBVISOR_CONCURRENCY=auto` (the default): chosen by each worker once its
# app is imported, see `jobvisor.worker.loop.auto_concurrency`.
AUTO = "auto"


@dataclasses.dataclass(frozen=True, slots=True)
class _CountOrAuto:
    """Parse `auto` (None: decided later) or an integer within its bounds."""

    count: _Count

    def __call__(self, text: str) -> int | None:
        if text.strip().lower() == AUTO:
            return None
        return self.count(text)

    @property
    def low(self) -> int:
        return self.count.low

    @property
    def high(self) -> int:
        return self.count.high

    @property
    def expected(self) -> str:
        return f"{AUTO} or {self.count.expected}"


class Refused(ValueError):
    """A value refused for a reason more precise than its setting's `expected`."""

    def __init__(self, expected: str) -> None:
        super().__init__(expected)
        self.expected = expected


def _parsed_url(text: str) -> str:
    """The engine of a database URL (`parse_url`); a URL refused for a
    precise reason (`InvalidURL`) says that reason."""
    try:
        engine, _ = parse_url(text)
    except InvalidURL as exc:
        raise Refused(exc.expected) from None
    except InvalidArgument:
        raise ValueError from None
    return engine


def _url(text: str) -> str:
    _parsed_url(text)
    return text


def _listen_url(text: str) -> str:
    if text == "":
        return ""
    engine = _parsed_url(text)
    if engine != "postgres":
        raise ValueError
    return text


_flag = validate.flag


# Short names of the registries jobvisor ships for application frameworks.
APP_ALIASES = {"django": "jobvisor.contrib.django.worker:registry"}


def _app(text: str) -> str:
    text = APP_ALIASES.get(text.strip(), text)
    try:
        validate.module_attr(text)
    except InvalidArgument:
        raise ValueError from None
    return text


def _names(text: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in text.split(",") if n.strip())


def _queue_names(text: str) -> tuple[str, ...]:
    """Queue names as the queue takes them (`validate.name`: at most
    `MAX_NAME_BYTES` bytes of UTF-8 each)."""
    names = _names(text)
    try:
        for name in names:
            validate.name("queue", name)
    except InvalidArgument:
        raise ValueError from None
    return names


def _choice(*choices: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip().lower()
        if value not in choices:
            raise ValueError
        return value

    return parse


def _addr(text: str) -> str:
    if text == "":
        return ""
    try:
        validate.listen_addr("addr", text)
    except InvalidArgument:
        raise ValueError from None
    return text


@dataclasses.dataclass(frozen=True, slots=True)
class Setting:
    field: str
    default: str
    parse: Callable[[str], Any]
    expected: str
    help: str

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.field.upper()

    @property
    def flag(self) -> str:
        return "--" + self.field.replace("_", "-")


def _bounded(field: str, default: str, parse: _Seconds | _Count, help: str) -> Setting:
    """A setting whose accepted range is its parser's bounds."""
    return Setting(field, default, parse, parse.expected, help)


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "database_url",
        "sqlite:///jobvisor.db",
        _url,
        "postgresql://… or sqlite:///path",
        "the database; SQLite file by default",
    ),
    Setting(
        "pgbouncer",
        "0",
        _flag,
        "1 or 0 (also true/false, yes/no, on/off)",
        "the database URL leads through PgBouncer in transaction pooling: no session"
        " settings, no prepared statements, LISTEN only over listen_url",
    ),
    Setting(
        "citus",
        "0",
        _flag,
        "1 or 0 (also true/false, yes/no, on/off)",
        "the database URL is a Citus coordinator: the jobs table spread over the cluster"
        " by bucket (migrate distributes it; docs/design.md, Scale-out)",
    ),
    Setting(
        "listen_url",
        "",
        _listen_url,
        "postgresql://… or empty",
        "a direct connection to the server for LISTEN (empty: the database URL, or"
        " polling when pgbouncer is on)",
    ),
    Setting(
        "app",
        "jobvisor.example:registry",
        _app,
        "module:attribute naming a jobvisor Registry, or django",
        "the handlers to run (django: the tasks of the project DJANGO_SETTINGS_MODULE names)",
    ),
    _bounded("workers", "2", _Count(validate.MAX_WORKERS), "worker processes"),
    Setting(
        "concurrency",
        AUTO,
        _CountOrAuto(_Count(validate.MAX_CONCURRENCY)),
        _CountOrAuto(_Count(validate.MAX_CONCURRENCY)).expected,
        "jobs run at once by each worker (auto: 200 when every handler is an async def,"
        " 20 when any runs in threads)",
    ),
    Setting(
        "queues",
        "",
        _queue_names,
        f"comma-separated queue names of at most {validate.MAX_NAME_BYTES} UTF-8 bytes each"
        " (empty: all)",
        "queues to claim from",
    ),
    _bounded(
        "lease",
        f"{validate.DEFAULT_LEASE:g}",
        _Seconds(validate.MAX_LEASE, low=validate.MIN_LEASE),
        "claim lease; renewed at half of it while a job runs",
    ),
    _bounded(
        "poll_interval",
        str(validate.DEFAULT_POLL_INTERVAL),
        _Seconds(validate.MAX_INTERVAL, low=validate.MIN_INTERVAL),
        "longest wait between claims when idle (PostgreSQL also wakes on NOTIFY)",
    ),
    _bounded(
        "shutdown_timeout",
        f"{validate.DEFAULT_SHUTDOWN_TIMEOUT:g}",
        _Seconds(validate.MAX_INTERVAL),
        "how long SIGTERM lets running jobs finish before releasing them",
    ),
    _bounded(
        "cancel_grace",
        f"{validate.DEFAULT_CANCEL_GRACE:g}",
        _Seconds(validate.MAX_INTERVAL),
        "how long a thread handler asked to cancel may run on before its worker is replaced",
    ),
    _bounded(
        "worker_timeout",
        "30",
        _Seconds(validate.MAX_INTERVAL, low=validate.MIN_WORKER_TIMEOUT),
        "a worker silent this long is killed and replaced",
    ),
    _bounded(
        "pool_size",
        str(validate.DEFAULT_POOL_SIZE),
        _Count(validate.MAX_POOL_SIZE),
        "database connections per worker",
    ),
    _bounded(
        "reap_interval",
        "5",
        _Seconds(validate.MAX_INTERVAL, low=validate.MIN_INTERVAL),
        "how often expired leases are reaped",
    ),
    _bounded(
        "cleanup_interval",
        "300",
        _Seconds(validate.MAX_INTERVAL, low=validate.MIN_INTERVAL),
        "how often finished jobs past retention are deleted",
    ),
    _bounded(
        "retention_completed",
        "86400",
        _Seconds(validate.MAX_DELAY),
        "how long completed jobs are kept",
    ),
    _bounded(
        "retention_cancelled",
        "604800",
        _Seconds(validate.MAX_DELAY),
        "how long cancelled jobs are kept",
    ),
    _bounded(
        "retention_dead", "2592000", _Seconds(validate.MAX_DELAY), "how long dead jobs are kept"
    ),
    _bounded(
        "summary_interval",
        "60",
        _Seconds(validate.MAX_INTERVAL, low=validate.MIN_INTERVAL),
        "how often the status summary is logged",
    ),
    _bounded(
        "xmin_warn",
        "60",
        _Seconds(validate.MAX_INTERVAL, low=validate.MIN_INTERVAL),
        "how long a transaction may hold back the database's oldest xmin before a warning",
    ),
    _bounded(
        "max_restarts",
        "10",
        _Count(validate.MAX_RESTARTS),
        "worker crashes allowed within restart_window before the service stops (a crash"
        " holding jobs is charged to their attempts instead)",
    ),
    _bounded(
        "restart_window",
        "60",
        _Seconds(validate.MAX_INTERVAL, low=validate.MIN_INTERVAL),
        "the window for max_restarts",
    ),
    _bounded(
        "max_payload_bytes",
        str(validate.DEFAULT_MAX_PAYLOAD_BYTES),
        _Count(validate.MAX_PAYLOAD_BYTES_LIMIT, low=1024),
        "the largest payload accepted, in bytes of JSON (UTF-8)",
    ),
    _bounded(
        "result_max_bytes",
        str(validate.DEFAULT_MAX_RESULT_BYTES),
        _Count(validate.MAX_PAYLOAD_BYTES_LIMIT, low=1024),
        "the largest handler result stored, in bytes of JSON (UTF-8); a larger one fails the job",
    ),
    Setting(
        "log_format",
        "auto",
        _choice("auto", "text", "json"),
        "auto, text or json",
        "log lines: text on a terminal, JSON otherwise (auto)",
    ),
    Setting(
        "log_level",
        "info",
        _choice("debug", "info", "warning", "error"),
        "debug, info, warning or error",
        "least severe level logged",
    ),
    Setting(
        "http_addr",
        "127.0.0.1:9090",
        _addr,
        "host:port, [IPv6]:port or :port, or empty to turn it off",
        "where /healthz, /readyz and /metrics are served",
    ),
    Setting(
        "dashboard",
        "off",
        _choice("on", "off"),
        "on or off",
        "`jobvisor run` serves the dashboard on http_addr too (actions need JOBVISOR_ADMIN_TOKEN)",
    ),
    Setting(
        "web_addr",
        "127.0.0.1:8080",
        _addr,
        "host:port, [IPv6]:port or :port",
        "where `jobvisor web` serves the dashboard",
    ),
    Setting(
        "dashboard_secure_cookie",
        "auto",
        _choice("auto", "on"),
        "auto or on",
        "the dashboard's session cookie is marked Secure: on a request that came over HTTPS"
        " (auto), or always (on: behind a proxy that ends TLS)",
    ),
    Setting(
        "dashboard_trust_proxy",
        "0",
        _flag,
        "1 or 0 (also true/false, yes/no, on/off)",
        "the dashboard believes X-Forwarded-Proto and X-Forwarded-For from any peer: set it"
        " only when a proxy that sets them is its one way in",
    ),
)

SETTINGS_BY_FIELD = {s.field: s for s in SETTINGS}
