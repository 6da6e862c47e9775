"""What the monitor does with every change it is told of keeps no new string in the
interpreter's table of interned strings. A `Path` interns every part of its name, and the
runner's temporary files (a random name per write) went through one several times an
iteration: the table filled with dead entries and was rebuilt, once at double its size, a
megabyte at once in a long run's memory."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest

from loop.drivers.classify import looks_like_driver
from loop.store.paths import Workspace
from loop.store.state import StateStore
from loop.views.snapshot import read
from tests.test_tui import make
from tui.watch import interesting, watch_paths
from tui.widgets.output import Followed, followed


def interned_during(monkeypatch: pytest.MonkeyPatch, act: Callable[[], object]) -> tuple[object, list[str]]:
    """What `act` returns, and the strings interned meanwhile."""
    seen: list[str] = []
    real = sys.intern

    def recording(text: str) -> str:
        seen.append(text)
        return real(text)

    monkeypatch.setattr(sys, "intern", recording)
    return act(), seen


def test_a_loop_file_change_is_told_apart_without_interning_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = Workspace(tmp_path)
    ws.claude_dir.mkdir()
    tasks = tmp_path / "tasks" / "the-list"  # Claude Code's tasks: a folder per list
    tasks.mkdir(parents=True)
    folders, files = watch_paths(ws, None)
    accept = interesting(folders | {tasks}, files)
    temp = str(ws.claude_dir / ".orchestrator-loop.local.md.4242.9f8e7d6c.tmp")
    cases = {
        str(ws.state): True,
        str(tasks / "3.json"): True,
        str(tmp_path / "src" / "app.py"): False,
        temp: False,
    }
    for path, wanted in cases.items():
        assert interned_during(monkeypatch, partial(accept, None, path)) == (wanted, []), path


def test_the_driver_check_interns_no_part_of_a_command_line(monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["/usr/bin/python3", "/home/someone/.venv/bin/loopdeck", "-C", "/tmp/ws-9f8e7d6c", "run", "go"]
    assert interned_during(monkeypatch, lambda: looks_like_driver(argv, "python3", "runner")) == (True, [])
    folder = ["/opt/tools/loopdeck/", "run"]
    assert interned_during(monkeypatch, lambda: looks_like_driver(folder, "x", "runner")) == (True, [])


def test_the_output_panel_finds_a_new_iterations_log_without_interning_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every iteration's log has a name of its own: a `Path` to it kept that name interned for
    good, one more for each iteration the panel moved to."""
    ws = make(tmp_path, "running")
    state = StateStore(ws).read()
    assert state is not None
    logs = ws.iteration_logs(state.started_at, state.loop_id)
    log = logs / "0012.log"
    log.write_text("twelve\n")
    snapshot = read(ws)
    found, interned = interned_during(monkeypatch, lambda: followed(Workspace(ws.root), snapshot))
    assert "0012.log" not in interned
    assert isinstance(found, Followed) and found.path == str(log)
    del logs, log  # nothing holds the loop's folder name now but the state
    added = new_entries_during(monkeypatch)
    assert followed(Workspace(ws.root), snapshot) == found
    assert added == []  # nor its folder's name, made again on each look


def new_entries_during(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """From now on, the strings that `sys.intern` adds to the table: those equal to none in it.
    A string interned again while an equal one is alive takes no entry; one interned anew, even
    a name interned before and since let go, takes one for good (a dead entry stays until the
    table is rebuilt). A test of a path made again and again looks at these."""
    added: list[str] = []
    real = sys.intern

    def recording(text: str) -> str:
        copy = (text + ".")[:-1]  # an equal string of its own: interned as itself if none is
        if real(copy) is copy and copy is not text:
            added.append(text)
        return real(text)

    monkeypatch.setattr(sys, "intern", recording)
    return added


async def test_the_monitors_snapshots_take_no_new_entry_in_the_table_of_interned_strings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The monitor reads and shows a snapshot several times a second for days. Every one that
    made a `Path` of a name nothing else holds (the other tools' loop files, looked for and not
    there) interned that name anew: 25 entries a second at 5 iterations a second, and after a
    few minutes the table was rebuilt at double its size (+940 KB)."""
    from loop.store.journal import Journal
    from tests.test_tui import app
    from tools import screenshots

    ws = make(tmp_path, "running")
    monitor = app(ws, watch=False, git=False)
    async with monitor.run_test(size=(120, 40)) as pilot:
        await screenshots.settle(monitor)

        async def one_more(n: int) -> None:
            shown = monitor.snapshots_shown
            Journal(ws.journal).append("iteration-started", 13 + n, {"max_iterations": 50})
            monitor.load_snapshot()
            deadline = time.monotonic() + 10
            while monitor.snapshots_shown == shown:
                assert time.monotonic() < deadline, "no snapshot shown"
                await pilot.pause(0.01)

        await one_more(0)
        added = new_entries_during(monkeypatch)
        for n in range(1, 6):
            await one_more(n)
    assert not added, sorted(set(added))
