"""Django, set up once in the test process with `tests.django_project`."""

import tests.support.django  # noqa: F401 - importing it sets Django up
