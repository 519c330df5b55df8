"""Django, set up once in the test process with `tests.django_project`, and
each test's fresh database (on each engine) under the alias of that engine
(tests/support/django.py)."""

from tests.support.django import alias, jobs, workdir

__all__ = ["alias", "jobs", "workdir"]
