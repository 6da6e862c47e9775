"""`loopdeck install` leaves nothing of its own for git to list, says what the hooks run, and
`--uninstall` leaves the project as it found it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from loop.cli import install
from loop.store.paths import Workspace


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if ".git" not in p.parts)


def test_a_fresh_project_is_left_as_it_was_found(tmp_path: Path, cli, ws: Workspace) -> None:
    root = ws.root
    ws.claude_dir.rmdir()  # nothing of Claude Code's yet
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    ran = cli("install")
    assert ran.code == 0, ran.err
    assert (ws.private_dir / ".gitignore").read_text().endswith("*\n")
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=root, capture_output=True, text=True
    ).stdout
    assert ".claude/loopdeck" not in status  # ignored by its own .gitignore
    ran = cli("install", "--uninstall")
    assert ran.code == 0, ran.err
    assert tree(root) == []  # no `{}`, no backup, no empty folders


def test_what_was_there_before_stays(cli, ws: Workspace) -> None:
    settings = ws.claude_dir / "settings.local.json"
    settings.write_text(json.dumps({"permissions": {"allow": ["Bash(ls)"]}}))
    mine = ws.claude_dir / "commands" / "mine.md"
    mine.parent.mkdir()
    mine.write_text("my command\n")
    assert cli("install").code == 0
    assert cli("install", "--uninstall").code == 0
    assert json.loads(settings.read_text()) == {"permissions": {"allow": ["Bash(ls)"]}}
    assert mine.read_text() == "my command\n"
    assert not (ws.private_dir / "install.json").exists()
    backups = sorted(p.name for p in ws.claude_dir.glob("settings.local.json.bak-*"))
    assert backups  # the person's settings as they were before install, kept


def test_a_private_folder_holding_a_loops_files_stays(cli, ws: Workspace) -> None:
    assert cli("install").code == 0
    assert cli("start", "x", "--no-github", "--no-tasks").code == 0
    (ws.private_dir / "runner.log").write_text("a run\n")
    assert cli("install", "--uninstall").code == 0
    assert (ws.private_dir / "runner.log").exists() and ws.state.exists()


def test_install_says_what_the_hooks_run_and_what_to_do_when_it_moves(cli, ws: Workspace) -> None:
    ran = cli("install")
    assert ran.code == 0
    assert f"loopdeck: the hooks run {install.hook_runner()}" in ran.out
    assert "run `loopdeck install` here again" in ran.out and "loopdeck doctor" in ran.out
    kind, folder = install.where_installed()
    assert kind == "clone"  # the suite runs from a checkout
    assert f"development clone ({folder})" in ran.err and "pipx install" in ran.err
