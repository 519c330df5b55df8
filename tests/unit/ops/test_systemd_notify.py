"""The notify protocol over a real datagram socket, as systemd speaks it."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobvisor import systemd


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[tuple[socket.socket, dict[str, str]]]:
    """A bound datagram socket at a path, and an environment pointing at it."""
    path = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(10)
    try:
        yield sock, {"NOTIFY_SOCKET": str(path)}
    finally:
        sock.close()


def test_ready_stopping_status_and_watchdog_arrive_as_datagrams(
    listener: tuple[socket.socket, dict[str, str]],
) -> None:
    sock, env = listener
    assert systemd.ready(env=env)
    assert sock.recv(4096) == b"READY=1"
    assert systemd.status("4 workers,\n120 pending", env=env)
    assert sock.recv(4096) == b"STATUS=4 workers, 120 pending"
    assert systemd.watchdog(env=env)
    assert sock.recv(4096) == b"WATCHDOG=1"
    assert systemd.reloading(env=env)
    assert sock.recv(4096) == b"RELOADING=1"
    assert systemd.stopping(env=env)
    assert sock.recv(4096) == b"STOPPING=1"
    assert systemd.extend_start(61.5, env=env)
    assert sock.recv(4096) == b"EXTEND_TIMEOUT_USEC=61500000"


def test_abstract_namespace_socket() -> None:
    name = f"jobvisor-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(b"\0" + name.encode())
        sock.settimeout(10)
        assert systemd.ready(env={"NOTIFY_SOCKET": "@" + name})
        assert sock.recv(4096) == b"READY=1"


def test_the_process_environment_is_used_by_default(
    listener: tuple[socket.socket, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    sock, env = listener
    monkeypatch.setenv("NOTIFY_SOCKET", env["NOTIFY_SOCKET"])
    assert systemd.stopping()
    assert sock.recv(4096) == b"STOPPING=1"


def test_without_a_socket_every_call_is_a_quiet_no_op(tmp_path: Path) -> None:
    assert not systemd.ready(env={})
    assert not systemd.status("x", env={"NOTIFY_SOCKET": ""})
    assert not systemd.watchdog(env={"NOTIFY_SOCKET": "relative/path"})
    # A socket that nobody listens on: the send fails, the caller carries on.
    assert not systemd.ready(env={"NOTIFY_SOCKET": str(tmp_path / "gone.sock")})


def test_watchdog_interval_is_half_of_watchdog_usec() -> None:
    pid = str(os.getpid())
    assert systemd.watchdog_interval(env={"WATCHDOG_USEC": "30000000"}) == 15.0
    assert systemd.watchdog_interval(env={"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": pid}) == 15.0
    assert systemd.watchdog_interval(env={"WATCHDOG_USEC": "500000"}) == 0.25


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"WATCHDOG_USEC": ""},
        {"WATCHDOG_USEC": "0"},
        {"WATCHDOG_USEC": "-5"},
        {"WATCHDOG_USEC": "soon"},
        {"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"},
    ],
)
def test_watchdog_interval_is_none_when_the_watchdog_is_not_for_us(env: dict[str, str]) -> None:
    if env.get("WATCHDOG_PID") == str(os.getpid()):  # pragma: no cover - we are not PID 1
        pytest.skip("running as PID 1")
    assert systemd.watchdog_interval(env=env) is None
