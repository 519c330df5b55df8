"""The tests' one bounded wait: poll until something holds, instead of sleeping."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal, TypeVar

T = TypeVar("T")

# Generous: the machine may be loaded by other test runs. A wait that holds
# returns as soon as it does, so only a failing test ever waits this long.
TIMEOUT = 60.0


def wait_until(
    check: Callable[[], T | Literal[False] | None], what: str = "", timeout: float = TIMEOUT
) -> T:
    """Poll `check` until it returns something truthy and return that; fail
    after `timeout` seconds, naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or check}")
        time.sleep(0.02)
