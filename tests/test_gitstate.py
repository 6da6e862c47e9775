"""The runner's git fingerprint: one process per look, one `Repo` per workspace."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import git
import pytest

from loop.demo import workspace
from loop.repo import gitstate


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[Path]:
    gitstate.forget_repos()
    yield workspace.create(tmp_path / "repo", tasks=3)
    gitstate.forget_repos()


class Spawned:
    """Counts the git commands GitPython runs (every one goes through `Git.execute`, the
    persistent `cat-file` helpers included) and the `Repo`s it opens."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.commands: list[list[str]] = []
        self.repos = 0
        real_execute = git.cmd.Git.execute
        real_init = git.Repo.__init__

        def execute(cmd: git.cmd.Git, command: object, *args: object, **kwargs: object) -> object:
            self.commands.append(
                [str(c) for c in command] if isinstance(command, list | tuple) else [str(command)]
            )
            return real_execute(cmd, command, *args, **kwargs)  # type: ignore[call-overload]

        def init(r: git.Repo, *args: object, **kwargs: object) -> None:
            self.repos += 1
            real_init(r, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(git.cmd.Git, "execute", execute)
        monkeypatch.setattr(git.Repo, "__init__", init)


def test_one_git_process_and_one_repo_per_fingerprint(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner fingerprints twice an iteration: each look is one `git status`, in a repo
    opened once."""
    gitstate.fingerprint(repo)  # opens the repo once
    spawned = Spawned(monkeypatch)
    for _ in range(3):
        assert gitstate.fingerprint(repo) is not None
    assert spawned.repos == 0
    assert [c[1] for c in spawned.commands] == ["status"] * 3


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
    gitstate.forget_repos()
    assert gitstate.fingerprint(tmp_path) is None
    roots = [workspace.create(tmp_path / f"r{i}", tasks=1) for i in range(gitstate.REPO_CACHE_SIZE + 2)]
    for root in roots:
        assert gitstate.fingerprint(root) is not None
    assert len(gitstate._repos) == gitstate.REPO_CACHE_SIZE
    gitstate.forget_repos()
    assert not gitstate._repos


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
