"""The README and the getting-started docs stay true: the README's example
runs through a real `jobvisor run`, its two set-up commands exist in the
Makefile, the configuration table (docs/configuration.md) lists every setting
with its default, and the tour (getting started and the guides that carry it
on) runs."""

from __future__ import annotations

import contextlib
import inspect
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

import jobvisor
from jobvisor import testing
from jobvisor.settings import SETTINGS, Setting

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = ROOT / "docs"
CONFIGURATION = (DOCS / "configuration.md").read_text(encoding="utf-8")
# The tour, page by page in the order the site reads them: each page's blocks
# run after the ones before, in one namespace.
TOUR_PAGES = (
    "getting-started.md",
    "guides/handlers.md",
    "guides/typed-tasks.md",
    "guides/testing.md",
    "guides/fastapi.md",
)


def table_rows() -> dict[str, list[str]]:
    """The configuration table's rows by variable: {env: [variable, default, meaning]}."""
    rows = {}
    for line in CONFIGURATION.splitlines():
        if line.startswith("| `JOBVISOR_"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            rows[cells[0].strip("`")] = cells
    return rows


def shown_default(setting: Setting) -> str:
    return f"`{setting.default}`" if setting.default else "*(empty)*"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL)


def sh_blocks(text: str) -> list[str]:
    return re.findall(r"^```sh\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL)


def tour_blocks() -> list[tuple[str, str]]:
    """(where, code) of every ```python block of the tour's pages, except the
    first-job example, which `jobvisor run` runs for real below."""
    blocks = []
    for page in TOUR_PAGES:
        for number, block in enumerate(python_blocks((DOCS / page).read_text("utf-8")), 1):
            if block != quickstart_source():
                blocks.append((f"docs/{page} python block {number}", block))
    return blocks


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: s.env)
def test_every_setting_is_in_the_table_with_its_default(setting: Setting) -> None:
    rows = table_rows()
    assert setting.env in rows, f"the configuration table has no row for {setting.env}"
    assert rows[setting.env][1] == shown_default(setting), (
        f"docs/configuration.md shows {setting.env}'s default as {rows[setting.env][1]}, "
        f"settings.SETTINGS says {shown_default(setting)}"
    )
    assert rows[setting.env][2], f"the configuration table gives {setting.env} no meaning"


def test_the_table_lists_no_setting_that_does_not_exist() -> None:
    unknown = set(table_rows()) - {s.env for s in SETTINGS}
    assert not unknown, f"the table lists variables settings.SETTINGS does not have: {unknown}"


def test_the_two_setup_commands_are_makefile_targets() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in ("run", "test"):
        assert f"make {target}" in README
        assert re.search(rf"^{target}:", makefile, flags=re.MULTILINE), f"no `{target}:` target"


def run_tour(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Every ```python block of the tour, in order, in one namespace, in an
    empty directory, as a file of its own would run (no `from __future__` of
    ours)."""
    blocks = tour_blocks()
    assert len(blocks) >= 5, "the tour has lost its code blocks"
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "readme_tour"}
    for where, block in blocks:
        try:
            code = compile(block, where, "exec", dont_inherit=True)
            exec(code, namespace)
        except Exception as exc:
            raise AssertionError(f"{where} failed:\n{block}") from exc
    return namespace


def test_the_tour_runs_on_sqlite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_tour(tmp_path, monkeypatch)
    assert (tmp_path / "tour.db").exists()


def test_the_tour_s_pytest_example_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The testing guide's `test_*` functions pass, the plugin's fixtures given as
    pytest would give them."""
    namespace = run_tour(tmp_path, monkeypatch)
    tests = {name: f for name, f in namespace.items() if name.startswith("test_")}
    assert len(tests) >= 3, "the testing guide has lost its tests"
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
        f"docs/configuration.md gives {setting.env} no 'accepts {setting.expected}'"
    )


def quickstart_source() -> str:
    """The README's first ```python block: the example a newcomer runs."""
    return python_blocks(README)[0]


def quickstart_block() -> str:
    """The README's ```sh block that runs the example."""
    (block,) = [b for b in sh_blocks(README) if "quickstart.py" in b]
    return block


def quickstart_commands() -> list[list[str]]:
    """The README's commands for the example, each split as a shell would
    (comments dropped)."""
    block = quickstart_block()
    return [shlex.split(line, comments=True) for line in block.splitlines() if line.strip()]


def test_the_example_is_the_same_everywhere_it_is_shown() -> None:
    for page in ("index.md", "getting-started.md"):
        text = (DOCS / page).read_text("utf-8")
        assert quickstart_source() in python_blocks(text), f"docs/{page} shows another example"
        assert quickstart_block() in sh_blocks(text), f"docs/{page} runs it with other commands"


def _environment(command: list[str]) -> tuple[dict[str, str], list[str]]:
    """Split `A=1 B=2 prog args` into its assignments and the command."""
    settings = {}
    while "=" in command[0]:
        name, _, value = command.pop(0).partition("=")
        settings[name] = value
    return settings, command


def test_the_readme_example_runs_through_the_service(url: str, tmp_path: Path) -> None:
    """The README's fifteen lines, saved as quickstart.py and run with the
    README's own commands in an empty directory: the script enqueues, a real
    `jobvisor run` runs the job, `jobvisor show` prints it completed, and
    SIGTERM stops the service with exit 0. SQLite is the README's default
    (./jobvisor.db); PostgreSQL through JOBVISOR_DATABASE_URL."""
    (tmp_path / "quickstart.py").write_text(quickstart_source(), encoding="utf-8")
    enqueue, run, show = quickstart_commands()
    assert enqueue == ["python", "quickstart.py"]
    bin_dir = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBVISOR_")}
    env.pop("NOTIFY_SOCKET", None)
    env["JOBVISOR_HTTP_ADDR"] = ""  # the default port may be taken on a shared machine
    if url.startswith("postgresql"):
        env["JOBVISOR_DATABASE_URL"] = url
    ran = subprocess.run(
        [sys.executable, "quickstart.py"], cwd=tmp_path, env=env, capture_output=True,
        text=True, timeout=60, check=True,
    )  # fmt: skip
    job_id = uuid.UUID(ran.stdout.strip())

    settings, command = _environment(run)
    assert command == ["jobvisor", "run"]
    service = subprocess.Popen(
        [str(bin_dir / "jobvisor"), "run"], cwd=tmp_path, env={**env, **settings},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        q = jobvisor.connect(url if url.startswith("postgresql") else
                             f"sqlite:///{tmp_path / 'jobvisor.db'}")  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while q.get(job_id).status != "completed":
                assert service.poll() is None, f"jobvisor run exited {service.returncode}"
                assert time.monotonic() < deadline, f"job {q.get(job_id)} never completed"
                time.sleep(0.05)
            assert q.get(job_id).result == "hello, Ada"
        finally:
            q.close()
        service.send_signal(signal.SIGTERM)
        assert service.wait(timeout=60) == 0
    finally:
        if service.poll() is None:
            service.kill()
            service.wait()

    assert show[:2] == ["jobvisor", "show"]
    shown = subprocess.run(
        [str(bin_dir / "jobvisor"), "show", str(job_id)], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert re.search(r"^status:\s+completed$", shown.stdout, flags=re.MULTILINE), shown.stdout
    assert '"hello, Ada"' in shown.stdout
