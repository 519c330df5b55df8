"""A small Django project for the Django integration's tests.

Two databases, one per jobvisor engine: `default` on SQLite and `pg` on
PostgreSQL, each with its own task backend of the same names. Where they
are comes from the environment (`JOBVISOR_TEST_DJANGO_SQLITE`, a file path,
and `JOBVISOR_TEST_DJANGO_PG`, a URL); the in-process tests point them at
each test's fresh database themselves."""

from __future__ import annotations

import importlib.util
import os
import urllib.parse
from typing import Any

SECRET_KEY = "jobvisor-tests-only"
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Django 6 has the Tasks framework in core; before, the backport is an app.
BACKPORT = importlib.util.find_spec("django.tasks") is None
INSTALLED_APPS = [*(["django_tasks"] if BACKPORT else []), "tests.django_project.shop"]


def postgres(url: str) -> dict[str, Any]:
    """Django's settings for a `postgresql://user@host:port/name` URL."""
    parts = urllib.parse.urlsplit(url)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": parts.path.lstrip("/") or "postgres",
        "USER": parts.username or "postgres",
        "PASSWORD": parts.password or "",
        "HOST": parts.hostname or "127.0.0.1",
        "PORT": str(parts.port or 5432),
    }


DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("JOBVISOR_TEST_DJANGO_SQLITE", ":memory:"),
        "OPTIONS": {"timeout": 20},
    },
    "pg": postgres(os.environ.get("JOBVISOR_TEST_DJANGO_PG", "postgresql://127.0.0.1/postgres")),
}

TASKS = {
    alias: {
        "BACKEND": "jobvisor.contrib.django.JobvisorBackend",
        "QUEUES": ["default", "mail"],
        "OPTIONS": {"DATABASE": alias},
    }
    for alias in DATABASES
}

# Task modules beyond the installed apps' `tasks` modules.
JOBVISOR_TASK_MODULES = ["tests.django_project.shop.extra"]
