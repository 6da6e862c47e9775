"""The fleet view over many workspaces: time to the first full screen, and CPU when idle.

    python bench/bench_fleet.py [--workspaces 50]

Workspaces below one folder (two in five loopdeck's own loops in git repositories, three in
ten ralph-loops, the rest continuous-session loops), opened as `loopdeck tui --scan DIR`
would (the real app, headless, in process). Time to first screen: from starting the app to
the fleet table holding all rows. Idle CPU: the process's CPU time over 20 s with nothing
changing (the fleet `stat`s every workspace each second and reads none again). Target: idle
< 1 % of a core at 200 workspaces. The machine's load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools import screenshots
from tui.monitor import FLEET, MonitorApp
from tui.screens.fleet import FleetScreen

IDLE_S = 20


def load() -> str:
    return "load " + " ".join(Path("/proc/loadavg").read_text().split()[:3])


def build(root: Path, count: int) -> None:
    for key, value in screenshots.GIT_ENV.items():
        os.environ[key] = value
    for n in range(count):
        folder = root / f"ws{n:03d}"
        kind = n % 10
        if kind < 4:
            (screenshots.escalation if n % 5 == 0 else screenshots.running)(folder)
        elif kind < 7:
            (folder / ".claude").mkdir(parents=True)
            (folder / ".claude" / "ralph-loop.local.md").write_text(screenshots.RALPH)
        else:
            (folder / "docs").mkdir(parents=True)
            state = {"status": "running", "currentSession": n, "maxSessions": 60, "queueSnapshot": ["a", "b"]}
            (folder / "docs" / ".continuous-session-state.json").write_text(json.dumps(state))


async def measure(root: Path, count: int) -> tuple[float, float, int]:
    start = time.perf_counter()
    app = MonitorApp([], scan_root=root, git=False, prompts=False)
    async with app.run_test(size=(120, 60)) as pilot:
        screen = app.get_screen(FLEET)
        assert isinstance(screen, FleetScreen)
        while len(screen.all_rows()) < count:
            await pilot.pause(0.005)
            if time.perf_counter() - start > 120:
                raise SystemExit(f"the fleet never showed {count} loops")
        first = time.perf_counter() - start
        await asyncio.sleep(2)  # start-up is not idle
        reads = screen.reads
        before = os.times()
        wall = time.perf_counter()
        await asyncio.sleep(IDLE_S)
        after = os.times()
        cpu = (after.user - before.user + after.system - before.system) / (time.perf_counter() - wall)
        return first, cpu * 100, screen.reads - reads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspaces", type=int, default=50, help="how many workspaces the fleet shows")
    count = parser.parse_args().workspaces
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        began = time.perf_counter()
        build(root, count)
        print(f"built {count} workspaces in {time.perf_counter() - began:.1f} s")
        first, cpu, polls = asyncio.run(measure(root, count))
        print(f"fleet of {count}: first full screen in {first * 1000:.0f} ms   ({load()})")
        print(
            f"fleet of {count}: idle CPU {cpu:.2f} % of a core over {IDLE_S} s ({polls} polls)"
            f"   target < 1 %   ({load()})"
        )


if __name__ == "__main__":
    main()
