"""pytest fixtures for code that uses jobvisor tasks (see `jobvisor.testing`).

Installed with jobvisor as a pytest plugin (entry point `pytest11`), so the
fixtures are there in every test suite of a project that depends on it:

    def test_signup_sends_a_welcome_email(jobvisor_recording: Recorder) -> None:
        signup("ada@example.org")
        jobvisor_recording.assert_enqueued(send_email, to="ada@example.org")

`jobvisor.testing` (and the worker code it borrows) is imported when a
test first uses a fixture, not when pytest starts.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .testing import Recorder


@pytest.fixture
def jobvisor_recording() -> Iterator[Recorder]:
    """Every task enqueue of the test recorded, nothing written or run."""
    from .testing import recording  # noqa: PLC0415 (see the module's docstring)

    with recording() as recorder:
        yield recorder


@pytest.fixture
def jobvisor_inline() -> Iterator[Recorder]:
    """Every task enqueued during the test run at once, in-process, and recorded."""
    from .testing import inline  # noqa: PLC0415 (see the module's docstring)

    with inline() as recorder:
        yield recorder
