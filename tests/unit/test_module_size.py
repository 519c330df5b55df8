"""No module under src/jobvisor is over 600 lines: one that grows past that
holds more than one concern and is split along its seams (docs/design.md,
"Layout")."""

from __future__ import annotations

from pathlib import Path

import jobvisor

MAX_LINES = 600
SOURCE = Path(jobvisor.__file__).parent


def line_counts() -> dict[str, int]:
    counts = {}
    for path in sorted(SOURCE.rglob("*.py")):
        relative = path.relative_to(SOURCE).as_posix()
        counts[relative] = len(path.read_text(encoding="utf-8").splitlines())
    return counts


def test_the_source_is_where_the_check_looks() -> None:
    counts = line_counts()
    assert "queue/api.py" in counts
    assert "worker/loop.py" in counts
    assert "cli/jobs.py" in counts


def test_no_module_is_over_600_lines() -> None:
    over = {name: lines for name, lines in line_counts().items() if lines > MAX_LINES}
    assert not over, f"modules over {MAX_LINES} lines (split them along their seams): {over}"
