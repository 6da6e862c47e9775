"""The monitor's own inotify watch (`tui.inotify`): a burst of changes is handed over once,
and never later than the burst's limit, however busy the folder stays."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tui import inotify

pytestmark = pytest.mark.skipif(not inotify.available(), reason="inotify is Linux's")


async def test_a_folder_that_never_rests_is_handed_over_within_the_bursts_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    busy = tmp_path / "state.json"
    waited: list[float] = []
    sleep = asyncio.sleep

    async def write_and_wait(seconds: float) -> None:  # every pause of the watch sees another write
        busy.write_text(str(len(waited)))
        waited.append(seconds)
        await sleep(seconds)

    monkeypatch.setattr(asyncio, "sleep", write_and_wait)
    async with inotify.Watch([tmp_path]) as watch:
        bursts = watch.changes()
        pending = asyncio.ensure_future(anext(bursts))
        busy.write_text("start")  # the kernel keeps it: the folder is watched from `Watch()` on
        assert await asyncio.wait_for(pending, 5) == [str(busy)]
        await bursts.aclose()
    assert len(waited) >= 2, "the burst went on while the folder changed"
    assert sum(waited) <= inotify.BURST_S + 0.001, "no pause runs past the burst's limit"
