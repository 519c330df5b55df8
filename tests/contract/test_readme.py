"""The README stays true: its configuration table lists every setting with its
default, its tour runs, and the two set-up commands exist in the Makefile."""

from __future__ import annotations

import contextlib
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

from jobvisor import testing
from jobvisor.config import SETTINGS, Setting

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def table_rows() -> dict[str, list[str]]:
    """The configuration table's rows by variable: {env: [variable, default, meaning]}."""
    rows = {}
    for line in README.splitlines():
        if line.startswith("| `JOBVISOR_"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            rows[cells[0].strip("`")] = cells
    return rows


def shown_default(setting: Setting) -> str:
    return f"`{setting.default}`" if setting.default else "*(empty)*"


def python_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", README, flags=re.MULTILINE | re.DOTALL)


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: s.env)
def test_every_setting_is_in_the_table_with_its_default(setting: Setting) -> None:
    rows = table_rows()
    assert setting.env in rows, f"README's configuration table has no row for {setting.env}"
    assert rows[setting.env][1] == shown_default(setting), (
        f"README shows {setting.env}'s default as {rows[setting.env][1]}, "
        f"config.SETTINGS says {shown_default(setting)}"
    )
    assert rows[setting.env][2], f"README gives {setting.env} no meaning"


def test_the_table_lists_no_setting_that_does_not_exist() -> None:
    unknown = set(table_rows()) - {s.env for s in SETTINGS}
    assert not unknown, f"README lists variables config.SETTINGS does not have: {unknown}"


def test_the_two_setup_commands_are_makefile_targets() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in ("run", "test"):
        assert f"make {target}" in README
        assert re.search(rf"^{target}:", makefile, flags=re.MULTILINE), f"no `{target}:` target"


def run_tour(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Every ```python block, in order, in one namespace, in an empty
    directory, as a file of its own would run (no `from __future__` of ours)."""
    blocks = python_blocks()
    assert len(blocks) >= 5, "the README's tour has lost its code blocks"
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "readme_tour"}
    for number, block in enumerate(blocks, 1):
        try:
            code = compile(block, f"README.md python block {number}", "exec", dont_inherit=True)
            exec(code, namespace)
        except Exception as exc:
            raise AssertionError(f"README python block {number} failed:\n{block}") from exc
    return namespace


def test_the_tour_runs_on_sqlite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_tour(tmp_path, monkeypatch)
    assert (tmp_path / "tour.db").exists()


def test_the_tour_s_pytest_example_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's `test_*` functions pass, the plugin's fixtures given as
    pytest would give them."""
    namespace = run_tour(tmp_path, monkeypatch)
    tests = {name: f for name, f in namespace.items() if name.startswith("test_")}
    assert len(tests) >= 3, "the README's pytest example has lost its tests"
    fixtures = {"jobvisor_recording": testing.recording, "jobvisor_inline": testing.inline}
    for test in tests.values():
        wanted = list(inspect.signature(test).parameters)
        with contextlib.ExitStack() as stack:
            test(*(stack.enter_context(fixtures[p]()) for p in wanted))
    namespace["q"].close()


@pytest.mark.parametrize(
    "setting", [s for s in SETTINGS if hasattr(s.parse, "expected")], ids=lambda s: s.env
)
def test_every_bounded_setting_shows_its_bounds(setting: Setting) -> None:
    """A setting checked against bounds says in the table what it accepts,
    in the words of the error an out-of-range value gets."""
    meaning = table_rows()[setting.env][2]
    assert f"accepts {setting.expected}" in meaning, (
        f"README gives {setting.env} no 'accepts {setting.expected}'"
    )
