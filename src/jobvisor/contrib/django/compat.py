"""Django's Tasks framework, wherever it comes from: `django.tasks` (Django
6.0 and later) or the `django-tasks` backport (`django_tasks`, Django 4.2 to
5.2), which mirrors it. The rest of `jobvisor.contrib.django` imports the
framework from here only."""

from __future__ import annotations

from typing import Any

try:  # Django 6.0+
    from django.tasks import TaskContext, TaskResult, TaskResultStatus
    from django.tasks import exceptions as _exceptions
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import DEFAULT_TASK_PRIORITY, Task, TaskError
    from django.tasks.signals import task_enqueued, task_finished, task_started
    from django.utils.json import normalize_json

    FRAMEWORK = "django.tasks"
except ImportError:  # the backport
    from django_tasks import TaskContext, TaskResult, TaskResultStatus
    from django_tasks import exceptions as _exceptions
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import DEFAULT_TASK_PRIORITY, Task, TaskError
    from django_tasks.signals import task_enqueued, task_finished, task_started
    from django_tasks.utils import normalize_json

    FRAMEWORK = "django_tasks"

# Django 6 names them `InvalidTask`, the backport `InvalidTaskError`.
InvalidTask: type[Exception] = (
    getattr(_exceptions, "InvalidTask", None) or _exceptions.InvalidTaskError
)
TaskResultDoesNotExist: type[Exception] = _exceptions.TaskResultDoesNotExist

__all__ = [
    "DEFAULT_TASK_PRIORITY",
    "FRAMEWORK",
    "BaseTaskBackend",
    "InvalidTask",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "normalize_json",
    "task_enqueued",
    "task_finished",
    "task_started",
]


def set_frozen(obj: Any, name: str, value: Any) -> None:
    """Set a field of one of the framework's frozen dataclasses, as its own
    backends do (`TaskResult._return_value` has no other way in)."""
    object.__setattr__(obj, name, value)
