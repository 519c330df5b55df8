"""The first lines of a script run in a fresh interpreter that must work
without opentelemetry: its import system refuses the package, as on an
install without the `otel` extra."""

from __future__ import annotations

import textwrap

BLOCK_OPENTELEMETRY = textwrap.dedent(
    """
    import sys

    class _BlockOpentelemetry:
        def find_spec(self, name, path=None, target=None):
            if name == "opentelemetry" or name.startswith("opentelemetry."):
                raise ModuleNotFoundError(name)
            return None

    sys.meta_path.insert(0, _BlockOpentelemetry())
    """
)
