"""The monitor sets glibc's allocator up for a long run, and leaves alone one a person set up."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import pytest

from tui import allocator, cli


class FakeLibc:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return 1


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GLIBC_TUNABLES", "MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_the_allocator_is_set_for_a_long_run(clean_env: None) -> None:
    libc = FakeLibc()
    assert allocator.tune(libc)
    assert libc.calls == [
        (allocator.M_MMAP_THRESHOLD, 128 * 1024),
        (allocator.M_TRIM_THRESHOLD, 128 * 1024),
        (allocator.M_ARENA_MAX, 1),
    ]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_an_allocator_a_person_set_up_is_left_alone(clean_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    libc = FakeLibc()
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert not allocator.tune(libc)
    monkeypatch.delenv("MALLOC_ARENA_MAX")
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2")
    assert not allocator.tune(libc)
    assert libc.calls == []


def test_a_c_library_without_mallopt_is_no_error(clean_env: None) -> None:
    assert not allocator.tune(object())


def test_the_monitor_sets_the_allocator_before_it_starts(
    clean_env: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    order: list[str] = []

    class App:
        def run(self) -> None:
            order.append("run")

    def tune(libc: Any = None) -> bool:
        order.append("tune")
        return True

    monkeypatch.setattr(allocator, "tune", tune)
    monkeypatch.setattr(cli, "monitor_app", lambda args: App())
    monkeypatch.setattr(cli, "has_terminal", lambda: True)  # as in a person's terminal
    assert cli.cmd_tui(argparse.Namespace(temporal=None)) == 0
    assert order == ["tune", "run"]
