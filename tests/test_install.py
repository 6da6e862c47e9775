from __future__ import annotations

import json
from typing import Any

import pytest

from loop.errors import FileProblem
from loop.install import BLOCK_CAP, MARKER, install, uninstall
from loop.paths import Workspace

EXE = "/opt/tools/bin/loopdeck"


def settings(ws: Workspace) -> Any:
    return json.loads((ws.claude_dir / "settings.json").read_text())


def test_creates_settings_and_commands(ws: Workspace) -> None:
    report = install(ws, exe=EXE)
    assert report.changed and report.backup is None
    data = settings(ws)
    assert data["hooks"]["Stop"] == [
        {"hooks": [{"type": "command", "command": f"{EXE} hook stop", "timeout": 600}]}
    ]
    assert data["env"] == {BLOCK_CAP: "0"}
    names = sorted(p.name for p in (ws.claude_dir / "commands").iterdir())
    assert names == ["loop-cancel.md", "loop-pause.md", "loop-status.md", "orchestrator-loop.md"]
    start = (ws.claude_dir / "commands" / "orchestrator-loop.md").read_text()
    assert f"{EXE} start $ARGUMENTS" in start and start.startswith("---\ndescription:")
    assert "```!" in start


def test_merges_keeps_keys_idempotent_and_backs_up(ws: Workspace) -> None:
    path = ws.claude_dir / "settings.json"
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
    data = settings(ws)
    assert data["model"] == "opus" and data["permissions"] == original["permissions"]
    assert data["env"] == {"FOO": "1", BLOCK_CAP: "0"}
    assert data["hooks"]["PreToolUse"] == original["hooks"]["PreToolUse"]
    assert len(data["hooks"]["Stop"]) == 2
    before = path.read_text()
    second = install(ws, exe=EXE)
    assert not second.changed and second.backup is None and second.written == []
    assert path.read_text() == before
    moved = install(ws, exe="/new/place/loopdeck")  # a reinstall updates the path in place
    assert len(settings(ws)["hooks"]["Stop"]) == 2
    assert settings(ws)["hooks"]["Stop"][1]["hooks"][0]["command"] == "/new/place/loopdeck hook stop"
    assert moved.changed


def test_keep_block_cap_and_local(ws: Workspace) -> None:
    install(ws, exe=EXE, keep_block_cap=True, local=True)
    data = json.loads((ws.claude_dir / "settings.local.json").read_text())
    assert "env" not in data
    assert not (ws.claude_dir / "settings.json").exists()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"hooks": {"Stop": [}', "not valid JSON"),
        ("[1, 2]", "expected an object"),
        ('{"hooks": []}', '"hooks" is a list, expected a dict'),
        ('{"hooks": {"Stop": {}}}', '"hooks.Stop" is a dict, expected a list'),
        ('{"env": "x"}', '"env" is a str'),
    ],
)
def test_refuses_bad_settings_and_writes_nothing(ws: Workspace, text: str, problem: str) -> None:
    path = ws.claude_dir / "settings.json"
    path.write_text(text)
    with pytest.raises(FileProblem) as info:
        install(ws, exe=EXE)
    assert problem in str(info.value) and str(path) in str(info.value)
    assert path.read_text() == text
    assert not (ws.claude_dir / "commands").exists() or not list((ws.claude_dir / "commands").iterdir())


def test_invalid_json_names_line(ws: Workspace) -> None:
    (ws.claude_dir / "settings.json").write_text('{\n  "a": 1,\n  "b": \n}\n')
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
    path = ws.claude_dir / "settings.json"
    original = {"model": "opus", "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "other"}]}]}}
    path.write_text(json.dumps(original))
    install(ws, exe=EXE)
    (ws.claude_dir / "commands" / "mine.md").write_text("keep me")
    report = uninstall(ws)
    assert settings(ws) == original
    assert len(report.removed) == 4
    assert [p.name for p in (ws.claude_dir / "commands").iterdir()] == ["mine.md"]
    assert not uninstall(ws).changed


def test_cli_install(cli, ws: Workspace) -> None:
    ran = cli("install")
    assert ran.code == 0 and "Stop hook" in ran.out
    command = settings(ws)["hooks"]["Stop"][0]["hooks"][0]["command"]
    assert command.endswith(" hook stop") and ("/" in command.split()[0])
    assert MARKER in (ws.claude_dir / "commands" / "loop-pause.md").read_text()
    assert cli("install", "--uninstall").code == 0
    (ws.claude_dir / "settings.json").write_text("{oops")
    ran = cli("install")
    assert ran.code == 1 and "not valid JSON" in ran.err
