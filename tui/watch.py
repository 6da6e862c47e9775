"""What the monitor watches, and the messages its workers post.

Workers never touch widgets: the file watcher posts `FilesChanged`, the snapshot and git
workers post their results, and the app updates widgets from those messages on the UI thread.
"""

from __future__ import annotations

from collections.abc import Callable
from fnmatch import fnmatch
from pathlib import Path

from textual.message import Message

from loop.repo.gitstate import GitStatus
from loop.store.paths import Workspace
from loop.views.snapshot import Snapshot

DEBOUNCE_MS = 30
"""watchfiles waits 1.6 s by default before reporting; a monitor must show a change in a blink."""


class FilesChanged(Message):
    """Something the monitor shows changed on disk. Bursts collapse: only the newest counts."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, FilesChanged)


class SnapshotReady(Message):
    def __init__(self, snapshot: Snapshot) -> None:
        super().__init__()
        self.snapshot = snapshot

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SnapshotReady)


class GitReady(Message):
    def __init__(self, status: GitStatus) -> None:
        super().__init__()
        self.status = status


def watch_paths(ws: Workspace, snapshot: Snapshot | None) -> tuple[set[Path], set[Path]]:
    """(folders to watch, files of interest). Folders are watched non-recursively, so a busy
    project tree (node_modules, build output) costs nothing."""
    folders = {ws.root}
    files = {ws.state, ws.journal, ws.control, ws.backup}
    if ws.claude_dir.is_dir():
        folders.add(ws.claude_dir)
    if ws.archive_dir.is_dir():
        folders.add(ws.archive_dir)
    if snapshot is not None and snapshot.sources is not None:
        for report in snapshot.sources.sources:
            if report.path is None:
                continue
            path = Path(report.path)
            if not path.is_absolute():
                path = ws.root / path
            if report.name == "claude_tasks":
                if path.is_dir():
                    folders.add(path)
            elif path.parent.is_dir():
                # Watched even while missing or unreadable: its creation or repair shows at once.
                folders.add(path.parent)
                files.add(path)
    return folders, files


def interesting(folders: set[Path], files: set[Path]) -> Callable[[object, str], bool]:
    """A watchfiles filter: the files of interest, any task JSON, anything new in `.claude/`."""
    names = {str(f) for f in files}
    task_dirs = {str(f) for f in folders if f.parent.name == "tasks"}

    def accept(change: object, path: str) -> bool:
        if path in names:
            return True
        parent = str(Path(path).parent)
        if parent in task_dirs and path.endswith(".json"):
            return True
        return path.endswith("/.claude") or "/.claude/loops/" in path

    return accept


GIT_DEBOUNCE_MS = 300
"""A save, a formatter run and a build touch many files at once: one git read for the burst."""


class TreeChanged(Message):
    """Something git would see changed in the working tree (or a commit moved HEAD)."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, TreeChanged)


def ignored_patterns(root: Path) -> list[str]:
    """The top-level `.gitignore`'s patterns (plain globs; negations are left to git itself,
    which the read that follows consults anyway)."""
    try:
        lines = (root / ".gitignore").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    return [line.strip().strip("/") for line in lines if line.strip() and not line.startswith(("#", "!"))]


def tree_filter(root: Path) -> Callable[[object, str], bool]:
    """A watchfiles filter for the working tree: not loopdeck's own files (`.claude/`), not
    what `.gitignore` ignores, not git's internals except what a commit or checkout moves."""
    patterns = ignored_patterns(root)
    prefix = str(root).rstrip("/") + "/"

    def accept(change: object, path: str) -> bool:
        if not path.startswith(prefix):
            return False
        rel = path[len(prefix) :]
        parts = rel.split("/")
        if parts[0] == ".git":
            return rel in (".git/HEAD", ".git/index") or rel.startswith(".git/refs/heads/")
        if parts[0] == ".claude":
            return False
        for pattern in patterns:
            if fnmatch(rel, pattern) or any(fnmatch(part, pattern) for part in parts):
                return False
        return True

    return accept
