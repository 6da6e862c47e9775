"""What the monitor watches, and the messages its workers post.

Workers never touch widgets: the file watcher posts `FilesChanged`, the snapshot and git
workers post their results, and the app updates widgets from those messages on the UI thread.
"""

from __future__ import annotations

from pathlib import Path

from textual.message import Message

from loop.gitstate import GitStatus
from loop.paths import Workspace
from loop.snapshot import Snapshot

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


def interesting(folders: set[Path], files: set[Path]) -> object:
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
