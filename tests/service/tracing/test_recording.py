"""Spans are made only when a tracer provider is configured: with
opentelemetry-api installed but no provider, every span would be a no-op, and
the worker skips them. Each case runs in a fresh interpreter, since the global
provider can be set only once per process."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

NO_PROVIDER = """
from jobvisor import tracing
print(tracing.available(), tracing.recording())
"""

GLOBAL_PROVIDER = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from jobvisor import tracing
trace.set_tracer_provider(TracerProvider())
print(tracing.available(), tracing.recording())
"""

GIVEN_PROVIDER = """
from opentelemetry.sdk.trace import TracerProvider
from jobvisor import tracing
print(tracing.available(), tracing.recording(TracerProvider()))
"""


@pytest.mark.parametrize(
    ("script", "expected"),
    [(NO_PROVIDER, "True False"), (GLOBAL_PROVIDER, "True True"), (GIVEN_PROVIDER, "True True")],
    ids=["no-provider", "global-provider", "given-provider"],
)
def test_recording_needs_a_provider(script: str, expected: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout.strip() == expected, result.stderr
