"""The real `jobvisor` console script, run against a real database."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

JOBVISOR = Path(sys.executable).with_name("jobvisor")


@dataclasses.dataclass
class Result:
    code: int
    out: str
    err: str


def clean_env(**extra: str) -> dict[str, str]:
    """The test's environment without any JOBVISOR_* setting, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBVISOR_")}
    env.update(extra)
    return env


@dataclasses.dataclass
class Cli:
    url: str
    cwd: Path

    def __call__(
        self, *args: str, input: str | None = None, env: dict[str, str] | None = None
    ) -> Result:
        done = subprocess.run(
            [str(JOBVISOR), *args],
            input=input if input is not None else "",
            capture_output=True, text=True, timeout=120, check=False, cwd=self.cwd,
            env=env if env is not None else clean_env(JOBVISOR_DATABASE_URL=self.url),
        )  # fmt: skip
        return Result(done.returncode, done.stdout, done.stderr)

    def ok(self, *args: str, input: str | None = None) -> str:
        result = self(*args, input=input)
        assert result.code == 0, (args, result)
        return result.out
