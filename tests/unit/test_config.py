"""Every bounded setting refuses a value outside its bounds with a
`ConfigError` naming the variable, the value and the accepted range, and
accepts the edges of that range."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from jobvisor.config import Config
from jobvisor.queue import validate
from jobvisor.settings import SETTINGS, ConfigError, Setting
from jobvisor.worker.loop import Worker

BOUNDED = [s for s in SETTINGS if hasattr(s.parse, "expected")]


def _edges(setting: Setting) -> tuple[list[str], list[str]]:
    """(values accepted, values refused) at the edges of a setting's bounds."""
    parse: Any = setting.parse
    low, high = parse.low, parse.high
    if isinstance(high, int):
        return [str(low), str(high)], [str(low - 1), str(high + 1), "1.5", "x", str(10**30)]
    good = [repr(float(high))] + ([] if parse.positive else [repr(low)])
    bad = [repr(high * 1.001), "1e12", "1e308", "inf", "nan", "-1", "x"]
    bad.append(repr(low) if parse.positive else repr(low - 0.001))
    return good, bad


@pytest.mark.parametrize("setting", BOUNDED, ids=lambda s: s.env)
def test_each_bounded_setting_refuses_values_outside_its_bounds(setting: Setting) -> None:
    good, bad = _edges(setting)
    for value in good:
        assert Config.load(env={setting.env: value}) is not None, value
    for value in bad:
        with pytest.raises(ConfigError) as info:
            Config.load(env={setting.env: value})
        message = str(info.value)
        assert message == f"{setting.env}={value!r}: expected {setting.expected}"
        assert "\n" not in message


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("JOBVISOR_LEASE", "1e12", "seconds >= 1, at most 86400"),
        (
            "JOBVISOR_CONCURRENCY",
            "99999999999999999999999",
            "auto or an integer >= 1, at most 10000",
        ),
        ("JOBVISOR_WORKER_TIMEOUT", "0.001", "seconds >= 3, at most 86400"),
        ("JOBVISOR_LEASE", "1e300", "seconds >= 1, at most 86400"),
    ],
)
def test_values_that_used_to_stop_the_work(variable: str, value: str, expected: str) -> None:
    with pytest.raises(ConfigError, match="expected " + expected):
        Config.load(env={variable: value})


def test_a_flag_out_of_bounds_is_named_as_the_flag() -> None:
    with pytest.raises(ConfigError, match=r"^--pool-size='0': expected an integer >= 1"):
        Config.load(env={}, overrides={"pool_size": "0"})


def test_the_lease_default_is_the_queues() -> None:
    assert Config.load(env={}).lease == validate.DEFAULT_LEASE
    assert Config.load(env={}).max_payload_bytes == validate.DEFAULT_MAX_PAYLOAD_BYTES


@pytest.mark.parametrize("text", ["auto", "AUTO", " Auto "])
def test_concurrency_auto_is_the_default_and_is_passed_on_as_auto(text: str) -> None:
    assert Config.load(env={}).concurrency is None
    assert Config.load(env={}).sources["concurrency"] == "default"
    config = Config.load(env={"JOBVISOR_CONCURRENCY": text})
    assert config.concurrency is None
    assert config.to_env()["JOBVISOR_CONCURRENCY"] == "auto"
    assert Config.load(env=config.to_env()).concurrency is None
    assert Config.load(env={"JOBVISOR_CONCURRENCY": "7"}).to_env()["JOBVISOR_CONCURRENCY"] == "7"


def test_concurrency_refuses_what_is_neither_auto_nor_a_count() -> None:
    for value in ("0", "automatic", ""):
        with pytest.raises(ConfigError) as info:
            Config.load(env={"JOBVISOR_CONCURRENCY": value})
        expected = "auto or an integer >= 1, at most 10000"
        assert str(info.value) == f"JOBVISOR_CONCURRENCY={value!r}: expected {expected}"


PG = "postgresql://jobvisor@db.internal/jobs"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"JOBVISOR_PGBOUNCER": "maybe"}, "JOBVISOR_PGBOUNCER='maybe': expected 1 or 0"),
        ({"JOBVISOR_PGBOUNCER": "2"}, "JOBVISOR_PGBOUNCER='2': expected 1 or 0"),
        ({"JOBVISOR_LISTEN_URL": "sqlite:///x.db"}, "JOBVISOR_LISTEN_URL='sqlite:///x.db'"),
        ({"JOBVISOR_LISTEN_URL": "listen.internal"}, "expected postgresql://… or empty"),
        # Both concern PostgreSQL only: refused with a SQLite database.
        (
            {"JOBVISOR_PGBOUNCER": "1"},
            "JOBVISOR_PGBOUNCER='1': expected unset with a SQLite database URL",
        ),
        (
            {"JOBVISOR_LISTEN_URL": PG},
            f"JOBVISOR_LISTEN_URL={PG!r}: expected unset with a SQLite database URL",
        ),
    ],
)
def test_pgbouncer_settings_refuse_bad_values(env: dict[str, str], expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        Config.load(env=env)
    assert expected in str(info.value)


def test_pgbouncer_settings_reach_connect_and_the_workers() -> None:
    config = Config.load(
        env={
            "JOBVISOR_DATABASE_URL": "postgresql://jobvisor@bouncer.internal:6432/jobs",
            "JOBVISOR_PGBOUNCER": "yes",
            "JOBVISOR_LISTEN_URL": PG,
        }
    )
    assert config.connection() == {"pgbouncer": True, "listen_url": PG, "citus": False}
    env = config.to_env()
    assert (env["JOBVISOR_PGBOUNCER"], env["JOBVISOR_LISTEN_URL"]) == ("1", PG)
    assert Config.load(env=env) == config  # what a worker reads back
    assert Config.load(env={}).connection() == {
        "pgbouncer": False,
        "listen_url": None,
        "citus": False,
    }


def test_citus_mode_reaches_connect_and_the_workers_and_needs_postgresql() -> None:
    config = Config.load(env={"JOBVISOR_DATABASE_URL": PG, "JOBVISOR_CITUS": "on"})
    assert config.connection()["citus"] is True
    assert Config.load(env=config.to_env()) == config
    with pytest.raises(ConfigError, match="JOBVISOR_CITUS='1': expected unset with a SQLite"):
        Config.load(env={"JOBVISOR_CITUS": "1"})
    with pytest.raises(ConfigError, match="JOBVISOR_CITUS='often'"):
        Config.load(env={"JOBVISOR_DATABASE_URL": PG, "JOBVISOR_CITUS": "often"})


def test_the_listen_urls_password_is_masked() -> None:
    url = "postgresql://jobvisor:s3cr3t-pw@db.internal/jobs"
    with pytest.raises(ConfigError) as info:
        Config.load(env={"JOBVISOR_LISTEN_URL": url})
    assert "s3cr3t-pw" not in str(info.value)
    config = Config.load(env={"JOBVISOR_DATABASE_URL": PG, "JOBVISOR_LISTEN_URL": url})
    shown = {variable: value for variable, value, _ in config.describe()}
    assert shown["JOBVISOR_LISTEN_URL"] == "postgresql://jobvisor:***@db.internal/jobs"


@pytest.mark.parametrize("field", ["lease", "poll_interval", "shutdown_timeout", "cancel_grace"])
def test_a_worker_made_without_settings_has_the_settings_defaults(field: str) -> None:
    default = inspect.signature(Worker).parameters[field].default
    assert default == getattr(Config.load(env={}), field)
