"""Django integration: a backend for Django's Tasks framework.

    TASKS = {"default": {"BACKEND": "jobvisor.contrib.django.JobvisorBackend"}}

and `JOBVISOR_APP=django jobvisor run` runs the tasks (see `.worker`). Needs
Django with `django.tasks` (6.0+) or the `django-tasks` backport: the
`django` extra installs the latter where the former is missing.
"""

from .backend import JobvisorBackend

__all__ = ["JobvisorBackend"]
