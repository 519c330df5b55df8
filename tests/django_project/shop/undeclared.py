"""A task in a module the project does not declare: no worker runs it."""

from __future__ import annotations

try:
    from django.tasks import task
except ImportError:
    from django_tasks import task


@task()
def whisper(word: str) -> str:
    return word.lower()
