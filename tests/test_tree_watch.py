"""The working tree watched for git (`tui.watch.tree_changes`, watchfiles): what counts, what
wakes nothing, folders that come and go, bursts, cancelling, and the monitor's clock when the
kernel has no watches left.

A change that wakes nothing cannot be waited for; so each such test makes it, then changes a
tracked file, and the first burst that comes must hold that file alone.
"""

from __future__ import annotations

import asyncio
import errno
import os
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import watchfiles

from loop.store.paths import Workspace
from tests.test_tui import app, make, text_of, until, until_seen
from tests.test_tui_round2 import isolated  # noqa: F401  (autouse: no user config, fixed git)
from tools import screenshots
from tui import watch
from tui.watch import TreeRules, tree_changes, tree_filter

QUIET_MS = 50
"""The tests' bursts end after this much quiet (the monitor's: `GIT_DEBOUNCE_MS`)."""
BURST_MS = 300


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, stdin=subprocess.DEVNULL)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A project with loopdeck's folder, ignored folders and a commit (so `.git/objects` has
    folders of its own)."""
    root = tmp_path / "project"
    for folder in ("src/pkg", ".claude/loops", "node_modules/dep", "build", "docs/_build/html"):
        (root / folder).mkdir(parents=True)
    (root / ".gitignore").write_text("node_modules/\nbuild/\ndocs/_build\n*.log\n")
    (root / "src" / "app.py").write_text("print('hi')\n")
    (root / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "start")
    return root


class Bursts:
    """The tree's bursts, relative to the root, once the watch is known to be up."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bursts = tree_changes(root, quiet_ms=QUIET_MS, burst_ms=BURST_MS)

    async def start(self) -> None:
        """Change a probe until a burst reports it: the watch is up from then on."""
        probe = self.root / "probe.txt"
        pending = asyncio.ensure_future(anext(self.bursts))
        for n in range(50):
            probe.write_text(f"{n}\n")
            done, _ = await asyncio.wait({pending}, timeout=0.2)
            if done:
                break
        await asyncio.wait_for(pending, 5)
        probe.unlink()
        while "probe.txt" not in await self.next():  # the probe's last writes and its removal
            pass

    async def next(self, timeout: float = 5.0) -> list[str]:
        paths = await asyncio.wait_for(anext(self.bursts), timeout)
        return sorted(os.path.relpath(p, self.root) for p in paths)

    async def until(self, wanted: set[str], timeout: float = 5.0) -> set[str]:
        """Bursts taken until `wanted` were all reported: all the paths reported."""
        seen: set[str] = set()
        while not wanted <= seen:
            seen.update(await self.next(timeout))
        return seen


@pytest.fixture
async def bursts(repo: Path) -> AsyncIterator[Bursts]:
    made = Bursts(repo)
    await made.start()
    yield made
    await made.bursts.aclose()


# --- the rules ---------------------------------------------------------------------------------------


def test_the_rules_say_which_folders_are_worth_watching(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("node_modules/\ndocs/_build\n")
    rules = TreeRules(tmp_path)
    root = str(tmp_path)
    for folder in (
        "",
        "/src",
        "/src/deep",
        "/.git",
        "/.git/refs",
        "/.git/refs/heads",
        "/.git/refs/heads/feature",
    ):
        assert rules.descends(root + folder), folder
    for folder in (
        "/.claude",
        "/.claude/loops",
        "/.git/objects",
        "/.git/objects/ab",
        "/.git/refs/tags",
        "/.git/logs",
    ):
        assert not rules.descends(root + folder), folder
    for folder in ("/node_modules", "/web/node_modules/dep", "/docs/_build", "/docs/_build/html"):
        assert not rules.descends(root + folder), folder
    assert not rules.descends(str(tmp_path.parent / "elsewhere"))


def test_a_folder_ignored_by_a_pattern_with_a_slash_takes_what_it_holds_along(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("docs/_build\n")
    accept = tree_filter(tmp_path)
    assert not accept(None, f"{tmp_path}/docs/_build/html/index.html")
    assert accept(None, f"{tmp_path}/docs/index.md")


def test_the_repositorys_own_exclude_file_is_honoured(tmp_path: Path) -> None:
    """loopdeck keeps its workers' worktrees out of git through `.git/info/exclude`: what
    they write is not the main tree's change."""
    (tmp_path / ".git" / "info").mkdir(parents=True)
    (tmp_path / ".git" / "info" / "exclude").write_text("# git's template\n/.loopdeck/\n")
    accept = tree_filter(tmp_path)
    assert not accept(None, f"{tmp_path}/.loopdeck/worktrees/t1/src/app.py")
    assert not TreeRules(tmp_path).descends(f"{tmp_path}/.loopdeck")
    assert accept(None, f"{tmp_path}/src/app.py")


# --- what counts -------------------------------------------------------------------------------------


async def test_a_tracked_files_change_counts(bursts: Bursts, repo: Path) -> None:
    (repo / "src" / "pkg" / "mod.py").write_text("x = 2\n")
    assert await bursts.next() == ["src/pkg/mod.py"]


async def test_what_git_does_not_see_wakes_nothing(bursts: Bursts, repo: Path) -> None:
    (repo / ".claude" / "loops" / "journal.jsonl").write_text("{}\n")
    (repo / ".claude" / "orchestrator-loop.local.md").write_text("---\n")
    (repo / "node_modules" / "dep" / "index.js").write_text("x\n")
    (repo / "build" / "out.o").write_bytes(b"\0")
    (repo / "docs" / "_build" / "html" / "index.html").write_text("<p>\n")
    objects = repo / ".git" / "objects"
    (objects / "ab").mkdir(exist_ok=True)
    (objects / "ab" / "cdef").write_bytes(b"blob")
    (repo / "src" / "debug.log").write_text("ignored by name\n")
    (repo / "src" / "app.py").write_text("print('tracked')\n")
    assert await bursts.next() == ["src/app.py"]


async def test_opening_and_reading_the_tree_reports_nothing(bursts: Bursts, repo: Path) -> None:
    assert (repo / "src" / "app.py").read_text() == "print('hi')\n"
    with open(repo / "src" / "pkg" / "mod.py", "rb") as handle:
        handle.read()
    os.listdir(repo / "src")
    git(repo, "--no-optional-locks", "status", "--porcelain")  # a look, as the monitor's
    git(repo, "log", "--oneline")
    (repo / "notes.md").write_text("the change\n")
    assert await bursts.next() == ["notes.md"]


async def test_commits_checkouts_and_adds_count(bursts: Bursts, repo: Path) -> None:
    (repo / "src" / "app.py").write_text("print('bye')\n")
    await bursts.until({"src/app.py"})
    git(repo, "add", "src/app.py")
    await bursts.until({".git/index"})
    git(repo, "commit", "-q", "-m", "bye")
    await bursts.until({".git/refs/heads/main"})
    git(repo, "checkout", "-q", "-b", "feature/x")  # a new folder under refs/heads, and HEAD
    await bursts.until({".git/HEAD"})
    git(repo, "commit", "-q", "--allow-empty", "-m", "on the branch")
    seen = await bursts.until({".git/refs/heads/feature/x"})
    assert not any(path.startswith((".git/objects", ".git/logs")) for path in seen)


# --- folders that come and go ------------------------------------------------------------------------


async def test_a_folder_made_later_is_watched_with_what_it_holds(bursts: Bursts, repo: Path) -> None:
    (repo / "new" / "deep").mkdir(parents=True)
    (repo / "new" / "deep" / "f.py").write_text("made at once\n")
    await bursts.until({"new"})
    (repo / "new" / "deep" / "g.py").write_text("made later\n")
    await bursts.until({"new/deep/g.py"})


async def test_a_folder_moved_in_is_watched_with_what_it_holds(
    bursts: Bursts, repo: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    (outside / "inner").mkdir(parents=True)
    (outside / "inner" / "a.py").write_text("a\n")
    os.rename(outside, repo / "src" / "moved")
    assert await bursts.next() == ["src/moved"]
    (repo / "src" / "moved" / "inner" / "a.py").write_text("b\n")
    assert await bursts.next() == ["src/moved/inner/a.py"]


async def test_new_folders_where_git_does_not_look_wake_nothing(bursts: Bursts, repo: Path) -> None:
    (repo / "node_modules" / "fresh").mkdir()
    (repo / ".claude" / "loops" / "2026-01-09").mkdir()
    (repo / "build" / "gen").mkdir()
    (repo / "docs" / "_build" / "more").mkdir()
    (repo / "src" / "build").mkdir()  # ignored by name, at any depth
    (repo / "src" / "build" / "x.o").write_bytes(b"\0")
    (repo / "src" / "app.py").write_text("print('tracked')\n")
    assert await bursts.next() == ["src/app.py"]


async def test_a_removed_folder_made_again_is_watched_again(bursts: Bursts, repo: Path) -> None:
    subprocess.run(["rm", "-rf", str(repo / "src" / "pkg")], check=True)
    await bursts.until({"src/pkg"})
    (repo / "src" / "pkg").mkdir()  # again, a new folder
    (repo / "src" / "pkg" / "mod.py").write_text("x = 3\n")
    await bursts.until({"src/pkg"})
    (repo / "src" / "pkg" / "mod.py").write_text("x = 4\n")
    await bursts.until({"src/pkg/mod.py"})


async def test_a_folder_renamed_is_followed_under_its_new_name(bursts: Bursts, repo: Path) -> None:
    os.rename(repo / "src" / "pkg", repo / "src" / "lib")
    assert await bursts.next() == ["src/lib", "src/pkg"]
    (repo / "src" / "lib" / "mod.py").write_text("x = 5\n")
    assert await bursts.next() == ["src/lib/mod.py"]
    os.rename(repo / "src" / "lib", repo / "build" / "lib")  # to where git does not look
    assert await bursts.next() == ["src/lib"]
    (repo / "build" / "lib" / "mod.py").write_text("x = 6\n")
    (repo / "src" / "app.py").write_text("print('tracked')\n")
    assert await bursts.next() == ["src/app.py"]


async def test_what_a_symlinked_folder_points_to_is_not_the_trees(repo: Path, tmp_path: Path) -> None:
    """watchfiles follows a link to a folder that is there when it starts; git does not: a
    change out there is not the tree's."""
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "sub").mkdir(parents=True)
    (repo / "src" / "link").symlink_to(elsewhere)
    watched = Bursts(repo)
    await watched.start()
    try:
        (elsewhere / "sub" / "f.py").write_text("outside the tree\n")
        (repo / "src" / "app.py").write_text("print('tracked')\n")
        assert await watched.next() == ["src/app.py"]
        os.unlink(repo / "src" / "link")
        assert await watched.next() == ["src/link"]  # the link itself is a change git sees
    finally:
        await watched.bursts.aclose()


# --- bursts and stopping -----------------------------------------------------------------------------


async def test_a_burst_of_changes_is_handed_over_once(bursts: Bursts, repo: Path) -> None:
    for n in range(5):  # a save, a formatter, a build: changes a few ms apart
        (repo / "src" / "app.py").write_text(f"print({n})\n")
        (repo / "src" / "pkg" / "mod.py").write_text(f"x = {n}\n")
    assert await bursts.next() == ["src/app.py", "src/pkg/mod.py"]


async def test_a_tree_that_never_rests_is_still_reported(bursts: Bursts, repo: Path) -> None:
    stop = asyncio.Event()

    async def writer() -> None:
        n = 0
        while not stop.is_set():  # a new file every 10 ms: never `QUIET_MS` without a change
            (repo / "src" / f"gen{n}.py").write_text(f"print({n})\n")
            n += 1
            await asyncio.sleep(0.01)

    writing = asyncio.ensure_future(writer())
    try:
        await bursts.next(timeout=3.0)
        await bursts.next(timeout=3.0)
        assert not writing.done()
    finally:
        stop.set()
        await writing


async def test_a_cancelled_watch_lets_go_at_once(repo: Path) -> None:
    """Cancelling the task that iterates a watch (what Textual does to a worker that is
    replaced, unmounted or closing) ends it now: watchfiles' thread is told to stop, and
    nothing waits the 5 s its thread otherwise waits in Rust."""
    bursts = tree_changes(repo, quiet_ms=QUIET_MS)
    pending = asyncio.ensure_future(anext(bursts))
    await asyncio.wait({pending}, timeout=0.2)  # the watch is up, its thread waiting
    cancelled = time.monotonic()
    pending.cancel()
    with pytest.raises(asyncio.CancelledError):
        await pending
    assert time.monotonic() - cancelled < 1.0


# --- the monitor -------------------------------------------------------------------------------------


class Awatch:
    """watchfiles' `awatch` as `tui.watch` calls it, with the tree's calls counted (the root,
    recursive); `exhausted`: it fails as when the kernel has no inotify watches left."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, root: Path, exhausted: bool = False) -> None:
        self.real = watchfiles.awatch
        self.root = root
        self.exhausted = exhausted
        self.tree_calls = 0
        monkeypatch.setattr(watch, "awatch", self)

    def __call__(self, *paths: Any, **kw: Any) -> Any:
        if Path(paths[0]) == self.root and kw.get("recursive"):
            self.tree_calls += 1
            if self.exhausted:  # as watchfiles says when the kernel refuses a watch
                raise OSError(errno.ENOSPC, "OS file watch limit reached")
        return self.real(*paths, **kw)


async def test_the_monitor_follows_git_when_the_tree_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = make(tmp_path, "running")
    awatch = Awatch(monkeypatch, ws.root)
    await git_followed(ws)
    assert awatch.tree_calls == 1


async def git_followed(ws: Workspace) -> None:
    """The monitor shows a file made in the tree (the scenario has two new files already)."""
    monitor = app(ws, watch=True, git=True)
    async with monitor.run_test(size=screenshots.SIZE) as pilot:
        await screenshots.settle(monitor)
        assert "2 new" in text_of(monitor, "#git")
        await until_seen(
            pilot,
            lambda: (ws.root / "fresh.py").write_text("print('hi')\n"),
            lambda: "3 new" in text_of(monitor, "#git"),
        )


async def test_with_no_watcher_for_the_tree_git_is_read_after_a_loop_file_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kernel has no inotify watches left for the tree: git is read again on the monitor's
    2 s clock once a loop file changed (as when the monitor does not watch), never left as it
    was at the start."""
    ws = make(tmp_path, "running")
    awatch = Awatch(monkeypatch, ws.root, exhausted=True)
    monitor = app(ws, watch=True, git=True)
    async with monitor.run_test(size=screenshots.SIZE) as pilot:
        await screenshots.settle(monitor)
        await until(pilot, lambda: awatch.tree_calls == 1)
        (ws.root / "fresh.py").write_text("print('hi')\n")

        def loop_file_changes() -> None:
            with ws.journal.open("a") as journal:
                journal.write('{"ts": "2026-01-01T00:00:00Z", "kind": "warning", "data": {}}\n')

        await until_seen(pilot, loop_file_changes, lambda: "3 new" in text_of(monitor, "#git"))


async def test_a_burst_of_tree_changes_reads_git_once_now_and_once_a_second_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A look at git is three git processes: the monitor reads it at most once a second, and a
    change inside that second is read once when it ends, never lost."""
    from loop.repo import gitread

    reads: list[float] = []
    real = gitread.status

    def counted(root: Path) -> Any:
        reads.append(time.monotonic())
        return real(root)

    monkeypatch.setattr(gitread, "status", counted)  # the module the app reads through
    ws = make(tmp_path, "running")
    monitor = app(ws, watch=True, git=True)
    async with monitor.run_test(size=screenshots.SIZE) as pilot:
        await screenshots.settle(monitor)
        assert len(reads) == 1  # the first look
        monitor.post_message(watch.TreeChanged())
        await until(pilot, lambda: len(reads) == 2)  # at once: the last look was long ago
        for _ in range(3):  # within the second after it (a queued one replaces the one before)
            monitor.post_message(watch.TreeChanged())
            await pilot.pause(0.05)
        assert len(reads) == 2
        await until(pilot, lambda: len(reads) == 3, timeout=5)
        await pilot.pause(0.5)
    assert len(reads) == 3  # one at once, one for the rest of the burst: not one a change
    assert reads[2] - reads[1] >= 0.9
