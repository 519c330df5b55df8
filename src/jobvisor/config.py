"""Configuration from `JOBVISOR_*` environment variables, each also a
`jobvisor run` flag (the table of them is `jobvisor.settings`). An invalid
value raises `ConfigError`, which the command line turns into one line on
stderr and exit code 78 (EX_CONFIG), before any worker starts. `Config.sources`
says where each value came from."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from .queue.api import parse_url
from .redact import redact_text, redact_url, secrets_of
from .settings import (
    AUTO,
    ENV_PREFIX,
    EX_CONFIG,
    SECRET_FIELDS,
    SETTINGS,
    SETTINGS_BY_FIELD,
    ConfigError,
    Refused,
)

# `ConfigError` and `EX_CONFIG` are what loading a `Config` raises and exits
# with, so they belong to this module's surface too.
__all__ = [
    "ADMIN_TOKEN_ENV",
    "ADMIN_TOKEN_EXPECTED",
    "DATABASE_URL_FILE",
    "EX_CONFIG",
    "FLAG_DEST",
    "HIDDEN_FLAG_ENV",
    "MIN_ADMIN_TOKEN_CHARS",
    "Config",
    "ConfigError",
    "add_flags",
    "admin_token",
    "admin_token_ok",
    "database_url_from_hidden_flag",
    "flag_overrides",
    "hide_database_url_flag",
    "load_or_exit",
]

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
    """`pgbouncer`, `citus` and `listen_url` make sense with a PostgreSQL database only."""
    if parse_url(values["database_url"])[0] == "postgres":
        return
    for field in ("pgbouncer", "citus", "listen_url"):
        if values[field]:
            s = SETTINGS_BY_FIELD[field]
            name = s.flag if sources[field] == "flag" else s.env
            shown = "1" if values[field] is True else str(values[field])
            raise ConfigError(name, shown, "unset with a SQLite database URL")


@dataclasses.dataclass(frozen=True, slots=True)
class Config:
    database_url: str
    pgbouncer: bool
    citus: bool
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
                expected = exc.expected if isinstance(exc, Refused) else s.expected
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
        arguments (`pgbouncer`, `listen_url`, `citus`)."""
        return {
            "pgbouncer": self.pgbouncer,
            "listen_url": self.listen_url or None,
            "citus": self.citus,
        }

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
