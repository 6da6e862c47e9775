"""`loopdeck doctor`: a pass or fail line per check, with the fix; exit 1 when something fails."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from loop.cli import doctor, install
from loop.store.paths import Workspace
from loop.store.state import LoopState, StateStore


def fake_program(folder: Path, name: str, script: str = "echo 9.9.9") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def path_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH holding only the system's own programs and the fakes a test puts here: no agent
    CLI, gh or notify-send of whoever runs the suite."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config-home"))
    return folder


def by_name(checks: list[doctor.Check], name: str) -> list[doctor.Check]:
    return [c for c in checks if c.name == name]


def test_hooks_of_a_loopdeck_that_moved_fail_with_the_fix(
    ws: Workspace, tmp_path: Path, cli, path_bin
) -> None:
    """Installed from a clone (its Python and its launcher), then the clone moved."""
    clone = tmp_path / "old-clone"
    (clone / ".venv" / "bin").mkdir(parents=True)
    (clone / "loop").mkdir()
    python = clone / ".venv" / "bin" / "python"
    python.symlink_to(sys.executable)
    launcher = clone / "loop" / "launcher.py"
    shutil_copy(install.LAUNCHER, launcher)
    runner = f"{python} -I -S {launcher}"
    report = install.install(ws, exe=None)
    settings = report.settings
    settings.write_text(settings.read_text().replace(install.hook_runner(), runner))
    assert [c.status for c in by_name(doctor.report(ws), "hooks")] == [doctor.WARN]  # another loopdeck
    clone.rename(tmp_path / "moved-clone")
    checks = by_name(doctor.report(ws), "hooks")
    assert [c.status for c in checks] == [doctor.FAIL]
    assert f"{python} does not exist" in checks[0].found and f"{launcher} does not exist" in checks[0].found
    assert "Stop, StopFailure, UserPromptSubmit" in checks[0].found
    assert checks[0].fix is not None and f"run `loopdeck install` in {ws.root}" in checks[0].fix
    ran = cli("doctor")
    assert ran.code == 1 and "FAIL  hooks:" in ran.out and "fix: run `loopdeck install`" in ran.out
    assert cli("install").code == 0
    assert [c.status for c in by_name(doctor.report(ws), "hooks")] == [doctor.OK]


def shutil_copy(src: Path, dst: Path) -> None:
    dst.write_bytes(src.read_bytes())


def test_an_older_installs_loopdeck_command_that_is_gone_fails(ws: Workspace, path_bin) -> None:
    install.install(ws, exe="/nowhere/.venv/bin/loopdeck")
    (check,) = by_name(doctor.report(ws), "hooks")
    assert check.status == doctor.FAIL and "/nowhere/.venv/bin/loopdeck does not exist" in check.found


def test_no_hooks_is_no_failure(ws: Workspace, path_bin) -> None:
    (check,) = by_name(doctor.report(ws), "hooks")
    assert check.status == doctor.INFO and "not installed" in check.found


def test_the_agent_in_use_must_be_on_path_the_others_are_listed(ws: Workspace, path_bin) -> None:
    checks = doctor.report(ws)
    (claude,) = by_name(checks, "agent claude")
    assert claude.status == doctor.FAIL and "npm install -g @anthropic-ai/claude-code" in (claude.fix or "")
    codex = by_name(checks, "agent codex")[0]
    assert codex.status == doctor.INFO and "npm install -g @openai/codex" in codex.found
    fake_program(path_bin, "claude", "echo '2.1.332 (Claude Code)'")
    fake_program(path_bin, "codex", "echo 'codex-cli 0.171.0'")
    checks = doctor.report(ws)
    (claude,) = by_name(checks, "agent claude")
    assert claude.status == doctor.OK and "2.1.332 (Claude Code)" in claude.found
    assert "codex-cli 0.171.0" in by_name(checks, "agent codex")[0].found


def test_the_agent_the_loop_recorded_is_the_one_checked(ws: Workspace, path_bin) -> None:
    from loop import trust

    state = LoopState.new("x")
    state.extra["runner"] = {"agent": "codex exec --json -- {prompt}"}
    StateStore(ws).write(state)
    trust.record(ws, state, "test")
    checks = doctor.report(ws)
    assert by_name(checks, "agent codex")[0].status == doctor.FAIL
    assert by_name(checks, "agent claude")[0].status == doctor.INFO


def test_gh_is_checked_when_a_github_project_is_configured(ws: Workspace, path_bin) -> None:
    from loop import trust

    state = LoopState.new("x", check_github=True, github_project_id="7")
    StateStore(ws).write(state)
    trust.record(ws, state, "test")
    (gh,) = by_name(doctor.report(ws), "gh")
    assert gh.status == doctor.FAIL and "not installed" in gh.found
    fake_program(path_bin, "gh", "exit 1")
    (gh,) = by_name(doctor.report(ws), "gh")
    assert gh.status == doctor.FAIL and gh.fix == "gh auth login"
    fake_program(path_bin, "gh", "exit 0")
    (gh,) = by_name(doctor.report(ws), "gh")
    assert gh.status == doctor.OK


def test_notification_targets_are_checked_and_nothing_is_sent(
    ws: Workspace, path_bin, tmp_path: Path
) -> None:
    from loop import trust

    sent = tmp_path / "sent"
    fake_program(path_bin, "tell-me", f"touch {sent}")
    targets = ["desktop", "https://", "cmd:tell-me", "cmd:not-there", "http://[::1/x", "bell"]
    state = LoopState.new("x", notify=targets)
    StateStore(ws).write(state)
    trust.record(ws, state, "test")
    checks = [c for c in doctor.report(ws) if c.name.startswith("notify")]
    status = {c.name: c.status for c in checks}
    assert status == {
        "notify desktop": doctor.FAIL,
        "notify https:///…": doctor.FAIL,
        "notify cmd:tell-me": doctor.OK,
        "notify cmd:not-there": doctor.FAIL,
        "notify http://[::1/…": doctor.FAIL,
        "notify bell": doctor.OK,
    }, status
    desktop = next(c for c in checks if c.name == "notify desktop")
    assert "notify-send" in desktop.found and "libnotify-bin" in (desktop.fix or "")
    assert not sent.exists()
    fake_program(path_bin, "notify-send", f"touch {sent}")
    assert next(c for c in doctor.report(ws) if c.name == "notify desktop").status == doctor.OK
    assert not sent.exists()


def test_a_loop_nobody_here_confirmed_fails_with_trust_as_the_fix(ws: Workspace, path_bin) -> None:
    StateStore(ws).write(LoopState.new("from a clone", verify=["make test"]))
    (check,) = [c for c in doctor.report(ws) if c.name == "trust"]
    assert check.status == doctor.FAIL and "verification command: make test" in check.found
    assert check.fix is not None and "loopdeck trust" in check.fix


def test_a_corrupt_state_and_a_broken_config_are_failures(ws: Workspace, path_bin, tmp_path: Path) -> None:
    ws.state.write_text("---\niteration: [\n---\n")
    config = tmp_path / "config-home" / "loopdeck" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('agent = "codex"\nretries = = 3\n')
    checks = doctor.report(ws)
    (loop_check,) = by_name(checks, "loop")
    assert loop_check.status == doctor.FAIL and "loopdeck resume" in (loop_check.fix or "")
    (config_check,) = by_name(checks, "config")
    assert config_check.status == doctor.FAIL and f"{config}:2" in config_check.found


def test_exit_status_and_json_for_scripts(ws: Workspace, path_bin, cli) -> None:
    fake_program(path_bin, "claude", "echo 2.1.332")
    ran = cli("doctor", "--json")
    report = json.loads(ran.out)
    failed = [c for c in report["checks"] if c["status"] == "FAIL"]
    assert ran.code == (1 if failed else 0) and report["ok"] is (not failed)
    assert not failed, failed  # nothing configured, the agent there: nothing to fix
    plain = cli("doctor")
    assert plain.code == 0 and plain.out.splitlines()[-1].startswith("loopdeck doctor: nothing to fix")
    os.remove(path_bin / "claude")
    assert cli("doctor").code == 1


def test_run_refuses_a_desktop_target_without_notify_send_before_it_starts(
    ws: Workspace, cli, path_bin
) -> None:
    ran = cli("run", "x", "--agent", "true", "--notify", "desktop", "--no-github", "--no-tasks", "--headless")
    assert ran.code == 1 and "notify-send" in ran.err and "libnotify-bin" in ran.err
    assert not ws.state.exists()
    ran = cli("start", "x", "--notify", "desktop", "--no-github", "--no-tasks")
    assert ran.code == 1 and "notify-send" in ran.err and not ws.state.exists()


# --- the sandboxes and the deny rules ----------------------------------------------------------


def test_claude_codes_sandbox_on_and_what_keeps_it_from_starting(
    ws: Workspace, path_bin, tmp_path: Path
) -> None:
    found = {"bwrap": "/usr/bin/bwrap", "socat": "/usr/bin/socat"}
    which = found.get
    (checks,) = by_name(doctor.claude_sandbox_checks(ws, which, "linux"), "claude sandbox")
    assert checks.status == doctor.INFO and checks.found.startswith("off (no settings file turns it on)")
    install.install(ws, sandbox=True)
    (checks,) = by_name(doctor.claude_sandbox_checks(ws, which, "linux"), "claude sandbox")
    assert checks.status == doctor.OK and "on in .claude/settings.local.json" in checks.found
    del found["socat"]
    (checks,) = by_name(doctor.claude_sandbox_checks(ws, which, "linux"), "claude sandbox")
    assert checks.status == doctor.FAIL and "socat is not installed" in checks.found
    assert "apt-get install bubblewrap socat" in (checks.fix or "")
    (checks,) = by_name(doctor.claude_sandbox_checks(ws, which, "darwin"), "claude sandbox")
    assert checks.status == doctor.OK  # macOS has what it needs
    settings = ws.claude_dir / "settings.json"  # the team's file says false: the local one wins
    settings.write_text(json.dumps({"sandbox": {"enabled": False}}))
    assert by_name(doctor.claude_sandbox_checks(ws, which, "darwin"), "claude sandbox")[0].status == doctor.OK


def test_commands_that_may_leave_claude_codes_sandbox_are_a_warning(
    ws: Workspace, path_bin, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    settings = ws.claude_dir / "settings.json"
    settings.write_text(json.dumps({"sandbox": {"enabled": True}}))
    (checks,) = by_name(doctor.claude_sandbox_checks(ws, lambda _: "/bin/x", "linux"), "claude sandbox")
    assert checks.status == doctor.WARN and "allowUnsandboxedCommands" in checks.found


def test_missing_deny_rules_are_a_warning_once_hooks_are_installed(ws: Workspace, path_bin) -> None:
    assert by_name(doctor.claude_sandbox_checks(ws), "claude rules") == []  # nothing installed
    install.install(ws)
    assert by_name(doctor.claude_sandbox_checks(ws), "claude rules")[0].status == doctor.OK
    path = ws.claude_dir / "settings.local.json"
    data = json.loads(path.read_text())
    data["permissions"]["deny"].remove("Edit(/.git/config)")
    path.write_text(json.dumps(data))
    (check,) = by_name(doctor.claude_sandbox_checks(ws), "claude rules")
    assert check.status == doctor.WARN and "Edit(/.git/config)" in check.found


@pytest.mark.parametrize(
    ("status", "line", "level"),
    [
        (("bwrap", "bubblewrap 0.8.0"), "on (bubblewrap 0.8.0, network on)", doctor.OK),
        (
            ("off", "off: bwrap is not installed (apt-get install bubblewrap)"),
            "off — bwrap is not installed",
            doctor.WARN,
        ),
    ],
)
def test_loopdecks_own_sandbox_is_reported(
    ws: Workspace, path_bin, monkeypatch: pytest.MonkeyPatch, status: tuple[str, str], line: str, level: str
) -> None:
    from loop.processes import sandbox

    monkeypatch.delenv(sandbox.ENV_MODE, raising=False)
    monkeypatch.setattr(sandbox, "detect", lambda mode: sandbox.Status(*status))
    (check,) = by_name(doctor.report(ws), "sandbox")
    assert check.status == level and check.found.startswith(line), check.found
    monkeypatch.setenv(sandbox.ENV_MODE, "off")
    (check,) = by_name(doctor.report(ws), "sandbox")
    assert check.status == doctor.INFO and check.found.startswith("off — turned off (LOOPDECK_SANDBOX)")


def test_as_root_both_sandboxes_on_is_a_warning(
    ws: Workspace, path_bin, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Measured: as root, the bubblewrap Claude Code starts per command cannot start inside
    loopdeck's (its uid map is refused), so every command of a `run` agent fails."""
    from loop.processes import sandbox

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv(sandbox.ENV_MODE, raising=False)
    monkeypatch.setattr(sandbox, "detect", lambda mode: sandbox.Status("bwrap", "bubblewrap 0.8.0"))
    monkeypatch.setattr("os.geteuid", lambda: 0)
    assert by_name(doctor.report(ws), "sandbox")[0].status == doctor.OK
    install.install(ws, sandbox=True)
    (check,) = by_name(doctor.report(ws), "sandbox")
    assert check.status == doctor.WARN and "uid map" in check.found
