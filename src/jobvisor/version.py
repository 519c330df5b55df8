"""The version of this jobvisor, in a module of its own so that any layer can
name it without importing the package's public surface."""

from __future__ import annotations

from typing import Final

__version__: Final = "0.1.0"
