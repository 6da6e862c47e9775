"""The hooks as `loopdeck install` writes them: `<python> -I <loop>/launcher.py EVENT`, run
as Claude Code runs them (a real process in the project), each command taken from the settings
file the install wrote."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loop.cli.install import install
from loop.store.paths import Workspace
from loop.store.state import StateStore
from tests.conftest import REPO, run_loopdeck, stop_payload


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
    assert argv[:2] == [sys.executable, "-I"] and argv[2].endswith("/loop/launcher.py"), command
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
    the environment's site folders: the hook must find it and block."""
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
    assert f"{shlex.join([sys.executable, '-I'])} " in command
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


def test_after_install_a_stop_finds_every_module_compiled_and_compiles_none(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`loopdeck install` compiles the package the hooks run (here a copy with no bytecode at
    all): every loopdeck module the first Stop imports is read from that bytecode, and the Stop
    writes none (it compiled nothing)."""
    from importlib.util import cache_from_source

    from loop.cli import install as install_module

    copy = tmp_path / "install" / "loop"
    shutil.copytree(REPO / "loop", copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(install_module, "LAUNCHER", copy / "launcher.py")
    (ws.root / "TODO.md").write_text("- [ ] one task left\n")
    started = run_loopdeck(
        "start", "x", "--task-file", "TODO.md", "--no-github", "--no-tasks", cwd=ws.root, env=_env(tmp_path)
    )
    assert started.returncode == 0, started.stderr
    install(ws)
    argv = installed(ws, "Stop")
    assert argv[2] == str(copy / "launcher.py"), argv
    compiled = {path: path.stat().st_mtime_ns for path in copy.rglob("*.pyc")}
    for module in ("drivers/hook_entry.py", "drivers/hook.py", "core/engine.py", "store/state.py"):
        assert Path(cache_from_source(str(copy / module))) in compiled, module

    done = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]],
        cwd=ws.root,
        input=json.dumps(stop_payload(ws)),
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        timeout=60,
        check=True,
    )
    assert json.loads(done.stdout)["decision"] == "block"
    imported = re.findall(r"\|\s+(loop(?:\.\w+)*)$", done.stderr, re.MULTILINE)
    assert "loop.drivers.hook" in imported and "loop.core.engine" in imported, done.stderr
    for name in imported:
        source = copy.parent.joinpath(*name.split("."))
        source = source / "__init__.py" if source.is_dir() else source.with_suffix(".py")
        assert Path(cache_from_source(str(source))) in compiled, f"{name} was not compiled by install"
    after = {path: path.stat().st_mtime_ns for path in copy.rglob("*.pyc")}
    assert after == compiled, "the Stop compiled (and wrote) bytecode"


def test_install_compiles_at_the_level_and_check_the_launcher_reads(tmp_path: Path) -> None:
    """Whatever runs `loopdeck install` (`python -O`, a `SOURCE_DATE_EPOCH` from a packager),
    the bytecode is the launcher's: optimisation level 0 (it runs without -O), checked by the
    source's timestamp (not a hash of every source at every Stop)."""
    from importlib.util import cache_from_source

    package = tmp_path / "pkg"
    package.mkdir()
    (package / "a.py").write_text("X = 1\n")
    code = (  # no `assert`: -O strips it
        "import pathlib, sys\nfrom loop.cli.install import precompile\n"
        f"sys.exit(0 if precompile(pathlib.Path({str(package)!r})) else 1)\n"
    )
    env = {**os.environ, "SOURCE_DATE_EPOCH": "1", "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-O", "-c", code], env=env, check=True, timeout=60, cwd=tmp_path)
    plain = Path(cache_from_source(str(package / "a.py"), optimization=""))
    assert plain.is_file(), sorted(p.name for p in plain.parent.iterdir())
    flags = int.from_bytes(plain.read_bytes()[4:8], "little")
    assert flags == 0, "a hash-checked file"
