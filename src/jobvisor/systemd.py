"""systemd's notify protocol, without a dependency.

A unit with `Type=notify` starts jobvisor with `$NOTIFY_SOCKET` set to a
datagram socket (a path, or `@name` in the abstract namespace). Each message
is one datagram of `KEY=VALUE` lines. Outside systemd the variable is unset
and every function here is a no-op that returns False, so callers never check.

How the supervisor uses it, all from the parent's event loop:

    systemd.status("starting 4 workers")
    ...                                   # spawn the workers, wait for "ready"
    systemd.ready()                       # READY=1: systemd considers us started
    interval = systemd.watchdog_interval()   # None when WatchdogSec= is unset
    # a task on the loop: every `interval` seconds, systemd.watchdog()
    systemd.status("4 workers, 120 pending, 8 running")   # with each summary
    ...
    systemd.stopping()                    # STOPPING=1 on SIGTERM, before draining

The watchdog ping comes from the parent's loop, so a wedged loop stops the
pings and systemd restarts the service (WatchdogSec=, Restart=on-failure).
`watchdog_interval()` is half of `WATCHDOG_USEC`, as sd_watchdog_enabled(3)
recommends, and None when `WATCHDOG_PID` names another process.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

NOTIFY_SOCKET_ENV = "NOTIFY_SOCKET"


def _address(raw: str) -> str | bytes | None:
    if raw.startswith("@"):
        return b"\0" + raw[1:].encode()  # abstract namespace
    if raw.startswith("/"):
        return raw
    return None  # vsock and other forms are not used for services


def notify(message: str, *, env: Mapping[str, str] | None = None) -> bool:
    """Send one datagram of `KEY=VALUE` lines to `$NOTIFY_SOCKET`.

    Returns True if it was sent, False when there is no socket (not under
    systemd) or the send failed; a notification is never worth crashing for."""
    env = os.environ if env is None else env
    address = _address(env.get(NOTIFY_SOCKET_ENV, ""))
    if address is None:
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(address)
            sock.sendall(message.encode())
    except OSError:
        return False
    return True


def ready(*, env: Mapping[str, str] | None = None) -> bool:
    """READY=1: start-up is complete (the workers are up)."""
    return notify("READY=1", env=env)


def stopping(*, env: Mapping[str, str] | None = None) -> bool:
    """STOPPING=1: a graceful stop has begun."""
    return notify("STOPPING=1", env=env)


def reloading(*, env: Mapping[str, str] | None = None) -> bool:
    """RELOADING=1: the configuration is being reloaded; send ready() after."""
    return notify("RELOADING=1", env=env)


def status(text: str, *, env: Mapping[str, str] | None = None) -> bool:
    """STATUS=…: one line shown by `systemctl status`. Newlines become spaces."""
    line = " ".join(text.split())
    return notify(f"STATUS={line}", env=env)


def extend_start(seconds: float, *, env: Mapping[str, str] | None = None) -> bool:
    """EXTEND_TIMEOUT_USEC=…: start-up goes on (waiting for the database);
    systemd's start timeout is pushed `seconds` from now."""
    return notify(f"EXTEND_TIMEOUT_USEC={int(seconds * 1_000_000)}", env=env)


def watchdog(*, env: Mapping[str, str] | None = None) -> bool:
    """WATCHDOG=1: the service is alive; send every `watchdog_interval()`."""
    return notify("WATCHDOG=1", env=env)


def watchdog_interval(*, env: Mapping[str, str] | None = None) -> float | None:
    """Seconds between watchdog pings: half of `WATCHDOG_USEC`, or None when
    the watchdog is off, the value is not a positive integer, or
    `WATCHDOG_PID` names a process other than this one."""
    env = os.environ if env is None else env
    pid = env.get("WATCHDOG_PID")
    if pid is not None and pid.strip() != str(os.getpid()):
        return None
    try:
        usec = int(env.get("WATCHDOG_USEC", ""))
    except ValueError:
        return None
    if usec <= 0:
        return None
    return usec / 2 / 1_000_000
