"""The docs stay true to the code. docs/operations.md: every metric, every
command and every exit code it promises exists, and none is missing.
docs/design.md: its exit-code table is `ExitCode`, and it names every method
of the queue's public faces. docs/benchmarks.md: every command and flag it
gives exists in the script it names, and every chart it shows is there."""

from __future__ import annotations

import re
from pathlib import Path

from jobvisor import cli
from jobvisor.exitcodes import ExitCode
from jobvisor.metrics import Metrics
from jobvisor.queue.api import AsyncQueue, Queue
from jobvisor.queue.dead import AsyncDeadJobs, DeadJobs

ROOT = Path(__file__).resolve().parents[3]
DOC = (ROOT / "docs" / "operations.md").read_text()
DESIGN = (ROOT / "docs" / "design.md").read_text()
BENCHMARKS = (ROOT / "docs" / "benchmarks.md").read_text()


def test_every_metric_is_documented_and_every_documented_metric_exists() -> None:
    names = set()
    for family in Metrics().registry.collect():
        suffix = "_total" if family.type == "counter" else ""
        names.add(family.name + suffix)
    documented = set(re.findall(r"^\| `(jobvisor_[a-z_]+)`", DOC, flags=re.MULTILINE))
    assert documented == names


def test_every_command_is_documented() -> None:
    parser = cli.build_parser()
    commands = set()
    for action in parser._actions:
        if hasattr(action, "choices") and isinstance(action.choices, dict):
            commands |= set(action.choices)
    for command in commands:
        assert f"`jobvisor {command}" in DOC, command


def test_exit_codes_are_documented() -> None:
    table = dict(re.findall(r"^\| (\d+) \| (.+) \|$", DOC, flags=re.MULTILINE))
    assert set(map(int, table)) == {int(code) for code in ExitCode}


def test_design_exit_codes_are_the_exitcode_table() -> None:
    table = re.findall(r"^\| (\d+) \| `([A-Z_]+)` \|", DESIGN, flags=re.MULTILINE)
    assert {int(code): name for code, name in table} == {c.value: c.name for c in ExitCode}


def test_design_names_every_public_queue_method() -> None:
    for face in (Queue, AsyncQueue, DeadJobs, AsyncDeadJobs):
        for name in vars(face):
            if name.startswith("_") or name in ("close", "engine"):
                continue
            assert re.search(rf"\b{name}\b", DESIGN), (
                f"docs/design.md never names {face.__name__}.{name}"
            )


def _sections(text: str) -> list[str]:
    return re.split(r"^## ", text, flags=re.MULTILINE)[1:]


def test_benchmark_commands_use_flags_their_script_has() -> None:
    commands = re.findall(
        r"^\.venv/bin/python (bench/\S+\.py)(.*)$", BENCHMARKS, flags=re.MULTILINE
    )
    assert len(commands) >= 10, "docs/benchmarks.md has lost its commands"
    for script, args in commands:
        source = (ROOT / script).read_text()
        for flag in re.findall(r"(?<![\w-])--[a-z][a-z-]*", args.split("#")[0]):
            assert f'"{flag}"' in source, f"{script} has no {flag}"


def test_benchmark_flags_named_in_a_section_exist_in_its_scripts() -> None:
    for section in _sections(BENCHMARKS):
        scripts = set(re.findall(r"bench/[\w/]+\.py", section))
        sources = "".join((ROOT / script).read_text() for script in scripts)
        for flag in set(re.findall(r"`(--[a-z][a-z-]*)", section)):
            assert f'"{flag}"' in sources, f"no script of '{section.splitlines()[0]}' has {flag}"


def test_benchmark_charts_exist() -> None:
    charts = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", BENCHMARKS)
    assert len(charts) >= 4
    for chart in charts:
        assert (ROOT / "docs" / chart).resolve().is_file(), chart
