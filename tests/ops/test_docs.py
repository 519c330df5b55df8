"""docs/operations.md stays true to the code: every metric, every command
and every exit code it promises exists, and none is missing."""

from __future__ import annotations

import re
from pathlib import Path

from jobvisor import cli
from jobvisor.config import EX_CONFIG
from jobvisor.metrics import Metrics
from jobvisor.worker import protocol

DOC = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()


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
    codes = {
        cli.EXIT_OK,
        cli.EXIT_FAILED,
        cli.EXIT_USAGE,
        protocol.EXIT_BOOT_FAILED,
        EX_CONFIG,
        cli.EXIT_INTERRUPTED,
    }
    assert set(map(int, table)) == codes
