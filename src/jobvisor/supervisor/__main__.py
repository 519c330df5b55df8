"""`python -m jobvisor.supervisor [--setting value ...]`: the supervisor on its
own, configured from `JOBVISOR_*` variables and flags like `jobvisor run`.
An invalid setting is one line on stderr and exit code 78."""

from __future__ import annotations

import argparse
import sys

from ..config import (
    add_flags,
    database_url_from_hidden_flag,
    flag_overrides,
    hide_database_url_flag,
    load_or_exit,
)
from .arbiter import main


def parse_flags(argv: list[str]) -> dict[str, str]:
    parser = argparse.ArgumentParser(prog="python -m jobvisor.supervisor")
    add_flags(parser)
    return flag_overrides(parser.parse_args(argv))


def run(argv: list[str]) -> int:
    overrides = parse_flags(argv)
    if argv == sys.argv[1:]:  # our own command line: keep a password out of `ps`
        hide_database_url_flag(overrides.get("database_url"))
    hidden = database_url_from_hidden_flag()
    if hidden is not None:
        overrides.setdefault("database_url", hidden)
    config = load_or_exit("jobvisor", overrides)
    return main(config)  # a SIGHUP re-reads the environment, these flags still winning


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
