"""The hooks as `loopdeck install` writes them: `<python> -I -S <loop>/launcher.py EVENT`, run
as Claude Code runs them (a real process in the project), each command taken from the settings
file the install wrote."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loop.cli.install import install
from loop.store.paths import Workspace
from loop.store.state import StateStore
from tests.conftest import run_loopdeck, stop_payload


@pytest.fixture
def project(ws: Workspace, tmp_path: Path) -> Workspace:
    """A project with a loop on a one-task checklist and loopdeck installed."""
    home = tmp_path / "claude-home"
    home.mkdir()
    (ws.root / "TODO.md").write_text("- [ ] one task left\n")
    started = run_loopdeck(
        "start", "x", "--task-file", "TODO.md", "--no-github", "--no-tasks", cwd=ws.root, env=_env(tmp_path)
    )
    assert started.returncode == 0, started.stderr
    install(ws)
    return ws


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "CLAUDE_CONFIG_DIR": str(tmp_path / "claude-home"), **extra}


def installed(ws: Workspace, event: str) -> list[str]:
    """The argv of the hook `event` as the settings file holds it."""
    settings = json.loads((ws.claude_dir / "settings.local.json").read_text())
    command = settings["hooks"][event][0]["hooks"][0]["command"]
    argv = shlex.split(command)
    assert argv[:3] == [sys.executable, "-I", "-S"], command
    return argv


def stop(ws: Workspace, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    payload = stop_payload(ws)
    return subprocess.run(
        installed(ws, "Stop"),
        cwd=ws.root,
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )


def test_the_installed_stop_hook_blocks(project: Workspace, tmp_path: Path) -> None:
    done = stop(project, _env(tmp_path))
    out = json.loads(done.stdout)
    assert out["decision"] == "block" and "one task left" in out["reason"], done.stdout
    assert done.stderr == ""


def test_a_hand_edited_state_still_reads_with_pyyaml_from_the_site_folders(
    project: Workspace, tmp_path: Path
) -> None:
    """A comment in the front matter takes the state off the fast path to PyYAML, which lives in
    the site folders the launcher skipped at start: the hook must still find it and block."""
    text = project.state.read_text()
    project.state.write_text(text.replace("---\n", "---\n# edited by hand\n", 1))
    out = json.loads(stop(project, _env(tmp_path)).stdout)
    assert out.get("decision") == "block", out  # not "failed safe" for want of yaml


def test_a_python_path_into_the_project_is_not_imported(project: Workspace, tmp_path: Path) -> None:
    """Claude Code hands the hook its environment; the hook runs in a project the agent writes.
    A `json.py` or `loop/` there, named by PYTHONPATH, must never run in place of the real ones."""
    planted = project.root / "planted"
    for name in ("json.py", "loop/__init__.py", "pathlib.py"):
        path = project.root / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"open({str(planted)!r}, 'a').write({name!r})\n")
    done = stop(
        project, _env(tmp_path, PYTHONPATH=str(project.root), PYTHONSTARTUP=str(project.root / "json.py"))
    )
    assert json.loads(done.stdout)["decision"] == "block"
    assert not planted.exists(), planted.read_text()


def test_the_installed_prompt_hook_answers(project: Workspace, tmp_path: Path) -> None:
    payload = {"session_id": "s", "cwd": str(project.root), "hook_event_name": "UserPromptSubmit"}
    done = subprocess.run(
        installed(project, "UserPromptSubmit"),
        cwd=project.root,
        input=json.dumps({**payload, "prompt": "/loop-status"}),
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        timeout=60,
        check=True,
    )
    assert "additionalContext" in json.loads(done.stdout)["hookSpecificOutput"], done.stdout


def test_the_installed_stop_failure_hook_waits_out_a_usage_limit(project: Workspace, tmp_path: Path) -> None:
    """The shell line Claude Code runs saves the input and hands it to a detached launcher."""
    settings = json.loads((project.claude_dir / "settings.local.json").read_text())
    command = settings["hooks"]["StopFailure"][0]["hooks"][0]["command"]
    assert f"{shlex.join([sys.executable, '-I', '-S'])} " in command
    failure = {
        "session_id": "s",
        "cwd": str(project.root),
        "hook_event_name": "StopFailure",
        "error": {
            "type": "rate_limit_error",
            "message": f"Claude AI usage limit reached|{int(time.time()) + 3600}",
        },
    }
    subprocess.run(
        ["/bin/sh", "-c", command],  # as Claude Code runs a hook command
        cwd=project.root,
        input=json.dumps(failure),
        text=True,
        env=_env(tmp_path),
        timeout=60,
        check=True,
    )
    store = StateStore(project)
    deadline = time.monotonic() + 30  # the hook was detached: it finishes after the shell
    state = store.read()
    while (state is None or state.waiting_for is None) and time.monotonic() < deadline:
        time.sleep(0.05)
        state = store.read()
    assert state is not None and state.waiting_for is not None, state
    assert state.waiting_for["kind"] == "usage-limit"


def test_an_unknown_form_is_one_line_and_lets_claude_code_go_on(project: Workspace, tmp_path: Path) -> None:
    """A form `loopdeck install` never writes: one line on stderr, no answer, exit 0 (a hook
    must never stop the session with an error of ours)."""
    argv = [*installed(project, "Stop")[:-1], "stop", "--bogus"]
    done = subprocess.run(
        argv, cwd=project.root, input="", capture_output=True, text=True, env=_env(tmp_path)
    )
    assert done.returncode == 0 and done.stdout == "" and "--bogus" in done.stderr
    assert len(done.stderr.splitlines()) == 1
