"""How the parent starts, hears and reaps a worker, with a stand-in worker
script (the protocol, not the real worker); and a reload with an invalid
configuration."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time
from pathlib import Path

from jobvisor.config import Config
from jobvisor.settings import ConfigError
from jobvisor.supervisor import Supervisor
from jobvisor.supervisor.arbiter import reload_with_same_flags
from jobvisor.supervisor.children import (
    describe_exit,
    read_messages,
    reap_children,
    spawn_worker,
)
from tests.support.aio import run_async
from tests.support.wait import wait_until

STAND_IN = textwrap.dedent(
    """
    import os, sys
    from jobvisor.worker import protocol
    channel = protocol.ControlChannel.from_env()
    channel.send({"t": "ready"})
    channel.send({"t": "hb", "worker_id": os.environ[protocol.WORKER_ID_ENV],
                  "pgid_is_own": os.getpgid(0) == os.getpid(),
                  "stdin": os.readlink("/proc/self/fd/0")})
    os.write(channel.fd, b"not json\\n")
    channel.send({"t": "fatal", "error": "done"})
    sys.exit(int(sys.argv[1]))
    """
)


def test_describe_exit_names_the_code_or_the_signal() -> None:
    assert describe_exit(3) == "exit code 3"
    assert describe_exit(-signal.SIGKILL) == "killed by SIGKILL (probably the OOM killer)"
    assert describe_exit(-signal.SIGABRT) == "killed by SIGABRT"


def test_a_spawned_worker_is_heard_and_reaped(tmp_path: Path) -> None:
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    worker = spawn_worker(slot=0, env=dict(os.environ), command=(sys.executable, str(script), "3"))
    try:
        messages: list[dict[str, object]] = []

        def closed() -> bool:
            batch, eof = read_messages(worker)
            messages.extend(batch)
            return eof

        wait_until(closed, what="the stand-in's end of the pipe to close")
        reaped: list[tuple[int, int]] = []

        def collected() -> bool:
            reaped.extend(reap_children())
            return any(pid == worker.pid for pid, _ in reaped)

        wait_until(collected, what="the stand-in reaped")
    finally:
        worker.close_fds()
    assert (worker.pid, 3) in reaped
    assert [m["t"] for m in messages] == ["ready", "hb", "fatal"]  # the garbage line skipped
    hb = messages[1]
    assert hb["worker_id"] == worker.worker_id and worker.worker_id.startswith("w-")
    assert hb["pgid_is_own"] is True  # a terminal's Ctrl-C reaches only the parent
    assert hb["stdin"] == os.devnull


def test_each_incarnation_gets_a_new_id(tmp_path: Path) -> None:
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    command = (sys.executable, str(script), "0")
    workers = [spawn_worker(slot=0, env=dict(os.environ), command=command) for _ in range(2)]
    try:
        deadline = time.monotonic() + 60
        pids = {w.pid for w in workers}
        while pids and time.monotonic() < deadline:
            pids -= {pid for pid, _ in reap_children()}
            time.sleep(0.02)
        assert not pids
    finally:
        for w in workers:
            w.close_fds()
    assert workers[0].worker_id != workers[1].worker_id


def test_a_reload_with_an_invalid_configuration_keeps_the_old_one() -> None:
    config = Config.load(env={})

    def invalid() -> Config:
        raise ConfigError("JOBVISOR_WORKERS", "0", "an integer >= 1")

    supervisor = Supervisor(config, load_config=invalid)
    run_async(supervisor._reload)
    assert supervisor.config is config
    assert supervisor.workers == {} and len(supervisor.slots) == config.workers


def test_a_reload_keeps_the_command_line_flags() -> None:
    config = Config.load(env={}, overrides={"workers": "5", "queues": "a,b"})
    reloaded = reload_with_same_flags(config)()
    assert (reloaded.workers, reloaded.queues) == (5, ("a", "b"))
    assert reloaded.sources["workers"] == "flag"
