"""What the runner does per iteration besides running the agent: how it starts its children,
how often it asks git, how often it reads what did not change. Counted, never timed: each test
pins one piece of work the runner used to repeat (or to do the slow way)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from loop.demo import workspace
from loop.store.paths import Workspace

AGENT = "#!/bin/sh\ncat > /dev/null\nsed -i '0,/- \\[ \\]/s//- [x]/' TODO.md\necho done\n"
"""The benchmark's agent: reads its prompt, ticks the first open box, says so."""


@pytest.fixture
def ticking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Workspace, Path]:
    """A demo repository of 3 tasks and the ticking agent."""
    for name in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"):
        monkeypatch.setenv(name, "t")
    for name in ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(name, "t@example.invalid")
    agent = tmp_path / "agent.sh"
    agent.write_text(AGENT)
    agent.chmod(0o755)
    return Workspace(workspace.create(tmp_path / "repo", tasks=3)), agent


def run_in_process(ws: Workspace, agent: Path, *extra: str) -> int:
    from loop.cli import main

    argv = ["-C", str(ws.root), "run", "tick every box", "--agent", str(agent), "--agent-format", "text"]
    argv += ["--task-file", "TODO.md", "--no-github", "--no-tasks", "--headless", *extra]
    return main(argv)


def deadline(predicate: Any, timeout: float = 15.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return bool(predicate())


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except OSError:
        return True


# --- starting children -------------------------------------------------------------------------


def test_the_agent_and_the_checks_start_without_python_in_the_child_and_are_registered(
    ticking: tuple[Workspace, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A `preexec_fn` makes Python fork the whole runner and run Python before exec; without one
    the child is spawned with vfork. The supervisor still learns each child's pid."""
    from loop.processes.supervisor import Supervisor

    ws, agent = ticking
    started: list[tuple[list[str], object]] = []
    registered: list[int] = []
    real_popen = subprocess.Popen

    class Spy(real_popen):  # type: ignore[misc,valid-type]
        def __init__(self, args: Any, *more: Any, **kwargs: Any) -> None:
            super().__init__(args, *more, **kwargs)
            started.append(([str(a) for a in args], kwargs.get("preexec_fn")))
            self.spied_pid = self.pid

    real_register = Supervisor.register

    def register(self: Supervisor, pid: int) -> None:
        registered.append(pid)
        real_register(self, pid)

    monkeypatch.setattr(subprocess, "Popen", Spy)
    monkeypatch.setattr(Supervisor, "register", register)
    check = f"{sys.executable} check.py"
    assert run_in_process(ws, agent, "--verify", check, "--verify-allow", check) == 0, capsys.readouterr()
    children = [(argv, preexec) for argv, preexec in started if argv[0] in (str(agent), sys.executable)]
    agents = [c for c in children if c[0][0] == str(agent)]
    checks = [c for c in children if c[0][-1] == "check.py"]
    assert agents and checks
    assert all(preexec is None for _argv, preexec in agents + checks)
    assert len(registered) == len(agents) + len(checks)


def test_a_child_registered_after_it_started_dies_with_a_killed_runner() -> None:
    """No marker in its environment, no `preexec_fn`: only the registration finds it."""
    from loop.processes.supervisor import Supervisor

    supervisor = Supervisor()
    child = subprocess.Popen(["sleep", "300"], start_new_session=True, env={"PATH": os.environ["PATH"]})
    try:
        supervisor.register(child.pid)
        assert supervisor.fd is not None
        os.close(supervisor.fd)  # the runner's end, as its death closes it (no release)
        supervisor.fd = None
        supervisor.proc.wait(15)
        assert deadline(lambda: gone(child.pid)), "the registered child outlived the runner"
    finally:
        if not gone(child.pid):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait(5)
        supervisor.close()
