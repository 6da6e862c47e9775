"""Keeping loopdeck's own files out of `git status`: lines in the repository's `.git/info/exclude`.

A loop writes its state, journal, control queue, lock, archives and iteration logs under
`.claude/`, and `install` writes `.claude/settings.local.json` (absolute paths into the home
folder). None of it belongs in a commit: a committed state is what the trust boundary refuses.
So the first time loopdeck writes them, their names go into the repository's local exclude
file, never into the person's `.gitignore` (which is the project's, and committed). The file is
the common git folder's (a linked worktree's too: its `.git` file and `commondir` are read as
git reads them, without running git, since the Stop hook passes here). Outside a repository
nothing is written; a symlink in the way is never written through.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from loop.core.errors import LoopdeckError
from loop.store.safeopen import open_write

HEADER = "# loopdeck"
LOOP_LINES = (".claude/orchestrator-loop.*", ".claude/loopdeck/", ".claude/loops/", ".loopdeck/")
"""What every loop writes: state, journal, control queue, lock (and their copies), the private
folder (iteration logs, caches), the archives, and the workers' worktrees."""
INSTALL_LINES = (
    ".claude/settings.local.json",
    ".claude/settings.local.json.bak-*",
    ".claude/commands/orchestrator-loop.md",
    ".claude/commands/loop-status.md",
    ".claude/commands/loop-pause.md",
    ".claude/commands/loop-cancel.md",
)
"""What `install` (local: this person's, not the team's) writes: the settings with absolute paths,
its backups of them, and the slash commands (`install --shared` leaves them to commit)."""
MAX_EXCLUDE_BYTES = 1024 * 1024

_done: set[tuple[str, tuple[str, ...]]] = set()
"""(workspace, lines) already made sure of in this process: each decision takes the loop lock."""


def git_dirs(root: Path) -> tuple[Path, Path] | None:
    """The work tree's top folder `root` is in and the repository's common git folder (the main
    repository's, for a linked worktree), as git finds them; None outside a repository."""
    found = repository(root)
    return None if found is None else (found[0], found[2])


def repository(root: Path) -> tuple[Path, Path, Path] | None:
    """The work tree's top folder `root` is in, its git folder and the repository's common one,
    read from `.git` and `commondir` as git does (no git process); None outside a repository."""
    for folder in (root, *root.parents):
        dotgit = folder / ".git"
        if dotgit.is_dir():
            gitdir = dotgit
        elif dotgit.is_file():
            try:
                line = dotgit.read_text(encoding="utf-8", errors="replace").strip()
            except OSError:
                return None
            if not line.startswith("gitdir:"):
                return None
            gitdir = (folder / line.removeprefix("gitdir:").strip()).resolve()
        else:
            continue
        common = gitdir
        with contextlib.suppress(OSError):
            pointer = (gitdir / "commondir").read_text(encoding="utf-8", errors="replace").strip()
            if pointer:
                common = (gitdir / pointer).resolve()
        return folder, gitdir, common
    return None


def lines_for(root: Path, top: Path, names: tuple[str, ...]) -> tuple[str, ...]:
    """`names` as exclude lines: relative to the work tree's top, where the exclude file's
    patterns are anchored (a workspace in a subfolder of the repository gets its path first)."""
    try:
        inside = root.resolve().relative_to(top.resolve()).as_posix()
    except ValueError:
        return ()
    prefix = "" if inside == "." else inside + "/"
    return tuple(prefix + name for name in names)


def ensure(root: Path, install: bool = False) -> Path | None:
    """Add loopdeck's lines (with `install`: the local settings' too) to the exclude file of the
    repository `root` is in, once each, under a `# loopdeck` comment; the file written, or None
    (no repository, nothing missing, or a file loopdeck will not write). A courtesy: a problem
    here never stops a loop, so it is swallowed."""
    names = LOOP_LINES + (INSTALL_LINES if install else ())
    key = (str(root), names)
    if key in _done:
        return None
    try:
        written = _ensure(root, names)
    except (OSError, LoopdeckError):  # UnsafePath: a symlink or FIFO planted there
        return None
    _done.add(key)
    return written


def _ensure(root: Path, names: tuple[str, ...]) -> Path | None:
    found = git_dirs(root)
    if found is None:
        return None
    top, common = found
    wanted = lines_for(root, top, names)
    if not wanted or not common.is_dir():
        return None
    info = common / "info"
    if info.is_symlink() or (info.exists() and not info.is_dir()):
        return None  # never written through a link to somewhere else
    if not info.exists():
        info.mkdir()
    path = info / "exclude"
    fd = open_write(path, os.O_APPEND | os.O_CREAT, access=os.O_RDWR)  # O_NOFOLLOW, regular only
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # two loopdeck processes add the lines once
        text = os.pread(fd, MAX_EXCLUDE_BYTES, 0).decode("utf-8", "replace")
        present = {line.strip() for line in text.splitlines()}
        missing = [line for line in wanted if line not in present]
        if not missing:
            return None
        block = "\n".join([HEADER, *missing]) + "\n"
        if text and not text.endswith("\n"):
            block = "\n" + block
        os.write(fd, block.encode("utf-8"))
    finally:
        os.close(fd)
    return path
