"""The working tree watched for git (`tui.tree_watch`): what counts, what is not even watched,
folders that come and go, bursts, and the monitor's fallback to watchfiles.

The kernel queues an inotify event during the write, rename or mkdir that makes it, so most
tests act and then take what is queued at once (`TreeWatch.read`): nothing is waited for.
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import os
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from loop.store.paths import Workspace
from tests.test_tui import app, make, text_of, until, until_seen
from tests.test_tui_round2 import isolated  # noqa: F401  (autouse: no user config, fixed git)
from tui import inotify, screenshots
from tui.tree_watch import TreeWatch
from tui.watch import TreeRules, tree_filter

pytestmark = pytest.mark.skipif(not inotify.available(), reason="inotify is Linux's")


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


@pytest.fixture
def watch(repo: Path) -> Iterator[TreeWatch]:
    made = TreeWatch(repo, quiet_s=0.1, burst_s=0.5)
    made.walk(made.root)
    yield made
    made.close()


def taken(watch: TreeWatch) -> list[str]:
    """The paths that counted among the events queued now (relative to the root)."""
    watch.read()
    paths, watch.counted = list(watch.counted), {}
    return [os.path.relpath(p, watch.root) for p in paths]


def watched(watch: TreeWatch) -> set[str]:
    return {os.path.relpath(f, watch.root) for f in watch.folders.values()}


async def next_burst(bursts: AsyncIterator[list[str]], timeout: float = 5.0) -> list[str]:
    return await asyncio.wait_for(anext(bursts), timeout)


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


# --- what is watched, what counts -------------------------------------------------------------------


def test_only_the_folders_whose_changes_count_are_watched(watch: TreeWatch) -> None:
    assert watched(watch) == {".", "src", "src/pkg", "docs", ".git", ".git/refs", ".git/refs/heads"}


def test_a_tracked_files_change_counts(watch: TreeWatch, repo: Path) -> None:
    (repo / "src" / "pkg" / "mod.py").write_text("x = 2\n")
    assert taken(watch) == ["src/pkg/mod.py"]


def test_what_git_does_not_see_wakes_nothing(watch: TreeWatch, repo: Path) -> None:
    (repo / ".claude" / "loops" / "journal.jsonl").write_text("{}\n")
    (repo / ".claude" / "orchestrator-loop.local.md").write_text("---\n")
    (repo / "node_modules" / "dep" / "index.js").write_text("x\n")
    (repo / "build" / "out.o").write_bytes(b"\0")
    (repo / "docs" / "_build" / "html" / "index.html").write_text("<p>\n")
    objects = repo / ".git" / "objects"
    (objects / "ab").mkdir(exist_ok=True)
    (objects / "ab" / "cdef").write_bytes(b"blob")
    assert watch.read() is False
    assert watch.events == 0, "not even an event: none of these folders is watched"
    (repo / "src" / "debug.log").write_text("ignored by name\n")
    assert taken(watch) == []


def test_opening_and_reading_the_tree_reports_nothing(watch: TreeWatch, repo: Path) -> None:
    assert (repo / "src" / "app.py").read_text() == "print('hi')\n"
    with open(repo / "src" / "pkg" / "mod.py", "rb") as handle:
        handle.read()
    os.listdir(repo / "src")
    git(repo, "--no-optional-locks", "status", "--porcelain")  # a look, as the monitor's
    git(repo, "log", "--oneline")
    assert watch.read() is False
    assert watch.events == 0


def test_commits_checkouts_and_adds_count(watch: TreeWatch, repo: Path) -> None:
    (repo / "src" / "app.py").write_text("print('bye')\n")
    taken(watch)
    git(repo, "add", "src/app.py")
    assert ".git/index" in taken(watch)
    git(repo, "commit", "-q", "-m", "bye")
    assert ".git/refs/heads/main" in taken(watch)
    git(repo, "checkout", "-q", "-b", "feature/x")  # a new folder under refs/heads, and HEAD
    assert {".git/HEAD", ".git/refs/heads/feature"} <= set(taken(watch))
    assert ".git/refs/heads/feature" in watched(watch)
    git(repo, "commit", "-q", "--allow-empty", "-m", "on the branch")
    assert ".git/refs/heads/feature/x" in taken(watch)
    assert not any(folder.startswith(".git/objects") for folder in watched(watch))


def test_a_folder_made_later_is_watched_with_what_it_holds(watch: TreeWatch, repo: Path) -> None:
    (repo / "new" / "deep").mkdir(parents=True)
    (repo / "new" / "deep" / "f.py").write_text("made at once\n")
    assert "new" in taken(watch)
    assert {"new", "new/deep"} <= watched(watch)
    (repo / "new" / "deep" / "g.py").write_text("made later\n")
    assert taken(watch) == ["new/deep/g.py"]


def test_a_folder_moved_in_is_watched_with_what_it_holds(
    watch: TreeWatch, repo: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    (outside / "inner").mkdir(parents=True)
    (outside / "inner" / "a.py").write_text("a\n")
    os.rename(outside, repo / "src" / "moved")
    assert taken(watch) == ["src/moved"]
    assert {"src/moved", "src/moved/inner"} <= watched(watch)
    (repo / "src" / "moved" / "inner" / "a.py").write_text("b\n")
    assert taken(watch) == ["src/moved/inner/a.py"]


def test_new_folders_where_git_does_not_look_are_not_watched(watch: TreeWatch, repo: Path) -> None:
    (repo / "node_modules" / "fresh").mkdir()
    (repo / ".claude" / "loops" / "2026-01-09").mkdir()
    (repo / "build" / "gen").mkdir()
    (repo / "docs" / "_build" / "more").mkdir()
    assert watch.read() is False
    (repo / "src" / "build").mkdir()  # ignored by name, at any depth
    (repo / "src" / "build" / "x.o").write_bytes(b"\0")
    assert taken(watch) == []
    assert not {"src/build", "node_modules/fresh", ".claude/loops/2026-01-09"} & watched(watch)


def test_a_removed_folder_lets_its_watch_go_and_the_rest_goes_on(watch: TreeWatch, repo: Path) -> None:
    subprocess.run(["rm", "-rf", str(repo / "src" / "pkg")], check=True)
    assert "src/pkg" in taken(watch)
    assert "src/pkg" not in watched(watch)
    (repo / "src" / "pkg").mkdir()  # again, a new folder
    (repo / "src" / "pkg" / "mod.py").write_text("x = 3\n")
    assert "src/pkg" in taken(watch)
    (repo / "src" / "pkg" / "mod.py").write_text("x = 4\n")
    assert taken(watch) == ["src/pkg/mod.py"]


def test_a_folder_renamed_is_watched_under_its_new_name_only(watch: TreeWatch, repo: Path) -> None:
    os.rename(repo / "src" / "pkg", repo / "src" / "lib")
    assert set(taken(watch)) == {"src/pkg", "src/lib"}
    assert "src/lib" in watched(watch) and "src/pkg" not in watched(watch)
    (repo / "src" / "lib" / "mod.py").write_text("x = 5\n")
    assert taken(watch) == ["src/lib/mod.py"]
    os.rename(repo / "src" / "lib", repo / "build" / "lib")  # to where git does not look
    assert taken(watch) == ["src/lib"]
    assert not any(f.startswith("build") for f in watched(watch))
    (repo / "build" / "lib" / "mod.py").write_text("x = 6\n")
    assert watch.read() is False


def test_symlinked_folders_are_not_followed(watch: TreeWatch, repo: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "sub").mkdir(parents=True)
    (repo / "src" / "link").symlink_to(elsewhere)
    assert taken(watch) == ["src/link"]  # the link itself is a change git sees
    again = TreeWatch(repo)
    try:
        again.walk(again.root)
        assert not any("link" in f for f in watched(again))
    finally:
        again.close()
    (elsewhere / "sub" / "f.py").write_text("outside the tree\n")
    assert watch.read() is False


def test_an_overflow_of_the_kernels_queue_counts_and_walks_the_tree_again(
    watch: TreeWatch, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inotify, "events", lambda fd: iter([(-1, inotify.IN_Q_OVERFLOW, b"")]))
    forgotten = next(wd for wd, f in watch.folders.items() if f.endswith("/src/pkg"))
    del watch.folders[forgotten]  # as if its creation had been lost with the queue
    assert watch.read() is True
    assert "src/pkg" in watched(watch)


def libc_without_watches(real: Any) -> Any:
    """inotify that has a descriptor to give but no watch left (ENOSPC), as on a huge tree."""

    class NoWatches:
        def inotify_init1(self, flags: int) -> int:
            return int(real.inotify_init1(flags))

        def inotify_add_watch(self, fd: int, path: bytes, mask: int) -> int:
            ctypes.set_errno(errno.ENOSPC)
            return -1

    return NoWatches()


def test_no_watches_left_is_an_error_at_start(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = inotify.load_libc()
    monkeypatch.setattr(inotify, "load_libc", lambda: libc_without_watches(real))

    async def main() -> None:
        await TreeWatch(repo).start()

    with pytest.raises(OSError) as raised:
        asyncio.run(main())
    assert raised.value.errno == errno.ENOSPC


# --- bursts ------------------------------------------------------------------------------------------


async def test_a_burst_of_changes_is_handed_over_once(repo: Path) -> None:
    async with await TreeWatch(repo).start() as watch:  # GIT_DEBOUNCE_MS of quiet ends a burst
        bursts = watch.changes()
        pending = asyncio.ensure_future(next_burst(bursts))
        for n in range(5):  # a save, a formatter, a build: changes a few ms apart
            (repo / "src" / "app.py").write_text(f"print({n})\n")
            await asyncio.sleep(0.01)
            (repo / "src" / "pkg" / "mod.py").write_text(f"x = {n}\n")
            await asyncio.sleep(0.01)
        paths = await pending
        assert sorted(os.path.relpath(p, repo) for p in paths) == ["src/app.py", "src/pkg/mod.py"]
        (repo / "notes.md").write_text("next\n")
        assert [os.path.relpath(p, repo) for p in await next_burst(bursts)] == ["notes.md"]
        assert watch.wakeups < watch.events, "events are read as they come, several at a time"
        await bursts.aclose()


async def test_a_tree_that_never_rests_is_still_reported(repo: Path) -> None:
    async with await TreeWatch(repo, quiet_s=0.2, burst_s=0.5).start() as watch:
        bursts = watch.changes()
        stop = asyncio.Event()

        async def writer() -> None:
            n = 0
            while not stop.is_set():  # a change every 50 ms: never 200 ms of quiet
                (repo / "src" / "app.py").write_text(f"print({n})\n")
                n += 1
                await asyncio.sleep(0.05)

        writing = asyncio.ensure_future(writer())
        try:
            began = time.monotonic()
            await next_burst(bursts, timeout=3.0)
            await next_burst(bursts, timeout=3.0)
            assert not writing.done()
            assert time.monotonic() - began < 3.0
        finally:
            stop.set()
            await writing
            await bursts.aclose()


async def test_a_folder_that_cannot_be_watched_later_ends_the_changes(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with await TreeWatch(repo, quiet_s=0.1, burst_s=0.5).start() as watch:
        real = watch.libc
        watch.libc = libc_without_watches(real)
        bursts = watch.changes()
        (repo / "src" / "new").mkdir()
        with pytest.raises(OSError) as raised:
            await next_burst(bursts)
        assert raised.value.errno == errno.ENOSPC


# --- the monitor -----------------------------------------------------------------------------------------


class Awatch:
    """watchfiles' `awatch`, with its calls recorded (the tree's: the root, recursive)."""

    def __init__(
        self, monkeypatch: pytest.MonkeyPatch, root: Path, refuse: bool = False, exhausted: bool = False
    ) -> None:
        import watchfiles

        self.real = watchfiles.awatch
        self.root = root
        self.refuse = refuse
        self.exhausted = exhausted
        self.tree_calls = 0
        monkeypatch.setattr(watchfiles, "awatch", self)

    def __call__(self, *paths: Any, **kw: Any) -> Any:
        if Path(paths[0]) == self.root and kw.get("recursive", True):
            self.tree_calls += 1
            if self.refuse:
                raise AssertionError("the tree is watched with watchfiles")
            if self.exhausted:  # as watchfiles says when the kernel refuses a watch
                raise OSError(errno.ENOSPC, "OS file watch limit reached")
        return self.real(*paths, **kw)


def no_watches_left(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel refuses the tree's watches, as when its inotify watches are all taken."""

    def exhausted(self: TreeWatch, folder: str) -> bool:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), folder)

    monkeypatch.setattr(TreeWatch, "add", exhausted)


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


async def test_the_monitor_follows_git_with_inotify(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = make(tmp_path, "running")
    awatch = Awatch(monkeypatch, ws.root, refuse=True)
    await git_followed(ws)
    assert awatch.tree_calls == 0


@pytest.mark.parametrize("why", ["no inotify", "no watches left"])
async def test_without_inotify_watches_the_monitor_follows_git_with_watchfiles(
    why: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if why == "no inotify":
        monkeypatch.setattr(inotify, "available", lambda: False)
    else:
        no_watches_left(monkeypatch)
    ws = make(tmp_path, "running")
    awatch = Awatch(monkeypatch, ws.root)
    await git_followed(ws)
    assert awatch.tree_calls == 1


async def test_with_no_watcher_for_the_tree_git_is_read_after_a_loop_file_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Neither inotify nor watchfiles can watch the tree: git is read again on the monitor's
    2 s clock once a loop file changed (as when the monitor does not watch), never left as it
    was at the start."""
    no_watches_left(monkeypatch)
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
