"""Fixtures shared by every test: a workspace in tmp_path, the CLI in and out of process."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from loop.store.paths import Workspace

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SAMPLES = FIXTURES / "samples"
"""Real transcripts, task files and CLI outputs (their origins in its README): data only."""

SEED_STATE = """\
---
iteration: 5
max_iterations: 100
completion_promise: "null"
task_file: "null"
check_tasks: true
check_github: true
github_project_id: ""
started_at: 2026-01-09T10:30:00+00:00
verification_mode: false
verification_remaining: 0
---

Initial task prompt goes here...
"""


@pytest.fixture(autouse=True)
def own_state_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test keeps loopdeck's machine-local records (what a person confirmed) to itself,
    never in the home folder of whoever runs the suite; and no test inherits the marks of an
    agent's session from the shell that runs the suite."""
    from loop.trust.person import AGENT_MARKERS

    folder = tmp_path_factory.mktemp("trust-home")
    folder.chmod(0o700)
    monkeypatch.setenv("LOOPDECK_TRUST_HOME", str(folder))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state-home")))
    # No sandbox unless a test asks for one (tests/test_sandbox.py): most scripted agents live in
    # tmp_path outside their workspace, which a sandbox's private /tmp would hide.
    monkeypatch.setenv("LOOPDECK_SANDBOX", "off")
    for name in AGENT_MARKERS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def git_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test that commits does so as this identity, not the one (if any) of whoever runs
    the suite: a machine whose git has no identity runs the suite too. A test of the absence
    of one takes these away."""
    for key in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"):
        monkeypatch.setenv(key, "loopdeck tests")
    for key in ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(key, "tests@loopdeck.invalid")


def another_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """From here on the test runs as if on a machine where nobody confirmed anything (a clone):
    a fresh, empty folder of trust records."""
    folder = tmp_path / "another-machine"
    folder.mkdir(mode=0o700)
    monkeypatch.setenv("LOOPDECK_TRUST_HOME", str(folder))
    return folder


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    root = tmp_path / "project"
    (root / ".claude").mkdir(parents=True)
    return Workspace(root)


@dataclass
class Ran:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> Callable[..., Ran]:
    """Run `loopdeck ARGS` in process against the test workspace."""
    from tui.cli import main

    def run(*args: str) -> Ran:
        try:
            code = main(["-C", str(ws.root), *args])
        except SystemExit as exc:
            code = int(exc.code or 0)
        captured = capsys.readouterr()
        return Ran(code, captured.out, captured.err)

    return run


def loopdeck_cmd() -> list[str]:
    """`loopdeck` as the console script runs it."""
    return [sys.executable, "-m", "tui.cli"]


def stop_payload(ws: Workspace) -> dict[str, object]:
    """A first Stop of session `s` in `ws`, as Claude Code sends it to the hook."""
    return {
        "session_id": "s",
        "transcript_path": str(ws.root / "transcript.jsonl"),
        "cwd": str(ws.root),
        "hook_event_name": "Stop",
        "stop_hook_active": False,
    }


def run_loopdeck(
    *args: str,
    cwd: Path | None = None,
    input: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = str(REPO) + os.pathsep + full_env.get("PYTHONPATH", "")
    return subprocess.run(
        [*loopdeck_cmd(), *args],
        cwd=cwd,
        input=input,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def iteration_logs(root: Path) -> list[Path]:
    """Every iteration log of the loops in `root`: the live loop's (under
    `.claude/loopdeck/iterations/<loop>/`) and the ended loops' (in their archive folders), by
    iteration."""
    claude = root / ".claude"
    found = [*claude.glob("loopdeck/iterations/*/*.log"), *claude.glob("loops/*/iterations/*.log")]
    return sorted(found, key=lambda p: (p.name.split(".", 1)[0], p.name, str(p)))


def alive_with(token: str) -> list[int]:
    """The live processes (zombies aside) whose command line holds `token`: what a test checks
    is gone after a turn, however the processes were started."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            argv = Path(f"/proc/{name}/cmdline").read_bytes()
            state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if token.encode() in argv and state != "Z":
            found.append(int(name))
    return found
