from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from loop.cli.install import BLOCK_CAP, MARKER, TODO_TOOLS, deny_rules, install, uninstall
from loop.core.errors import FileProblem
from loop.store.paths import Workspace
from tests.conftest import REPO

EXE = "/opt/tools/bin/loopdeck"
STOP = {"type": "command", "command": f"{EXE} hook stop", "timeout": 600}
PROMPT = {"type": "command", "command": f"{EXE} hook prompt", "timeout": 60}
FAILURE = {
    "type": "command",
    "command": "trap '' TERM HUP INT; "
    f'f=$(mktemp) && cat > "$f" && {{ $(command -v setsid) {EXE} hook stop-failure --input "$f" '
    "</dev/null >/dev/null 2>&1 & }",
    "timeout": 60,
}


def local(ws: Workspace) -> Any:
    return json.loads((ws.claude_dir / "settings.local.json").read_text())


def shared(ws: Workspace) -> Any:
    return json.loads((ws.claude_dir / "settings.json").read_text())


def test_creates_local_settings_and_commands(ws: Workspace) -> None:
    report = install(ws, exe=EXE)
    assert report.changed and report.backup is None
    assert report.settings == ws.claude_dir / "settings.local.json"
    assert not (ws.claude_dir / "settings.json").exists()  # the team's file is not touched
    data = local(ws)
    assert data["hooks"] == {
        "Stop": [{"hooks": [STOP]}],
        "StopFailure": [{"hooks": [FAILURE]}],
        "UserPromptSubmit": [{"hooks": [PROMPT]}],
    }
    assert data["env"] == {BLOCK_CAP: "0", TODO_TOOLS: "1"}
    names = sorted(p.name for p in (ws.claude_dir / "commands").iterdir())
    assert names == ["loop-cancel.md", "loop-pause.md", "loop-status.md", "orchestrator-loop.md"]
    for path in (ws.claude_dir / "commands").iterdir():
        text = path.read_text()
        assert text.startswith("---\ndescription:") and MARKER in text
        assert "```!" not in text and "allowed-tools" not in text  # no shell reads the user's words
        assert EXE not in text  # nothing machine-specific in files a team commits


def test_shared_writes_the_team_file(ws: Workspace) -> None:
    install(ws, exe=EXE, local=False)
    assert shared(ws)["hooks"]["Stop"] == [{"hooks": [STOP]}]
    assert not (ws.claude_dir / "settings.local.json").exists()
    uninstall(ws)
    assert not (ws.claude_dir / "settings.json").exists()  # it held only what install put there


def test_merges_keeps_keys_idempotent_and_backs_up(ws: Workspace) -> None:
    path = ws.claude_dir / "settings.local.json"
    original: dict[str, Any] = {
        "model": "opus",
        "permissions": {"allow": ["Bash(ls:*)"]},
        "env": {"FOO": "1"},
        "hooks": {
            "Stop": [{"hooks": [{"type": "command", "command": "other-tool notify"}]}],
            "PreToolUse": [{"matcher": "Bash", "hooks": []}],
        },
    }
    path.write_text(json.dumps(original))
    first = install(ws, exe=EXE)
    assert first.backup is not None and json.loads(first.backup.read_text()) == original
    data = local(ws)
    assert data["model"] == "opus" and data["permissions"]["allow"] == original["permissions"]["allow"]
    assert data["permissions"]["deny"] == deny_rules(ws)
    assert data["env"] == {"FOO": "1", BLOCK_CAP: "0", TODO_TOOLS: "1"}
    assert data["hooks"]["PreToolUse"] == original["hooks"]["PreToolUse"]
    assert len(data["hooks"]["Stop"]) == 2
    before = path.read_text()
    second = install(ws, exe=EXE)
    assert not second.changed and second.backup is None and second.written == []
    assert path.read_text() == before
    moved = install(ws, exe="/new/place/loopdeck")  # a reinstall updates the path in place
    assert len(local(ws)["hooks"]["Stop"]) == 2
    assert local(ws)["hooks"]["Stop"][1]["hooks"][0]["command"] == "/new/place/loopdeck hook stop"
    assert moved.changed and moved.backup is not None
    uninstall(ws)
    assert local(ws) == original


def test_backups_are_unique_and_the_original_recoverable(ws: Workspace) -> None:
    path = ws.claude_dir / "settings.local.json"
    path.write_text('{"model": "opus"}')
    backups = []
    for n in range(4):  # well within one second: names by the second would collide
        report = install(ws, exe=f"/place{n}/loopdeck")
        assert report.backup is not None
        backups.append(report.backup)
    assert len(set(backups)) == 4 and all(b.exists() for b in backups)
    assert json.loads(backups[0].read_text()) == {"model": "opus"}
    record = json.loads((ws.private_dir / "install.json").read_text())
    assert record["files"]["settings.local.json"]["original"] == str(backups[0])


def test_another_tools_stop_hook_is_never_taken_for_ours(ws: Workspace) -> None:
    path = ws.claude_dir / "settings.local.json"
    theirs = [
        {"type": "command", "command": "/opt/ralph-loop/bin/ralph hook stop"},
        {"type": "command", "command": "python3 scripts/loop_guard.py hook stop"},
        {"type": "command", "command": "/usr/bin/my-loopdeck-wrapper hook stop --loop"},
    ]
    original = {"hooks": {"Stop": [{"hooks": list(theirs)}]}}
    path.write_text(json.dumps(original))
    install(ws, exe=EXE)
    stop = local(ws)["hooks"]["Stop"]
    assert stop[0]["hooks"] == theirs and stop[1] == {"hooks": [STOP]}
    uninstall(ws)
    assert local(ws) == original


def test_uninstall_puts_back_the_users_env(ws: Workspace) -> None:
    path = ws.claude_dir / "settings.local.json"
    original = {"env": {BLOCK_CAP: "20", TODO_TOOLS: "1", "KEEP": "x"}, "hooks": {}}
    path.write_text(json.dumps(original))
    install(ws, exe=EXE)
    assert local(ws)["env"][BLOCK_CAP] == "0"
    install(ws, exe=EXE)  # a second install must not record our own value as the user's
    uninstall(ws)
    assert local(ws) == original  # "20" back, the user's TODO_TOOLS and empty "hooks" left


def test_a_value_changed_after_install_is_the_users(ws: Workspace) -> None:
    install(ws, exe=EXE)
    data = local(ws)
    data["env"][BLOCK_CAP] = "5"
    (ws.claude_dir / "settings.local.json").write_text(json.dumps(data))
    uninstall(ws)
    assert local(ws) == {"env": {BLOCK_CAP: "5"}}


def test_an_old_install_in_the_team_file_moves_to_the_local_one(ws: Workspace) -> None:
    team = {
        "model": "opus",
        "hooks": {
            "Stop": [
                {"hooks": [{"type": "command", "command": "'/old/bin/loopdeck' hook stop", "timeout": 600}]}
            ]
        },
    }
    (ws.claude_dir / "settings.json").write_text(json.dumps(team))
    report = install(ws, exe=EXE)
    assert report.moved_from == ws.claude_dir / "settings.json"
    assert shared(ws) == {"model": "opus", "hooks": {"Stop": []}}  # runs once, from the local file
    assert local(ws)["hooks"]["Stop"] == [{"hooks": [STOP]}]
    assert len(report.backups) == 1 and json.loads(report.backups[0].read_text()) == team


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"hooks": {"Stop": [}', "not valid JSON"),
        ("[1, 2]", "expected an object"),
        ('{"hooks": []}', '"hooks" is a list, expected a dict'),
        ('{"hooks": {"Stop": {}}}', '"hooks.Stop" is a dict, expected a list'),
        ('{"hooks": {"UserPromptSubmit": 3}}', '"hooks.UserPromptSubmit" is a int'),
        ('{"env": "x"}', '"env" is a str'),
    ],
)
def test_refuses_bad_settings_and_writes_nothing(ws: Workspace, text: str, problem: str) -> None:
    path = ws.claude_dir / "settings.local.json"
    path.write_text(text)
    with pytest.raises(FileProblem) as info:
        install(ws, exe=EXE)
    assert problem in str(info.value) and str(path) in str(info.value)
    assert path.read_text() == text
    assert not (ws.claude_dir / "commands").exists() or not list((ws.claude_dir / "commands").iterdir())


def test_invalid_json_names_line(ws: Workspace) -> None:
    (ws.claude_dir / "settings.local.json").write_text('{\n  "a": 1,\n  "b": \n}\n')
    with pytest.raises(FileProblem) as info:
        install(ws, exe=EXE)
    assert info.value.line == 4


def test_will_not_overwrite_someone_elses_command(ws: Workspace) -> None:
    (ws.claude_dir / "commands").mkdir()
    (ws.claude_dir / "commands" / "loop-status.md").write_text("mine")
    with pytest.raises(FileProblem, match="not written by loopdeck"):
        install(ws, exe=EXE)
    assert (ws.claude_dir / "commands" / "loop-status.md").read_text() == "mine"


def test_uninstall_takes_it_all_back(ws: Workspace) -> None:
    path = ws.claude_dir / "settings.local.json"
    original = {"model": "opus", "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "other"}]}]}}
    path.write_text(json.dumps(original))
    install(ws, exe=EXE)
    (ws.claude_dir / "commands" / "mine.md").write_text("keep me")
    report = uninstall(ws)
    assert local(ws) == original
    assert len(report.removed) == 4
    assert [p.name for p in (ws.claude_dir / "commands").iterdir()] == ["mine.md"]
    assert not (ws.private_dir / "install.json").exists()
    assert not uninstall(ws).changed


def test_cli_install(cli, ws: Workspace) -> None:
    ran = cli("install")
    assert ran.code == 0 and "Stop hook" in ran.out
    command = local(ws)["hooks"]["Stop"][0]["hooks"][0]["command"]
    assert command.endswith("/loop/launcher.py stop") and " -I /" in command
    assert command.startswith("/")
    assert local(ws)["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"].endswith("launcher.py prompt")
    assert MARKER in (ws.claude_dir / "commands" / "loop-pause.md").read_text()
    assert cli("install", "--uninstall").code == 0
    assert cli("install", "--shared").code == 0 and "hooks" in shared(ws)
    (ws.claude_dir / "settings.local.json").write_text("{oops")
    ran = cli("install")
    assert ran.code == 1 and "not valid JSON" in ran.err


def test_cli_install_sandbox_says_what_it_turned_on_and_how_hosts_are_allowed(cli, ws: Workspace) -> None:
    ran = cli("install")
    assert ran.code == 0 and "permissions.deny" in ran.out and "install --sandbox" in ran.out
    assert "sandbox" not in local(ws)
    ran = cli("install", "--sandbox")
    assert ran.code == 0 and local(ws)["sandbox"]["enabled"] is True
    assert "sandbox.network.allowedDomains" in ran.out and "refused in `claude -p`" in ran.out


def test_hook_commands_written_are_recognised_as_ours(ws: Workspace, tmp_path: Path) -> None:
    """What `loopdeck_command()` produces (a quoted path, python -m) is found again without the record."""
    from loop.cli.install import _is_ours

    for command in [
        "'/a b/loopdeck' hook stop",
        "/x/.venv/bin/loopdeck hook prompt",
        "/usr/bin/python3 -m loop.cli hook stop",
    ]:
        assert _is_ours({"type": "command", "command": command}, set())
    for command in [
        "/opt/ralph-loop/bin/ralph hook stop",
        "loopdeck hook stop && rm -rf x",
        "/x/loopdeck hook stop; echo",
    ]:
        assert not _is_ours({"type": "command", "command": command}, set())


def test_installs_the_hooks_through_the_isolated_launcher(ws: Workspace) -> None:
    """By default every hook runs this Python on the launcher, isolated (-I: nothing of the
    environment or the project on its import path)."""
    from loop.cli.install import DETACHED, _is_ours

    install(ws)
    runner = shlex.join([sys.executable, "-I", str(REPO / "loop" / "launcher.py")])
    commands = {event: groups[0]["hooks"][0]["command"] for event, groups in local(ws)["hooks"].items()}
    assert commands == {
        "Stop": f"{runner} stop",
        "StopFailure": DETACHED.format(runner=runner, event="stop-failure"),
        "UserPromptSubmit": f"{runner} prompt",
    }
    for command in commands.values():  # found again without the install record
        assert _is_ours({"type": "command", "command": command}, set())


def test_the_stop_failure_line_outlives_the_sigterm_claude_code_ends_its_hooks_with(tmp_path: Path) -> None:
    """`claude -p` exits right after a failed turn and sends its hooks SIGTERM (to the hook's
    process group) tens of milliseconds after starting them: the line still hands the input
    to loopdeck. Here the signal comes while the shell is still reading the input."""
    import os
    import signal
    import subprocess
    import time

    from loop.cli.install import DETACHED

    recorder = tmp_path / "recorder.py"
    recorder.write_text(
        "import sys, pathlib\n"
        "pathlib.Path(sys.argv[4]).write_text(sys.argv[1] + ' ' + pathlib.Path(sys.argv[3]).read_text())\n"
    )
    seen = tmp_path / "seen"
    runner = shlex.join([sys.executable, str(recorder)])
    line = DETACHED.format(runner=runner, event="stop-failure").replace(
        '--input "$f"', f'--input "$f" {seen}'
    )
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    hook = subprocess.Popen(
        ["sh", "-c", line],
        stdin=subprocess.PIPE,
        env={**os.environ, "TMPDIR": str(tmp)},
        start_new_session=True,  # as Claude Code starts a hook: a process group of its own
    )
    assert hook.stdin is not None
    hook.stdin.write(b'{"error": {"message": "limit"}}')
    hook.stdin.flush()
    deadline = time.monotonic() + 30
    while not any(tmp.iterdir()):  # mktemp ran: the shell is past its first statement, in `cat`
        assert time.monotonic() < deadline and hook.poll() is None
        time.sleep(0.01)
    os.killpg(hook.pid, signal.SIGTERM)
    hook.stdin.close()
    hook.wait(timeout=30)
    while not seen.exists() or not seen.read_text():
        assert time.monotonic() < deadline, "the recorder never ran"
        time.sleep(0.01)
    assert seen.read_text() == 'stop-failure {"error": {"message": "limit"}}'


def test_launcher_install_round_trip_and_an_older_install_is_upgraded_in_place(ws: Workspace) -> None:
    path = ws.claude_dir / "settings.local.json"
    path.write_text(json.dumps({"model": "opus"}))
    install(ws, exe=EXE)  # what an older loopdeck wrote
    install(ws)
    hooks = local(ws)["hooks"]
    for event in ("Stop", "StopFailure", "UserPromptSubmit"):
        (only,) = [h["command"] for group in hooks[event] for h in group["hooks"]]
        assert " -I " in only and f"{EXE} hook" not in only
    uninstall(ws)
    assert local(ws) == {"model": "opus"}
    install(ws)
    (ws.claude_dir / "loopdeck" / "install.json").unlink()  # the record lost: the shape still says ours
    uninstall(ws)
    assert all(groups == [] for groups in local(ws)["hooks"].values())


def test_launcher_commands_are_recognised_by_their_exact_shape() -> None:
    from loop.cli.install import _is_ours

    for command in [
        "/x/.venv/bin/python -I -S /x/site-packages/loop/launcher.py stop",
        "'/a b/python3' -I -S '/a b/loop/launcher.py' prompt",
        'f=$(mktemp) && cat > "$f" && { /p/python -I -S /s/loop/launcher.py stop-failure --input "$f" '
        "</dev/null >/dev/null 2>&1 & }",  # as older installs wrote it
        'f=$(mktemp) && cat > "$f" && { $(command -v setsid) /p/python -I -S /s/loop/launcher.py stop-failure '
        '--input "$f" </dev/null >/dev/null 2>&1 & }',
        "trap '' TERM HUP INT; "
        'f=$(mktemp) && cat > "$f" && { $(command -v setsid) /p/python -I -S /s/loop/launcher.py stop-failure '
        '--input "$f" </dev/null >/dev/null 2>&1 & }',
    ]:
        assert _is_ours({"type": "command", "command": command}, set()), command
    for command in [
        "/usr/bin/python3 -I -S /x/other/launcher.py stop",
        "/usr/bin/python3 -I -S /x/loop/launcher.py stop; rm -rf x",
        "/usr/bin/python3 /x/loop/launcher.py stop",
        "/usr/bin/python3 -I -S /x/loop/launcher.py hook stop",
    ]:
        assert not _is_ours({"type": "command", "command": command}, set()), command


# --- hostile settings and folders ------------------------------------------------------------


def test_a_lone_surrogate_in_the_settings_is_kept_as_it_was(ws: Workspace) -> None:
    path = ws.claude_dir / "settings.local.json"
    path.write_text('{"note": "a\\ud800b", "model": "caf\u00e9"}')
    install(ws, exe=EXE)
    text = path.read_text(encoding="utf-8")
    assert '"a\\ud800b"' in text and "caf\u00e9" in text  # the escape written back, the rest as text
    assert local(ws)["note"] == "a\ud800b"
    uninstall(ws)
    assert local(ws) == {"note": "a\ud800b", "model": "caf\u00e9"}


@pytest.mark.parametrize(
    "text",
    ['{"hooks": {"Stop": []}, "hooks": {"Other": []}}', '{"hooks": {"Stop": [], "Stop": []}}'],
)
def test_duplicate_keys_are_refused_not_dropped(ws: Workspace, text: str) -> None:
    path = ws.claude_dir / "settings.local.json"
    path.write_text(text)
    with pytest.raises(FileProblem, match="appears twice in one object") as info:
        install(ws, exe=EXE)
    assert str(path) in str(info.value)
    assert path.read_text() == text
    assert not (ws.claude_dir / "commands").exists() and not ws.private_dir.exists()


@pytest.mark.parametrize("which", ["private", "settings", "command", "commands"])
def test_install_refuses_symlinks_before_writing_anything(ws: Workspace, tmp_path: Path, which: str) -> None:
    from loop.store.safeopen import UnsafePath

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "settings.json").write_text("{}")
    link = {
        "private": ws.private_dir,
        "settings": ws.claude_dir / "settings.local.json",
        "command": ws.claude_dir / "commands" / "loop-status.md",
        "commands": ws.claude_dir / "commands",
    }[which]
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(elsewhere / "settings.json" if which in ("settings", "command") else elsewhere)
    with pytest.raises(UnsafePath):
        install(ws, exe=EXE)
    assert sorted(p.name for p in elsewhere.iterdir()) == ["settings.json"]
    assert (elsewhere / "settings.json").read_text() == "{}"
    assert which == "settings" or not (ws.claude_dir / "settings.local.json").exists()


def test_a_fifo_for_a_command_file_is_an_error_not_a_hang(ws: Workspace) -> None:
    import os
    import threading

    fifo = ws.claude_dir / "commands" / "loop-status.md"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    raised: list[BaseException] = []

    def run() -> None:
        try:
            install(ws, exe=EXE)
        except BaseException as exc:
            raised.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=30)
    if worker.is_alive():  # blocked reading the FIFO: give it its end of file, then fail
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(timeout=30)
        pytest.fail("install blocked on a FIFO in place of a command file")
    assert len(raised) == 1 and isinstance(raised[0], OSError) and "FIFO" in str(raised[0])
    assert not (ws.claude_dir / "settings.local.json").exists()


def test_a_backup_cut_short_leaves_no_half_copy(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno
    import os
    import shutil

    path = ws.claude_dir / "settings.local.json"
    path.write_text('{"model": "opus"}')

    def full(src: Any, dst: Any, *args: Any) -> None:
        dst.write(src.read(3))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(shutil, "copyfileobj", full)
    with pytest.raises(OSError):
        install(ws, exe=EXE)
    assert sorted(p.name for p in ws.claude_dir.iterdir() if p.is_file()) == ["settings.local.json"]
    assert path.read_text() == '{"model": "opus"}'


def test_install_compiles_loopdecks_modules_for_the_hook(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Stop hook's interpreter finds bytecode from the install on, not from its first turn."""
    from loop.cli import install as install_module

    compiled: list[Path | None] = []

    def precompile(package: Path | None = None) -> bool:
        compiled.append(package)
        return True

    monkeypatch.setattr(install_module, "precompile", precompile)
    install(ws)
    assert compiled == [None]


def test_precompile_writes_the_bytecode_the_isolated_interpreter_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    from loop.cli.install import precompile

    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "a.py").write_text("X = 1\n")
    (package / "sub" / "b.py").write_text("Y = 2\n")
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "elsewhere"))  # the hook runs with -I
    assert precompile(package)
    assert sys.pycache_prefix == str(tmp_path / "elsewhere")
    for source in (package / "a.py", package / "sub" / "b.py"):
        cached = source.parent / "__pycache__" / Path(importlib.util.cache_from_source(str(source))).name
        assert cached.is_file(), cached
    (package / "broken.py").write_text("def (\n")  # one that does not compile: said, never raised
    assert not precompile(package)


# --- what the agent may not change ------------------------------------------------------------


def test_deny_rules_name_loopdecks_files_by_project_root_and_home(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    trust = tmp_path / "elsewhere" / "trust"
    trust.mkdir(parents=True, mode=0o700)
    monkeypatch.setenv("LOOPDECK_TRUST_HOME", str(trust))
    rules = deny_rules(ws)
    assert "Edit(/.claude/orchestrator-loop.*)" in rules and "Edit(/.git/config)" in rules
    assert "Edit(/.git/hooks/**)" in rules and "Edit(/.loopdeck.toml)" in rules
    assert "Edit(~/.config/loopdeck/**)" in rules  # under the home folder: the same for the person anywhere
    assert f"Edit(/{tmp_path}/elsewhere/trust/**)" in rules  # `//` and the absolute path
    assert all(r.startswith("Edit(") and "(." not in r for r in rules)  # never relative to the current folder


def test_deny_rules_merge_once_and_uninstall_keeps_the_persons_own(ws: Workspace) -> None:
    path = ws.claude_dir / "settings.local.json"
    mine = "Edit(/.git/config)"  # the person's own, the same as one of ours
    original = {"permissions": {"deny": ["Bash(rm:*)", mine], "defaultMode": "acceptEdits"}}
    path.write_text(json.dumps(original))
    install(ws, exe=EXE)
    deny = local(ws)["permissions"]["deny"]
    assert deny[:2] == ["Bash(rm:*)", mine] and deny.count(mine) == 1
    assert set(deny_rules(ws)) <= set(deny)
    before = path.read_text()
    assert not install(ws, exe=EXE).changed and path.read_text() == before
    uninstall(ws)
    assert local(ws) == original


def test_sandbox_turns_claude_codes_sandbox_on_and_uninstall_puts_back_the_persons_values(
    ws: Workspace,
) -> None:
    path = ws.claude_dir / "settings.local.json"
    original = {
        "sandbox": {"enabled": False, "network": {"allowedDomains": ["pypi.org"]}},
        "permissions": {"allow": ["Bash(ls:*)"]},
    }
    path.write_text(json.dumps(original))
    report = install(ws, exe=EXE, sandbox=True)
    assert report.sandbox
    box = local(ws)["sandbox"]
    assert box["enabled"] is True and box["autoAllowBashIfSandboxed"] is True
    assert box["allowUnsandboxedCommands"] is False  # dangerouslyDisableSandbox is ignored
    assert box["network"] == {"allowedDomains": ["pypi.org"]}
    written = box["filesystem"]["denyWrite"]
    assert ".claude/orchestrator-loop.control.jsonl" in written and ".git/config" in written
    assert ".git/hooks" in written and ".claude/loopdeck" in written
    assert not any("*" in p for p in written)  # exact paths: a glob may be ignored on Linux
    assert box["filesystem"]["denyRead"] and set(box["filesystem"]["denyRead"]) <= set(written)
    before = path.read_text()
    assert not install(ws, exe=EXE).changed and path.read_text() == before  # kept by a plain install
    uninstall(ws)
    assert local(ws) == original


def test_a_settings_shape_install_cannot_merge_into_is_refused_before_any_write(ws: Workspace) -> None:
    path = ws.claude_dir / "settings.local.json"
    path.write_text(json.dumps({"sandbox": {"filesystem": {"denyWrite": "x"}}}))
    with pytest.raises(
        FileProblem, match=re.escape('"sandbox.filesystem.denyWrite" is a str, expected a list')
    ):
        install(ws, exe=EXE, sandbox=True)
    assert json.loads(path.read_text()) == {"sandbox": {"filesystem": {"denyWrite": "x"}}}
    assert not (ws.private_dir / "install.json").exists()
    path.write_text(json.dumps({"permissions": ["Edit"]}))
    with pytest.raises(FileProblem, match='"permissions" is a list, expected a dict'):
        install(ws, exe=EXE)
