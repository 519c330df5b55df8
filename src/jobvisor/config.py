"""Configuration from `JOBVISOR_*` environment variables, each also a
`jobvisor run` flag. An invalid value raises `ConfigError`, which the command
line turns into one line on stderr and exit code 78 (EX_CONFIG), before any
worker starts. `Config.sources` says where each value came from."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .exitcodes import ExitCode
from .queue import validate
from .queue.api import parse_url
from .queue.conninfo import InvalidURL
from .queue.errors import InvalidArgument, JobvisorError
from .redact import redact_text, redact_url, secrets_of

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


class _Refused(ValueError):
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
        raise _Refused(exc.expected) from None
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


def _flag(text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ValueError


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
        "1.0",
        _Seconds(validate.MAX_INTERVAL, low=validate.MIN_INTERVAL),
        "longest wait between claims when idle (PostgreSQL also wakes on NOTIFY)",
    ),
    _bounded(
        "shutdown_timeout",
        "30",
        _Seconds(validate.MAX_INTERVAL),
        "how long SIGTERM lets running jobs finish before releasing them",
    ),
    _bounded(
        "cancel_grace",
        "10",
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
FLAG_DEST = "setting_"


def add_flags(parser: argparse.ArgumentParser) -> None:
    """A flag for every setting (`--lease` for `JOBVISOR_LEASE`), its help
    naming the variable, the default and what is accepted; `flag_overrides`
    reads them back. The one place flags map to settings."""
    for s in SETTINGS:
        parser.add_argument(
            s.flag,
            dest=FLAG_DEST + s.field,
            metavar="VALUE",
            help=f"{s.help} [{s.env}, default {s.default!r}; {s.expected}]",
        )


def flag_overrides(args: argparse.Namespace) -> dict[str, str]:
    """The settings given as flags (see `add_flags`), by field, for `Config.load`."""
    values = vars(args)
    return {
        s.field: values[FLAG_DEST + s.field]
        for s in SETTINGS
        if values.get(FLAG_DEST + s.field) is not None
    }


# The dashboard's admin token: from the environment only (a flag would show
# it in `ps`), never in `Config` (which is logged, described and handed to
# the workers), and never shown: an error about it names no value.
ADMIN_TOKEN_ENV = ENV_PREFIX + "ADMIN_TOKEN"
MIN_ADMIN_TOKEN_CHARS = 16


ADMIN_TOKEN_EXPECTED = (
    f"at least {MIN_ADMIN_TOKEN_CHARS} characters, printable ASCII without spaces"
    " (openssl rand -hex 32 makes one)"
)


def admin_token_ok(token: str) -> bool:
    """Whether `token` may be the admin token: long enough to resist guessing,
    and printable ASCII without spaces, since an HTTP header (`Authorization:
    Bearer`) carries nothing else intact."""
    return len(token) >= MIN_ADMIN_TOKEN_CHARS and all("!" <= c <= "~" for c in token)


def admin_token(env: Mapping[str, str] | None = None) -> str | None:
    """The admin token (None when unset or empty: the dashboard is
    read-only). Raises `ConfigError` when `admin_token_ok` refuses it."""
    token = (os.environ if env is None else env).get(ADMIN_TOKEN_ENV, "").strip()
    if token and not admin_token_ok(token):
        raise ConfigError(ADMIN_TOKEN_ENV, "(not shown)", ADMIN_TOKEN_EXPECTED)
    return token or None


# A file holding the database URL (a mounted Kubernetes or systemd secret), so
# that the password is in neither the environment nor the command line.
DATABASE_URL_FILE = ENV_PREFIX + "DATABASE_URL_FILE"


def _read_url_file(path: str) -> str:
    """The URL in the file at `path`, without its surrounding whitespace."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except (OSError, UnicodeDecodeError, ValueError):
        raise ConfigError(
            DATABASE_URL_FILE, path, "a readable UTF-8 file holding the database URL"
        ) from None


def _check_postgres_only(values: Mapping[str, Any], sources: Mapping[str, str]) -> None:
    """`pgbouncer` and `listen_url` make sense with a PostgreSQL database only."""
    if parse_url(values["database_url"])[0] == "postgres":
        return
    for field in ("pgbouncer", "listen_url"):
        if values[field]:
            s = SETTINGS_BY_FIELD[field]
            name = s.flag if sources[field] == "flag" else s.env
            shown = "1" if values[field] is True else str(values[field])
            raise ConfigError(name, shown, "unset with a SQLite database URL")


@dataclasses.dataclass(frozen=True, slots=True)
class Config:
    database_url: str
    pgbouncer: bool
    listen_url: str
    app: str
    workers: int
    concurrency: int | None  # None: `auto`
    queues: tuple[str, ...]
    lease: float
    poll_interval: float
    shutdown_timeout: float
    cancel_grace: float
    worker_timeout: float
    pool_size: int
    reap_interval: float
    cleanup_interval: float
    retention_completed: float
    retention_cancelled: float
    retention_dead: float
    summary_interval: float
    xmin_warn: float
    max_restarts: int
    restart_window: float
    log_format: str
    log_level: str
    http_addr: str
    dashboard: str
    web_addr: str
    dashboard_secure_cookie: str
    dashboard_trust_proxy: bool
    max_payload_bytes: int
    result_max_bytes: int
    sources: Mapping[str, str] = dataclasses.field(default_factory=dict, compare=False)

    @classmethod
    def load(
        cls, env: Mapping[str, str] | None = None, overrides: Mapping[str, str] | None = None
    ) -> Config:
        """Read every setting: a flag (`overrides`, by field name) wins over the
        environment, which wins over the default. The database URL may also
        come from the file `JOBVISOR_DATABASE_URL_FILE` names, after the
        variable and before the default. Raises `ConfigError`."""
        env = os.environ if env is None else env
        overrides = overrides or {}
        values: dict[str, Any] = {}
        sources: dict[str, str] = {}
        for s in SETTINGS:
            if s.field in overrides:
                raw, source, name = overrides[s.field], "flag", s.flag
            elif s.env in env:
                raw, source, name = env[s.env], "env", s.env
            elif s.field == "database_url" and DATABASE_URL_FILE in env:
                path = env[DATABASE_URL_FILE]
                raw, source, name = _read_url_file(path), "file", DATABASE_URL_FILE
            else:
                raw, source, name = s.default, "default", s.env
            try:
                values[s.field] = s.parse(raw)
            except (ValueError, TypeError) as exc:
                expected = exc.expected if isinstance(exc, _Refused) else s.expected
                if source == "file":  # name the file, not what it holds
                    raise ConfigError(name, path, "a file holding " + expected) from None
                raise ConfigError(name, raw, expected) from None
            sources[s.field] = source
        _check_postgres_only(values, sources)
        admin_token(env)  # checked at start-up like every setting, kept out of Config
        return cls(**values, sources=sources)

    def to_env(self) -> dict[str, str]:
        """The settings as environment variables, to hand to a worker process."""
        out = {}
        for s in SETTINGS:
            value = getattr(self, s.field)
            if isinstance(value, tuple):
                out[s.env] = ",".join(value)
            elif isinstance(value, bool):
                out[s.env] = "1" if value else "0"
            elif value is None:
                out[s.env] = AUTO
            else:
                out[s.env] = str(value)
        return out

    def connection(self) -> dict[str, Any]:
        """How this service reaches its database, as `connect`'s keyword
        arguments (`pgbouncer`, `listen_url`)."""
        return {"pgbouncer": self.pgbouncer, "listen_url": self.listen_url or None}

    def describe(self) -> list[tuple[str, str, str]]:
        """(variable, value, source) for every setting, the password masked."""
        rows = []
        for s in SETTINGS:
            value = self.to_env()[s.env]
            if s.field in SECRET_FIELDS:
                value = redact_url(value)
            rows.append((s.env, value, self.sources.get(s.field, "default")))
        return rows


# Where a re-executed process finds the URL its command line held (see
# `hide_database_url_flag`); read once and removed from the environment.
HIDDEN_FLAG_ENV = "_JOBVISOR_DATABASE_URL_FLAG"
_URL_FLAG = "--database-url"


def _without_url_flag(args: Sequence[str], url: str) -> list[str] | None:
    """`args` without any `--database-url VALUE` (or `--database-url=VALUE`, or
    an abbreviation argparse accepted); None unless one of them gave `url`
    (argparse keeps the last, so none may stay behind)."""
    out: list[str] = []
    found = False
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, value = arg.partition("=")
        is_flag = len(name) > 3 and _URL_FLAG.startswith(name)
        if arg == "--":
            out += args[i:]
            break
        if is_flag and eq:
            found = found or value == url
        elif is_flag and i + 1 < len(args):
            found, i = found or args[i + 1] == url, i + 1
        else:
            out.append(arg)
        i += 1
    return out if found else None


def hide_database_url_flag(url: str | None) -> None:
    """Keep a password given with `--database-url` out of `ps`.

    The command line of a process is readable by every user of the host, its
    environment only by its owner. When the flag's URL holds a password, the
    process executes itself again with the flag removed from its arguments and
    the URL in its environment (`HIDDEN_FLAG_ENV`, where
    `database_url_from_hidden_flag` finds it, still counted as a flag); this
    call then does not return. Otherwise (no flag, no password, or a command
    line it cannot rewrite) it returns and nothing changes. The password
    remains visible for the few milliseconds before the new image starts:
    pass it by environment or `JOBVISOR_DATABASE_URL_FILE` instead."""
    if not url or not secrets_of(url):
        return
    args = sys.argv[1:]
    orig = list(getattr(sys, "orig_argv", []))
    if len(orig) < len(args) + 1 or orig[len(orig) - len(args) :] != args:
        return
    rest = _without_url_flag(args, url)
    if rest is None or not sys.executable:
        return
    os.environ[HIDDEN_FLAG_ENV] = url
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [*orig[: len(orig) - len(args)], *rest])


def database_url_from_hidden_flag() -> str | None:
    """The URL `hide_database_url_flag` moved out of the command line, if any;
    removed from the environment so that child processes do not inherit it."""
    return os.environ.pop(HIDDEN_FLAG_ENV, None)


def load_or_exit(prog: str, overrides: Mapping[str, str] | None = None) -> Config:
    """`Config.load()` for a process's entry point: an invalid setting prints
    one line, `<prog>: <variable>=<value>: expected …`, on stderr and exits
    with EX_CONFIG before anything starts."""
    try:
        return Config.load(overrides=overrides)
    except ConfigError as exc:
        print(f"{prog}: {redact_text(str(exc))}", file=sys.stderr)
        raise SystemExit(EX_CONFIG) from None
