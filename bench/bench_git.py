"""How long loopdeck's reads of git take: the monitor's git panel (`gitread.status`, HEAD still
or moved), the worktree views of a parallel loop, and the import a process pays once.

    python -m bench.bench_git [--files 2000] [--repeat 30]

Figures printed, never asserted. The repository is made in a temporary folder: `--files`
tracked files, 20 of them changed, 5 staged, 10 new, and one task branch in a worktree.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from bench.common import measure, row
from loop.repo import gitread, worktrees
from loop.repo.gitargv import git_argv

IDENTITY = ("-c", "user.name=bench", "-c", "user.email=bench@loopdeck.invalid")


def _git(root: Path, *args: str) -> None:
    subprocess.run(git_argv(*IDENTITY, *args), cwd=root, check=True, capture_output=True)


def make_repo(root: Path, files: int) -> Path:
    """A repository of `files` small files in folders of 100, some changed, staged and new."""
    root.mkdir(parents=True)
    _git(root, "init", "-q", "-b", "main")
    for n in range(files):
        path = root / f"pkg{n // 100:03d}" / f"mod{n:05d}.py"
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"VALUE = {n}\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "start")
    for n in range(0, files, max(files // 20, 1)):
        (root / f"pkg{n // 100:03d}" / f"mod{n:05d}.py").write_text(f"VALUE = {n + 1}\n")
    _git(
        root, "add", "--", *[f"pkg{n // 100:03d}/mod{n:05d}.py" for n in range(0, files, max(files // 5, 1))]
    )
    for n in range(10):
        (root / f"new{n}.txt").write_text("new\n")
    return root


def startup(code: str, repeat: int) -> list[float]:
    """A fresh interpreter running `code`: what a process pays once."""
    return measure(lambda: subprocess.run([sys.executable, "-c", code], check=True), repeat, warmup=1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = make_repo(Path(tmp) / "repo", args.files)
        wt = worktrees.ensure(root, "bench", "t1", "main")
        (wt.path / "task.txt").write_text("task\n")
        worktrees.commit_all(wt, "task")
        print(f"a repository of {args.files} files, 20 changed, 5 staged, 10 new")
        row("monitor: status, HEAD still", measure(lambda: gitread.status(root), args.repeat))

        def moved() -> None:
            gitread.forget()  # as if HEAD had moved: the log is read again
            gitread.status(root)

        row("monitor: status, HEAD moved (log read)", measure(moved, args.repeat))
        views: list[tuple[str, Callable[[], object]]] = [
            ("worktrees: changed_files", lambda: worktrees.changed_files(wt, "main")),
            ("worktrees: branches", lambda: worktrees.branches(root, "bench")),
            ("worktrees: unresolved", lambda: worktrees.unresolved(root)),
            ("worktrees: merged", lambda: worktrees.merged(root, wt.branch)),
            ("worktrees: leftovers (worktree list)", lambda: worktrees.leftovers(root, "bench")),
        ]
        for label, fn in views:
            row(label, measure(fn, args.repeat))
    row("import loop.repo.gitread (a fresh process)", startup("import loop.repo.gitread", 10))
    row("import loop.repo.gitstate (a fresh process)", startup("import loop.repo.gitstate", 10))


if __name__ == "__main__":
    main()
