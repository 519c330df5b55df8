"""Tasks outside the app's `tasks` module: the settings' JOBVISOR_TASK_MODULES
lists this module, so a worker runs them."""

from __future__ import annotations

try:
    from django.tasks import task
except ImportError:
    from django_tasks import task


@task()
def shout(word: str) -> str:
    return word.upper()
