"""The archive of finished loops: the newest found from the folders' names, in one listing."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from loop.store.archive import archive, folder_name, latest
from loop.store.paths import Workspace
from loop.store.state import LoopState


def _archived(ws: Workspace, started_at: str, outcome: str = "completed") -> Path:
    state = LoopState.new("archived loop", started_at=started_at)
    return archive(ws, state, outcome, {"reason": f"{outcome} at {started_at}"})


def test_the_newest_is_the_latest_start_not_the_latest_write(ws: Workspace) -> None:
    newer = _archived(ws, "2026-03-02T08:00:00+00:00")
    older = _archived(ws, "2026-03-01T08:00:00+00:00")  # written last: its summary is the newest file
    os.utime(newer / "summary.json", (1_000_000, 1_000_000))
    assert latest(ws) == newer
    assert older.name.startswith(folder_name("2026-03-01T08:00:00+00:00") + "-")  # then the loop's id


def test_a_second_loop_started_in_the_same_second_comes_after_the_first(ws: Workspace) -> None:
    first = _archived(ws, "2026-03-01T08:00:00+00:00", "replaced by a new loop")
    second = _archived(ws, "2026-03-01T08:00:00+00:00")
    assert first.name != second.name.removesuffix(".2") and second.name.endswith(".2")
    os.utime(second / "summary.json", (1_000_000, 1_000_000))
    assert latest(ws) == second


def test_offsets_and_odd_names_are_ordered_by_the_moment(ws: Workspace) -> None:
    utc = _archived(ws, "2026-03-01T08:00:00+00:00")
    _archived(ws, "2026-03-01T09:30:00+02:00")  # 07:30 UTC: older than the one above
    (ws.archive_dir / "unknown").mkdir()
    (ws.archive_dir / "unknown" / "summary.json").write_text("{}")
    (ws.archive_dir / "notes.txt").write_text("a person's file")
    assert latest(ws) == utc


def test_a_newest_folder_without_a_summary_is_passed_over(ws: Workspace) -> None:
    kept = _archived(ws, "2026-03-01T08:00:00+00:00")
    (ws.archive_dir / folder_name("2026-04-01T08:00:00+00:00")).mkdir()
    assert latest(ws) == kept


def test_no_archive_folder(ws: Workspace) -> None:
    assert latest(ws) is None
    (ws.claude_dir / "loops").write_text("a file where the folder goes")
    assert latest(ws) is None


def _count_archive_reads(monkeypatch: pytest.MonkeyPatch, ws: Workspace) -> dict[str, int]:
    """Counts the listings of the archive folder and the looks (stat) inside its folders."""
    loops = str(ws.archive_dir)
    seen = {"listings": 0, "looks": 0}

    def counting(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(path: Any = ".", *args: Any, **kwargs: Any) -> Any:
            text = os.fsdecode(path) if isinstance(path, str | bytes | os.PathLike) else ""
            if name in ("scandir", "listdir") and text.rstrip("/") == loops:
                seen["listings"] += 1
            elif name in ("stat", "lstat") and text.startswith(loops + "/"):
                seen["looks"] += 1
            return real(path, *args, **kwargs)

        return call

    for name in ("scandir", "listdir", "stat", "lstat"):
        monkeypatch.setattr(os, name, counting(name, getattr(os, name)))
    return seen


def test_status_lists_the_archive_once_however_many_it_holds(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tui.cli import main

    for day in range(1, 29):
        for hour in range(0, 24, 4):
            _archived(ws, f"2026-02-{day:02d}T{hour:02d}:00:00+00:00")
    newest = _archived(ws, "2026-03-01T00:00:00+00:00", "stopped")
    seen = _count_archive_reads(monkeypatch, ws)
    assert main(["-C", str(ws.root), "status"]) == 0
    out = capsys.readouterr().out
    assert "last loop:   stopped" in out and str(newest) in out
    assert seen["listings"] == 1
    assert seen["looks"] <= 2  # the newest one's summary, not one per archive

    seen.update(listings=0, looks=0)
    assert main(["-C", str(ws.root), "status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["last_archive"]["folder"] == str(newest)
    assert seen["listings"] == 1
    assert seen["looks"] <= 2


def test_of_the_usual_names_only_the_greatest_is_read_as_a_moment(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ten thousand archives cost a listing, not ten thousand parses of a name: names of the
    usual shape are compared as strings, and only the newest candidates are worked out."""
    from loop.store import archive as archive_module

    for n in range(120):
        (ws.archive_dir / folder_name(f"2026-02-01T{n // 60:02d}:{n % 60:02d}:00+00:00")).mkdir(parents=True)
    newest = _archived(ws, "2026-02-01T05:00:00+00:00")
    same_second = _archived(ws, "2026-02-01T05:00:00+00:00", "replaced by a new loop")
    (ws.archive_dir / "zzzz-zz-zzTzz-zz-zz+00-00").mkdir()  # the usual length, not a moment
    real_order = archive_module._order
    worked_out: list[str] = []

    def order(name: str) -> Any:
        worked_out.append(name)
        return real_order(name)

    monkeypatch.setattr(archive_module, "_order", order)
    assert (
        latest(ws) == same_second and same_second.name.endswith(".2") and newest.name != same_second.name[:-2]
    )
    assert len(worked_out) <= 4, worked_out
