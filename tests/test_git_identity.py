"""Git on a machine that has no identity, and loopdeck's own files in what git shows a person."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from loop.demo import workspace
from loop.drivers import resume
from loop.repo import gitstate
from loop.store.journal import Journal
from loop.store.paths import Workspace
from tests.conftest import run_loopdeck


def no_identity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A machine whose git knows nobody: no global or system config, nothing in the
    environment. The environment a child process gets, for tests that start one."""
    home = tmp_path / "empty-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / "no-gitconfig"))
    for key in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "EMAIL"):
        monkeypatch.delenv(key, raising=False)
    import os

    return dict(os.environ)


def test_a_commit_without_an_identity_is_made_as_loopdeck(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = workspace.create(tmp_path / "repo", tasks=2)
    no_identity(tmp_path, monkeypatch)
    assert gitstate.missing_identity(root)
    (root / "work.txt").write_text("done\n")
    sha = gitstate.commit(root, "loopdeck: iteration 1")
    assert sha is not None
    who = subprocess.run(
        ["git", "log", "-1", "--format=%an <%ae>|%cn <%ce>"], cwd=root, capture_output=True, text=True
    )
    assert who.stdout.strip() == "loopdeck <loopdeck@localhost>|loopdeck <loopdeck@localhost>"


def test_a_repositorys_own_identity_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = workspace.create(tmp_path / "repo", tasks=2)
    no_identity(tmp_path, monkeypatch)
    subprocess.run(["git", "config", "user.name", "Ada"], cwd=root, check=True)
    subprocess.run(["git", "config", "user.email", "ada@example.invalid"], cwd=root, check=True)
    assert not gitstate.missing_identity(root)
    (root / "work.txt").write_text("done\n")
    gitstate.commit(root, "m")
    who = subprocess.run(["git", "log", "-1", "--format=%an"], cwd=root, capture_output=True, text=True)
    assert who.stdout.strip() == "Ada"


def test_run_commit_without_an_identity_says_how_to_set_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = workspace.create(tmp_path / "repo", tasks=2)
    env = no_identity(tmp_path, monkeypatch)
    done = run_loopdeck(
        *["-C", str(root), "run", "Build the demo", "--agent", workspace.agent_command()],
        *["--task-file", "TODO.md", "--no-github", "--no-tasks", "--headless", "--commit"],
        cwd=root,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    events = Journal(Workspace(root).journal).tail(10_000).events
    said = [e for e in events if e.kind == "warning" and "no identity" in str(e.data.get("message"))]
    assert len(said) == 1, [e.data for e in said]
    assert "git config --global user.name" in str(said[0].data["message"])
    assert not [e for e in events if e.kind == "warning" and "commit failed" in str(e.data.get("message"))]
    commits = [e for e in events if e.kind == "commit"]
    assert len(commits) >= 2
    authors = subprocess.run(["git", "log", "--format=%an", "-2"], cwd=root, capture_output=True, text=True)
    assert set(authors.stdout.split()) == {"loopdeck"}


def test_what_resume_lists_leaves_out_loopdecks_own_files(tmp_path: Path) -> None:
    """Installed hooks, slash commands, backups, a loop in a subfolder of the repository: none
    of it is the person's uncommitted work."""
    root = workspace.create(tmp_path / "repo", tasks=2)
    sub = root / "service"
    sub.mkdir()
    for folder in (root, sub):
        done = run_loopdeck("-C", str(folder), "install", cwd=folder)
        assert done.returncode == 0, done.stderr
        (folder / ".claude" / "settings.json.bak-20260101T000000000000").write_text("{}")
        started = run_loopdeck("-C", str(folder), "start", "x", "--no-github", "--no-tasks", cwd=folder)
        assert started.returncode == 0, started.stderr
    (root / "work.txt").write_text("mine\n")
    (sub / "app.py").write_text("print()\n")
    for folder in (root, sub):
        changes = resume.uncommitted(Workspace(folder))
        assert changes is not None
        assert sorted(line[3:] for line in changes) == ["service/app.py", "work.txt"], changes
    gitstate.commit(sub, "the work")
    tracked = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True).stdout
    assert ".claude" not in tracked
