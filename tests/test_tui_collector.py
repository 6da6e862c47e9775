"""The monitor a person runs sets the garbage collector for days: what it holds once its first
screen is up is frozen out of every later collection. Apps started by the hundred (these tests)
freeze nothing."""

from __future__ import annotations

import argparse
import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.test_tui import app, make, until
from tui import allocator, cli, collector

SIZE = (120, 40)


@pytest.fixture
def unfrozen() -> Iterator[None]:
    """Whatever a test froze goes back to the collector's care afterwards."""
    assert gc.get_freeze_count() == 0
    try:
        yield
    finally:
        gc.unfreeze()


def test_settling_freezes_what_is_held(unfrozen: None) -> None:
    held = [object() for _ in range(10)]
    collector.settle()
    assert gc.get_freeze_count() >= len(held)


async def test_the_monitor_freezes_once_its_first_snapshot_is_on_screen(
    tmp_path: Path, unfrozen: None
) -> None:
    monitor = app(make(tmp_path, "running"), git=False)
    monitor.settles = True
    async with monitor.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: gc.get_freeze_count() > 0)
        assert monitor.snapshots_shown >= 1


async def test_an_app_not_set_to_settle_freezes_nothing(tmp_path: Path, unfrozen: None) -> None:
    monitor = app(make(tmp_path, "running"), git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: monitor.snapshots_shown >= 1)
        await pilot.pause()
        assert gc.get_freeze_count() == 0


def test_the_monitor_a_person_starts_is_set_to_settle(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[bool] = []

    class App:
        settles = False

        def run(self) -> None:
            started.append(self.settles)

    def tune(libc: Any = None) -> bool:
        return True

    monkeypatch.setattr(allocator, "tune", tune)
    monkeypatch.setattr(cli, "monitor_app", lambda args: App())
    monkeypatch.setattr(cli, "has_terminal", lambda: True)  # as in a person's terminal
    assert cli.cmd_tui(argparse.Namespace(temporal=None)) == 0
    assert started == [True]
