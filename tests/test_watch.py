"""The loop's files watched (`tui.watch.changes`, watchfiles): a burst is handed over once and
in time however busy the folder stays, only the files of interest count, and folders are
watched one level deep.

A change that wakes nothing cannot be waited for; so each such test makes it, then changes a
file of interest, and the first burst that comes must hold that file alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from loop.store.paths import Workspace
from tui.watch import changes, interesting, watch_paths


class Bursts:
    """The bursts of the loop files' watch on `ws`, once the watch is known to be up."""

    def __init__(self, ws: Workspace) -> None:
        folders, files = watch_paths(ws, None)
        self.ws = ws
        self.bursts = changes(sorted(folders), interesting(folders, files))

    async def start(self) -> None:
        """Change the state file until a burst reports it: the watch is up from then on (the
        state file's changes are the start's, and skipped after it)."""
        pending = asyncio.ensure_future(anext(self.bursts))
        for n in range(50):
            self.ws.state.write_text(f"{n}\n")
            done, _ = await asyncio.wait({pending}, timeout=0.2)
            if done:
                break
        await asyncio.wait_for(pending, 5)

    async def next(self, timeout: float = 5.0) -> list[str]:
        """The next burst, past any left of the start's writes."""
        while (paths := await asyncio.wait_for(anext(self.bursts), timeout)) == [str(self.ws.state)]:
            pass
        return paths


@pytest.fixture
async def bursts(tmp_path: Path) -> AsyncIterator[Bursts]:
    ws = Workspace(tmp_path)
    ws.archive_dir.mkdir(parents=True)
    made = Bursts(ws)
    await made.start()
    yield made
    await made.bursts.aclose()


async def test_a_change_of_a_loop_file_is_handed_over(bursts: Bursts) -> None:
    with bursts.ws.journal.open("a") as journal:
        journal.write("{}\n")
    assert await bursts.next() == [str(bursts.ws.journal)]


async def test_only_the_files_of_interest_count(bursts: Bursts) -> None:
    ws = bursts.ws
    (ws.root / "notes.md").write_text("the project's own file\n")
    (ws.root / "src").mkdir()
    (ws.root / "src" / "app.py").write_text("one level deeper: not watched\n")
    ws.control.write_text("{}\n")
    assert await bursts.next() == [str(ws.control)]


async def test_a_folder_that_never_rests_is_handed_over_in_time(bursts: Bursts) -> None:
    """A driver writing without pause (a new archive file every 5 ms) still reaches the screen:
    a burst is handed over after `DEBOUNCE_MS` at most, not once the folder rests."""
    ws = bursts.ws
    stop = asyncio.Event()

    async def writer() -> None:
        n = 0
        while not stop.is_set():
            (ws.archive_dir / f"{n}.json").write_text("{}\n")
            n += 1
            await asyncio.sleep(0.005)

    writing = asyncio.ensure_future(writer())
    try:
        await bursts.next(timeout=2.0)
        await bursts.next(timeout=2.0)
        assert not writing.done()
    finally:
        stop.set()
        await writing
