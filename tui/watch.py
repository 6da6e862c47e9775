"""What the monitor watches, how (watchfiles), and the messages its workers post.

Workers never touch widgets: the file watchers post `FilesChanged` and `TreeChanged`, the
snapshot and git workers post their results, and the app updates widgets from those messages
on the UI thread. Each watch is an `awatch` in an async worker of the widget (or app) that
owns it: cancelling the worker (a new watch in its group, the widget unmounted, the app
closing) makes watchfiles set its stop event, and its thread ends within a step.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Callable, Iterable
from fnmatch import fnmatch
from pathlib import Path

from textual.message import Message
from watchfiles import awatch

from loop.repo.gitstate import GitStatus
from loop.store.paths import Workspace
from loop.views.snapshot import Snapshot

DEBOUNCE_MS = 30
"""The longest a burst of the loop's files is held (watchfiles' default holds one up to 1.6 s):
a driver's decision writes several files at once, and reaches the screen as one change."""
STEP_MS = 20
"""How often the loop files' watcher thread looks at what it collected: a change is handed
over once a step passes without another (20 to 40 ms after it); a shorter step costs an
idle monitor more wake-ups."""
OUTPUT_STEP_MS = 50
"""The output panel's watch: its lines wait `HOLD_S` (50 ms) for a snapshot anyway."""

Filter = Callable[[object, str], bool]
"""A watchfiles filter: (the kind of change, the path) → whether it counts."""


async def changes(
    paths: Iterable[str | Path],
    accept: Filter,
    *,
    debounce_ms: int = DEBOUNCE_MS,
    step_ms: int = STEP_MS,
    recursive: bool = False,
) -> AsyncGenerator[list[str], None]:
    """The paths `accept` keeps, one list per burst (over once a step passes without another
    change, or after `debounce_ms`). OSError when the kernel refuses a watch (a path gone, no
    inotify watches left)."""
    async for batch in awatch(
        *paths, watch_filter=accept, debounce=debounce_ms, step=step_ms, recursive=recursive
    ):
        yield sorted({path for _change, path in batch})


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


def interesting(folders: set[Path], files: set[Path]) -> Filter:
    """A watchfiles filter: the files of interest, any task JSON, anything new in `.claude/`."""
    names = {str(f) for f in files}
    task_dirs = {str(f) for f in folders if f.parent.name == "tasks"}

    def accept(change: object, path: str) -> bool:
        if path in names:
            return True
        # `os.path`, not `Path`: a Path interns every part of its name, and the runner's
        # temp files (a random name per write) would each stay in the interpreter's table.
        if path.endswith(".json") and os.path.dirname(path) in task_dirs:
            return True
        return path.endswith("/.claude") or "/.claude/loops/" in path

    return accept


GIT_DEBOUNCE_MS = 300
"""A save, a formatter run and a build touch many files at once: one git read for the burst,
once this long passes without another change (the tree watcher's step: it wakes this often)."""
GIT_BURST_MS = 1000
"""... but a tree that never rests (a build writing for minutes) is still read this often."""


class TreeChanged(Message):
    """Something git would see changed in the working tree (or a commit moved HEAD)."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, TreeChanged)


GIT_FOLLOWED = (".git/HEAD", ".git/index", ".git/refs/heads/")
"""What of git's own folder a commit, a checkout or a `git add` moves (a name ending in `/`:
all it holds); the rest (objects, logs, locks) changes only along with these."""


def ignored_patterns(root: Path) -> list[str]:
    """The patterns of the top-level `.gitignore` and of the repository's own exclude file
    (`.git/info/exclude`: where loopdeck keeps its workers' worktrees out): plain globs;
    negations are left to git itself, which the read that follows consults anyway."""
    lines: list[str] = []
    for source in (root / ".gitignore", root / ".git" / "info" / "exclude"):
        try:
            lines += source.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
    return [line.strip().strip("/") for line in lines if line.strip() and not line.startswith(("#", "!"))]


class TreeRules:
    """Which paths of the working tree count for git: not loopdeck's own files (`.claude/`),
    not what `.gitignore` ignores, not git's internals except `GIT_FOLLOWED`. One place for
    both questions a watcher asks: does a change of this path count (`accepts`), and is this
    folder worth watching at all (`descends`: something under it could count)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.prefix = str(root).rstrip("/") + "/"
        self.patterns = ignored_patterns(root)

    def relative(self, path: str) -> str | None:
        """`path` inside the root, or None (the root itself is "")."""
        if path == self.prefix[:-1]:
            return ""
        return path[len(self.prefix) :] if path.startswith(self.prefix) else None

    def ignored(self, rel: str) -> bool:
        """A pattern matches one of the path's names or, with a `/` in it, the path or a folder
        it is in (an ignored folder takes all it holds along, as in git)."""
        parts = rel.split("/")
        prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
        for pattern in self.patterns:
            names = prefixes if "/" in pattern else parts
            if any(fnmatch(name, pattern) for name in names):
                return True
        return False

    def accepts(self, path: str) -> bool:
        rel = self.relative(path)
        if not rel:
            return False
        top = rel.split("/", 1)[0]
        if top == ".git":
            return any(rel == f or (f.endswith("/") and rel.startswith(f)) for f in GIT_FOLLOWED)
        return top != ".claude" and not self.ignored(rel) and not self.beyond_link(rel)

    def beyond_link(self, rel: str) -> bool:
        """Whether the path lies in a symlinked folder: watchfiles follows the links it finds
        when it starts, git does not (a link is one entry to git, what it points to none)."""
        folder = self.prefix[:-1]
        for part in rel.split("/")[:-1]:
            folder = f"{folder}/{part}"
            if os.path.islink(folder):
                return True
        return False

    def descends(self, folder: str) -> bool:
        rel = self.relative(folder)
        if rel is None:
            return False
        if rel == "":
            return True
        top = rel.split("/", 1)[0]
        if top == ".git":  # the folders on the way to what is followed, and all under refs/heads
            inside = rel + "/"
            return any(f.startswith(inside) or inside.startswith(f) for f in GIT_FOLLOWED if f.endswith("/"))
        return top != ".claude" and not self.ignored(rel)


def tree_filter(root: Path) -> Filter:
    """A watchfiles filter for the working tree (`TreeRules.accepts`)."""
    rules = TreeRules(root)

    def accept(change: object, path: str) -> bool:
        return rules.accepts(path)

    return accept


def tree_changes(
    root: Path, quiet_ms: int = GIT_DEBOUNCE_MS, burst_ms: int = GIT_BURST_MS
) -> AsyncGenerator[list[str], None]:
    """The working tree's changes that count for git (`TreeRules`), one list per burst: over
    once `quiet_ms` pass without another change, or after `burst_ms`.

    watchfiles watches the whole tree recursively (folders made or moved in later included) and
    drops reads and opens in Rust; what git does not see (`.claude/`, ignored files, git's
    objects and logs) is dropped by the filter before it wakes anyone."""
    return changes([root], tree_filter(root), debounce_ms=burst_ms, step_ms=quiet_ms, recursive=True)
