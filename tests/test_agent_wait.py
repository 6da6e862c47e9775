"""How the runner waits for its agent: woken by the kernel the moment the agent ends, never by
sleeping in growing steps between looks (a fast agent's iteration was a third waiting)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from loop.processes import agent


def _timed_waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The timeouts `Popen.wait` was called with (each such wait sleeps in steps)."""
    timed: list[float] = []
    real_wait = subprocess.Popen.wait

    def wait(self: subprocess.Popen[bytes], timeout: float | None = None) -> Any:
        if timeout is not None:
            timed.append(timeout)
        return real_wait(self, timeout)

    monkeypatch.setattr(subprocess.Popen, "wait", wait)
    return timed


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfd here")
def test_the_agents_end_wakes_the_runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    timed = _timed_waits(monkeypatch)
    looks: list[int] = []

    def interrupt() -> str | None:
        looks.append(1)
        return None

    result = agent.run(
        "sleep 0.3", "", tmp_path, tmp_path / "a.log", timeout=30, interrupt=interrupt, poll=0.05
    )
    assert result.exit_code == 0
    assert timed == []
    assert looks  # the loop still looked for a reason to stop it while it ran


@pytest.mark.parametrize("output", [True, False])
def test_without_a_pidfd_the_wait_still_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, output: bool
) -> None:
    """Where there is no pidfd, the agent's end is still learned: from its output's end while it
    has one, by `Popen.wait` with a timeout once it closed it (a daemon keeping it open aside)."""
    monkeypatch.delattr(os, "pidfd_open", raising=False)
    command = "sh -c 'sleep 0.2; echo done'" if output else "sh -c 'exec >&- 2>&-; sleep 0.2'"
    result = agent.run(
        command, "", tmp_path, tmp_path / "a.log", timeout=30, interrupt=lambda: None, poll=0.05
    )
    assert result.exit_code == 0
    assert not result.timed_out


def test_an_interrupt_still_stops_a_long_agent(tmp_path: Path) -> None:
    calls: list[int] = []

    def interrupt() -> str | None:
        calls.append(1)
        return "stop" if len(calls) > 2 else None

    result = agent.run(
        "sleep 30", "", tmp_path, tmp_path / "a.log", timeout=60, interrupt=interrupt, poll=0.05
    )
    assert result.interrupted == "stop"
    assert result.duration_s < 20
