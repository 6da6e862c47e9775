"""Git as loopdeck reads it: the runner's fingerprint, the monitor's picture (through GitPython),
commits; the fewest processes per look, and no program of the repository run."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import git.cmd
import pytest

from loop.demo import workspace
from loop.repo import gitread, gitstate, worktrees


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[Path]:
    gitread.forget()
    yield workspace.create(tmp_path / "repo", tasks=3)
    gitread.forget()


class Spawned:
    """Counts the git processes loopdeck starts (every one is a `subprocess.Popen`, through
    `subprocess.run`, started to be read later, or by GitPython)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.commands: list[list[str]] = []
        commands = self.commands

        class Popen(subprocess.Popen):  # type: ignore[type-arg]
            def __init__(self, argv: list[str], *args: Any, **kwargs: Any) -> None:
                commands.append([str(a) for a in argv])
                super().__init__(argv, *args, **kwargs)

        monkeypatch.setattr(subprocess, "Popen", Popen)
        monkeypatch.setattr(git.cmd, "safer_popen", Popen)

    @property
    def verbs(self) -> list[str]:
        """Each command's verb (`status`, `log`…), past git's `-c` options."""
        found = []
        for argv in self.commands:
            rest = argv[1:]
            while rest and rest[0] == "-c":
                rest = rest[2:]
            found.append(rest[0])
        return found


def test_one_git_process_per_fingerprint(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner fingerprints every iteration: each look is one `git status`, nothing else
    (the working tree is found once)."""
    gitstate.fingerprint(repo)
    spawned = Spawned(monkeypatch)
    for _ in range(3):
        assert gitstate.fingerprint(repo) is not None
    assert spawned.verbs == ["status"] * 3


def test_git_is_found_on_path_once_not_by_every_exec(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exec of a bare `git` tries every folder of PATH before the one that has it, at every
    look: the looks run the git the exec would have found, by its full name."""
    import shutil

    real = shutil.which("git")
    assert real is not None
    empty = [tmp_path / f"shims-{n}" for n in range(4)]
    for folder in empty:
        folder.mkdir()
    monkeypatch.setenv("PATH", os.pathsep.join([*map(str, empty), os.path.dirname(real)]))
    spawned = Spawned(monkeypatch)
    assert gitstate.fingerprint(repo) is not None
    gitread.status(repo)
    assert "diff" in spawned.verbs and all(argv[0] == real for argv in spawned.commands)
    # A git put in a folder earlier on PATH is the one the exec would now find: found again.
    shim = empty[1] / "git"
    shim.symlink_to(real)
    monkeypatch.setenv("PATH", os.pathsep.join([*map(str, empty), os.path.dirname(real), ""]))
    assert gitstate.git_program() == str(shim)
    # A relative folder before git's is relative to where git runs: left to the exec.
    monkeypatch.setenv("PATH", os.pathsep.join(["bin", os.path.dirname(real)]))
    assert gitstate.git_program() == "git"
    monkeypatch.setenv("PATH", str(empty[0]))
    assert gitstate.git_program() == "git"


def test_fingerprint_sees_every_kind_of_progress(repo: Path) -> None:
    todo = repo / "TODO.md"
    seen = {gitstate.fingerprint(repo)}
    assert gitstate.fingerprint(repo) in seen  # nothing changed: same digest
    todo.write_text(todo.read_text().replace("[ ]", "[x]", 1))
    seen.add(gitstate.fingerprint(repo))
    todo.write_text(todo.read_text() + "- [ ] one more, same file again\n")  # already modified
    seen.add(gitstate.fingerprint(repo))
    subprocess.run(["git", "add", "TODO.md"], cwd=repo, check=True)
    seen.add(gitstate.fingerprint(repo))
    (repo / "new.txt").write_text("x")
    seen.add(gitstate.fingerprint(repo))
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    identity = ["-c", "user.name=loopdeck tests", "-c", "user.email=tests@loopdeck.invalid"]
    subprocess.run(["git", *identity, "commit", "-qm", "work"], cwd=repo, check=True)
    seen.add(gitstate.fingerprint(repo))
    assert len(seen) == 6 and None not in seen
    before = gitstate.fingerprint(repo)
    (repo / ".claude").mkdir(exist_ok=True)
    (repo / ".claude" / "orchestrator-loop.events.jsonl").write_text("{}\n")
    assert gitstate.fingerprint(repo) == before  # loopdeck's own files are not the work


def test_not_a_repo_and_a_bounded_cache(tmp_path: Path) -> None:
    gitread.forget()
    assert gitstate.fingerprint(tmp_path) is None
    roots = [workspace.create(tmp_path / f"r{i}", tasks=1) for i in range(3)]
    for root in roots:
        assert gitstate.fingerprint(root) is not None
    assert len(gitstate._tops) == len(roots)
    gitread.forget()
    assert not gitstate._tops


def test_changed_paths_of_porcelain_v2() -> None:
    out = "\0".join(
        [
            "# branch.oid abc",
            "# branch.head main",
            "1 .M N... 100644 100644 100644 aaa aaa src/a b.py",
            "2 R. N... 100644 100644 100644 aaa aaa R100 new name.py",
            "old name.py",
            "u UU N... 100644 100644 100644 100644 a b c both.py",
            "? untracked file.txt",
            "",
        ]
    )
    assert gitstate._changed_paths(out) == ["src/a b.py", "new name.py", "both.py", "untracked file.txt"]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def test_the_monitors_look_is_three_processes_and_a_log_only_when_head_moves(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gitread.status(repo)
    spawned = Spawned(monkeypatch)
    (repo / "check.py").write_text("changed\n")
    (repo / "new file.txt").write_text("x")
    (repo / ".claude" / "loopdeck").mkdir(parents=True)
    (repo / ".claude" / "loopdeck" / "runner.log").write_text("ours")
    seen = gitread.status(repo)
    # the index against HEAD, the working tree against the index, the untracked files; HEAD did
    # not move: the commits are known
    # (GitPython's `cat-file` reads `.gitmodules` for each change it lists)
    assert sorted(set(spawned.verbs) - {"cat-file"}) == ["diff", "status"]
    assert spawned.verbs.count("diff") == 2 and spawned.verbs.count("status") == 1
    assert (seen.branch, seen.staged, seen.modified, seen.untracked) == ("main", 0, 1, 1)
    assert set(seen.changes) == {" M check.py", "?? new file.txt"}
    assert seen.head == _git(repo, "rev-parse", "HEAD")[:8]
    assert [c.summary for c in seen.commits] == ["demo: start"]
    _git(repo, "add", "check.py")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "second: it works")
    spawned.commands.clear()
    seen = gitread.status(repo)
    assert sorted(set(spawned.verbs) - {"cat-file"}) == ["diff", "rev-list", "status"]
    assert [c.summary for c in seen.commits] == ["second: it works", "demo: start"]
    assert seen.commits[0].when[:4].isdigit() and seen.commits[0].sha == seen.head


def test_the_monitors_look_at_a_rename_a_detached_head_and_an_upstream(repo: Path, tmp_path: Path) -> None:
    _git(repo, "mv", "check.py", "renamed.py")
    seen = gitread.status(repo)
    assert seen.changes == ("R  check.py -> renamed.py",) and seen.staged == 1
    _git(repo, "checkout", "-q", "--detach")
    assert gitread.status(repo).branch is None
    _git(repo, "checkout", "-q", "main")
    remote = tmp_path / "remote.git"
    _git(tmp_path, "clone", "-q", "--bare", str(repo), str(remote))
    _git(repo, "remote", "add", "origin", str(remote))
    _git(repo, "fetch", "-q", "origin")
    _git(repo, "branch", "-q", "--set-upstream-to=origin/main")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "ahead by one")
    seen = gitread.status(repo)
    assert (seen.ahead, seen.behind) == (1, 0)


def test_the_monitors_look_outside_git(tmp_path: Path) -> None:
    assert gitread.status(tmp_path).error == "not a git repository"
    empty = tmp_path / "empty"
    empty.mkdir()
    _git(empty, "init", "-q")
    (empty / "a.txt").write_text("a")
    seen = gitread.status(empty)
    assert (seen.head, seen.commits, seen.untracked, seen.error) == (None, (), 1, None)


def test_a_commit_runs_none_of_the_repositorys_hooks(repo: Path) -> None:
    """The repository's hooks are its code: loopdeck's commits do not run them."""
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text(f"#!/bin/sh\ntouch {repo / 'hook-ran'}\nexit 1\n")
    hook.chmod(0o755)
    (repo / "work.txt").write_text("done")
    sha = gitstate.commit(repo, "loopdeck: iteration 1")
    assert sha is not None and sha == _git(repo, "rev-parse", "HEAD").strip()
    assert not (repo / "hook-ran").exists()
    assert _git(repo, "log", "-1", "--format=%s").strip() == "loopdeck: iteration 1"
    assert gitstate.commit(repo, "nothing new") is None


def test_a_commit_with_nobody_configured_names_loopdeck(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "empty-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.delenv(name, raising=False)
    _git(repo, "config", "--unset-all", "user.name") if _has(repo, "user.name") else None
    (repo / "work.txt").write_text("done")
    assert gitstate.commit(repo, "loopdeck: iteration 1") is not None
    assert _git(repo, "log", "-1", "--format=%an <%ae>").strip() == "loopdeck <loopdeck@localhost>"


def _has(repo: Path, key: str) -> bool:
    return subprocess.run(["git", "config", key], cwd=repo, capture_output=True).returncode == 0


def test_what_git_said_is_remembered_within_bounds(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The working trees found and the logs read are kept to ask git less, never without end
    (a monitor runs for days; the fleet looks at many repositories)."""
    monkeypatch.setattr(gitstate, "TOPS_KEPT", 4)
    monkeypatch.setattr(gitread, "LOGS_KEPT", 3)
    for n in range(10):
        folder = repo / f"sub{n}"
        folder.mkdir()
        assert gitstate.toplevel(folder) == repo.resolve()
        assert len(gitstate._tops) <= 4
    for count in range(1, 8):
        assert gitread.status(repo, commits=count).error is None
        assert len(gitread._logs) <= 3


def test_a_merge_stopped_on_a_conflict_is_shown_as_git_status_shows_it(repo: Path) -> None:
    ident = ("-c", "user.name=t", "-c", "user.email=t@t")
    _git(repo, "checkout", "-qb", "other")
    (repo / "check.py").write_text("theirs\n")
    _git(repo, *ident, "commit", "-qam", "theirs")
    _git(repo, "checkout", "-q", "main")
    (repo / "check.py").write_text("ours\n")
    _git(repo, *ident, "commit", "-qam", "ours")
    assert subprocess.run(["git", *ident, "merge", "-q", "other"], cwd=repo, capture_output=True).returncode
    seen = gitread.status(repo)
    assert seen.changes == ("UU check.py",) and (seen.staged, seen.modified) == (1, 1)
    assert worktrees.unresolved(repo) == ["check.py"]


def test_reading_git_runs_no_program_of_the_repository(repo: Path, tmp_path: Path) -> None:
    """The repository is someone else's: an fsmonitor, an external diff and a textconv driver it
    names are not run by the monitor's look, the log or the worktree views (GitPython's `git`
    gets loopdeck's overrides through `GIT_CONFIG_*`)."""
    marker = tmp_path / "RAN"
    script = tmp_path / "trap.sh"
    script.write_text(f'#!/bin/sh\necho "$0 $*" >> {marker}\nexit 1\n')
    script.chmod(0o755)
    _git(repo, "config", "core.fsmonitor", str(script))
    _git(repo, "config", "diff.external", str(script))
    _git(repo, "config", "diff.trap.textconv", str(script))
    (repo / ".gitattributes").write_text("* diff=trap\n")
    ident = ("-c", "core.fsmonitor=false", "-c", "user.name=t", "-c", "user.email=t@t")
    _git(repo, *ident, "add", "-A")
    _git(repo, *ident, "commit", "-qm", "attributes")
    wt = worktrees.ensure(repo, "L", "t1", "main")
    (wt.path / "b.txt").write_text("b\n")
    worktrees.commit_all(wt, "task")
    (repo / "check.py").write_text("changed\n")
    marker.unlink(missing_ok=True)
    seen = gitread.status(repo)
    assert (seen.modified, seen.commits[0].summary) == (1, "attributes")
    assert worktrees.changed_files(wt, "main") == ["b.txt"]
    assert worktrees.branches(repo, "L") == [wt.branch] and not worktrees.merged(repo, wt.branch)
    assert worktrees.unresolved(repo) == [] and worktrees.current_branch(repo) == "main"
    assert worktrees.leftovers(repo, "L") == [wt.path]
    assert not marker.exists(), marker.read_text()
