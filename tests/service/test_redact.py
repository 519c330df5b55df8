"""The password is masked in every form a database URL can take, and in any text
or log record that quotes it."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobvisor.config import DATABASE_URL_FILE, Config, _without_url_flag
from jobvisor.log import get_logger, setup_logging
from jobvisor.queue.api import parse_url
from jobvisor.queue.errors import DatabaseUnavailable, InvalidArgument
from jobvisor.redact import (
    MASK,
    RedactFilter,
    redact_text,
    redact_url,
    remember_secrets,
    secrets_of,
)
from jobvisor.settings import ConfigError

# (url, what it must show, the password it carries)
URLS = [
    ("postgresql://u:S3cret@h/db", "postgresql://u:***@h/db", "S3cret"),
    ("postgres://u:S3cret@h:5432/db?sslmode=require", "postgres://u:***@h:5432/db?sslmode=require",
     "S3cret"),
    ("postgresql://u@h/db?password=S3cret", "postgresql://u@h/db?password=***", "S3cret"),
    ("postgresql://u@h/db?sslmode=disable&password=S3cret&connect_timeout=3",
     "postgresql://u@h/db?sslmode=disable&password=***&connect_timeout=3", "S3cret"),
    ("postgresql://u@h/db?PASSWORD=S3cret", "postgresql://u@h/db?PASSWORD=***", "S3cret"),
    ("postgresql://u:p%40ss%2Fw0rd@h/db", "postgresql://u:***@h/db", "p@ss/w0rd"),
    ("postgresql://u:p@ssw0rd@h/db", "postgresql://u:***@h/db", "p@ssw0rd"),
    ("host=db password=hunter2", "host=db password=***", "hunter2"),
    ("host=db password = hunter2 port=5432", "host=db password = *** port=5432", "hunter2"),
    ("host=db password='hunter 2' user=u", "host=db password=*** user=u", "hunter 2"),
    (r"password='it\'s hunter2' host=db", "password=*** host=db", "it's hunter2"),
    # malformed: no parser splits these, the mask still applies
    ("postgresql://u:S3cret%zz@h/db", "postgresql://u:***@h/db", "S3cret%zz"),
    ("postgresql:/u:S3cret@h/db", "postgresql:/u:***@h/db", "S3cret"),
    ("postgresql://u:S3cret@[::1/db", "postgresql://u:***@[::1/db", "S3cret"),
    ("postgresql://u:S3cret@", "postgresql://u:***@", "S3cret"),
]  # fmt: skip


@pytest.mark.parametrize(("url", "shown", "secret"), URLS, ids=[u for u, _, _ in URLS])
def test_redact_url_masks_every_form(url: str, shown: str, secret: str) -> None:
    assert redact_url(url) == shown
    assert secret not in redact_url(url)
    assert secret in secrets_of(url)


@pytest.mark.parametrize(
    "url",
    ["postgresql://u@h/db", "postgresql://h:5432/db?sslmode=require", "sqlite:///jobvisor.db",
     "sqlite:////var/lib/a:b@c.db", "host=db user=u", ""],
)  # fmt: skip
def test_a_url_without_a_password_is_unchanged(url: str) -> None:
    assert redact_url(url) == url
    assert secrets_of(url) == set()


def test_redact_text_masks_urls_dsn_pairs_and_remembered_passwords() -> None:
    remember_secrets("postgresql://u:Rem3mbered%zz@h/db")
    text = (
        'invalid percent-encoded token: "Rem3mbered%zz"; '
        'missing "=" after "postgresql:/u:0ther@h/db" in connection info string; '
        "connect(host=db password=hunter2 user=u) "
        "postgresql://u@h/db?password=S3cret&sslmode=x"
    )
    shown = redact_text(text)
    for secret in ("Rem3mbered", "0ther", "hunter2", "S3cret"):
        assert secret not in shown
    assert shown.count(MASK) == 4
    assert "user=u" in shown and "sslmode=x" in shown  # the rest stays readable
    assert redact_text("nothing secret here") == "nothing secret here"


def test_a_given_secret_is_masked_wherever_it_appears() -> None:
    assert redact_text("auth failed for xyzzy-42 at h", secrets=["xyzzy-42"]) == (
        "auth failed for *** at h"
    )


def test_parse_url_remembers_the_password_and_never_echoes_it() -> None:
    parse_url("postgresql://u:Parsed-Pw@h/db")
    assert redact_text("token Parsed-Pw") == "token ***"
    with pytest.raises(InvalidArgument) as caught:
        parse_url("password=hunter2 host=db:5432")
    assert "hunter2" not in str(caught.value)


def test_the_filter_masks_message_args_fields_and_traceback() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactFilter())
    logger = logging.getLogger("tests.redact")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("error connecting: %s", "postgresql://u:Arg-Secret@h/db")
        try:
            raise RuntimeError("cannot use host=db password=Exc-Secret")
        except RuntimeError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
    out = stream.getvalue()
    assert "Arg-Secret" not in out and "Exc-Secret" not in out
    assert "RuntimeError: cannot use host=db password=***" in out


@pytest.fixture
def _restore_logging() -> Iterator[None]:
    loggers = [logging.getLogger(), logging.getLogger("jobvisor")]
    saved = [(lg, lg.handlers[:], lg.level, lg.propagate) for lg in loggers]
    hooks = sys.excepthook
    yield
    sys.excepthook = hooks
    for lg, handlers, level, propagate in saved:
        lg.handlers[:] = handlers
        lg.setLevel(level)
        lg.propagate = propagate


@pytest.mark.usefixtures("_restore_logging")
@pytest.mark.parametrize("fmt", ["json", "text"])
def test_jobvisor_and_library_log_lines_are_masked(fmt: str) -> None:
    stream = io.StringIO()
    setup_logging(fmt, "info", stream)
    remember_secrets("postgresql://u:Pool-Secret%zz@h/db")
    get_logger("supervisor").info(
        "supervisor.starting", database="postgresql://u@h/db?password=Field-Secret"
    )
    logging.getLogger("psycopg.pool").warning(
        "error connecting in %r: %s", "pool", 'invalid percent-encoded token: "Pool-Secret%zz"'
    )
    try:
        raise ValueError("postgresql://u:Trace-Secret@h/db")
    except ValueError as exc:
        get_logger("worker").error("worker.failed", error=exc)
        logging.getLogger("asyncio").exception("Task exception was never retrieved")
    out = stream.getvalue()
    for secret in ("Field-Secret", "Pool-Secret", "Trace-Secret"):
        assert secret not in out
    lines = out.splitlines() if fmt == "text" else [json.loads(x) for x in out.splitlines()]
    assert len([x for x in lines if "Traceback" in str(x) or "exception" in x]) >= 1


def test_an_uncaught_exception_and_a_warning_are_masked(tmp_path: Path) -> None:
    code = (
        "import warnings\n"
        "from jobvisor.log import setup_logging\n"
        "setup_logging('text')\n"
        "warnings.warn('cannot reach postgresql://u:Warn-Secret@h/db')\n"
        "raise RuntimeError('cannot reach postgresql://u:Hook-Secret@h/db')\n"
    )
    done = subprocess.run(
        [sys.executable, "-W", "default", "-c", code],
        capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1
    assert "RuntimeError: cannot reach postgresql://u:***@h/db" in done.stderr
    assert "UserWarning: cannot reach postgresql://u:***@h/db" in done.stderr
    assert "Secret" not in done.stderr


# --- JOBVISOR_DATABASE_URL_FILE and the flag taken out of argv ---------------------


def test_the_url_file_comes_after_the_variable_and_before_the_default(tmp_path: Path) -> None:
    path = tmp_path / "url"
    path.write_text("postgresql://u:File-Secret@h/db\n")
    env = {DATABASE_URL_FILE: str(path)}
    config = Config.load(env=env)
    assert config.database_url == "postgresql://u:File-Secret@h/db"
    assert config.sources["database_url"] == "file"
    assert ("JOBVISOR_DATABASE_URL", "postgresql://u:***@h/db", "file") in config.describe()
    config = Config.load(env={**env, "JOBVISOR_DATABASE_URL": "sqlite:///env.db"})
    assert (config.database_url, config.sources["database_url"]) == ("sqlite:///env.db", "env")
    config = Config.load(env=env, overrides={"database_url": "sqlite:///flag.db"})
    assert (config.database_url, config.sources["database_url"]) == ("sqlite:///flag.db", "flag")
    assert Config.load(env={}).sources["database_url"] == "default"


@pytest.mark.parametrize("content", [None, "mysql://u:File-Secret@h/db", "", "\xff"])
def test_a_missing_or_bad_url_file_is_a_config_error_naming_the_file(
    tmp_path: Path, content: str | None
) -> None:
    path = tmp_path / "url"
    if content == "\xff":
        path.write_bytes(b"\xff\xfe")
    elif content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError) as caught:
        Config.load(env={DATABASE_URL_FILE: str(path)})
    assert caught.value.variable == DATABASE_URL_FILE
    assert str(path) in str(caught.value)
    assert "File-Secret" not in str(caught.value)


URL = "postgresql://u:S3cret@h/db"


@pytest.mark.parametrize(
    ("args", "rest"),
    [
        (["run", "--database-url", URL, "--workers", "2"], ["run", "--workers", "2"]),
        (["run", f"--database-url={URL}"], ["run"]),
        (["run", "--database", URL], ["run"]),
        (["--workers=1", "--data", URL], ["--workers=1"]),
        (["run", "--", "--database-url", URL], None),
        (["run", "--database-url", "other"], None),
        (["run", "--database-url", "sqlite:///a.db", "--database-url", URL], ["run"]),
    ],
)
def test_the_flag_and_its_value_are_taken_out_of_argv(
    args: list[str], rest: list[str] | None
) -> None:
    assert _without_url_flag(args, URL) == rest


def test_a_jobvisor_error_never_shows_a_password() -> None:
    remember_secrets("postgresql://u:Err-Secret%zz@h/db")
    exc = DatabaseUnavailable('invalid percent-encoded token: "Err-Secret%zz"')
    assert str(exc) == 'invalid percent-encoded token: "***"'
    assert "Err-Secret" not in "".join(traceback.format_exception(exc))
