"""The test app, in workers that boot, run, and then die on their own a
moment later while holding no job (exit code 13): a crash loop that no job
explains, for the max_restarts test."""

from __future__ import annotations

import os
import threading

from .app import registry

__all__ = ["registry"]

LIFETIME = 1.5  # seconds from import: past `ready`, before anything else


def _die() -> None:
    os._exit(13)


_timer = threading.Timer(LIFETIME, _die)
_timer.daemon = True
_timer.start()
