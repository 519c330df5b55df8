"""`python -m jobvisor.supervisor [--setting value ...]`: the supervisor on its
own, configured from `JOBVISOR_*` variables and flags like `jobvisor run`.
An invalid setting is one line on stderr and exit code 78."""

from __future__ import annotations

import argparse
import sys

from ..config import EX_CONFIG, SETTINGS, Config, ConfigError
from .arbiter import main


def parse_flags(argv: list[str]) -> dict[str, str]:
    parser = argparse.ArgumentParser(prog="python -m jobvisor.supervisor")
    for setting in SETTINGS:
        parser.add_argument(setting.flag, dest=setting.field, metavar="VALUE", help=setting.help)
    args = parser.parse_args(argv)
    return {k: v for k, v in vars(args).items() if v is not None}


def run(argv: list[str]) -> int:
    overrides = parse_flags(argv)
    try:
        config = Config.load(overrides=overrides)
    except ConfigError as exc:
        print(f"jobvisor: {exc}", file=sys.stderr)
        return EX_CONFIG
    return main(config)  # a SIGHUP re-reads the environment, these flags still winning


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
