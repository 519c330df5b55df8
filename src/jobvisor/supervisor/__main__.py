"""`python -m jobvisor.supervisor [--setting value ...]`: the supervisor on its
own, configured from `JOBVISOR_*` variables and flags like `jobvisor run`.
An invalid setting is one line on stderr and exit code 78."""

from __future__ import annotations

import argparse
import sys

from ..config import (
    SETTINGS,
    database_url_from_hidden_flag,
    hide_database_url_flag,
    load_or_exit,
)
from .arbiter import main


def parse_flags(argv: list[str]) -> dict[str, str]:
    parser = argparse.ArgumentParser(prog="python -m jobvisor.supervisor")
    for setting in SETTINGS:
        parser.add_argument(setting.flag, dest=setting.field, metavar="VALUE", help=setting.help)
    args = parser.parse_args(argv)
    return {k: v for k, v in vars(args).items() if v is not None}


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
