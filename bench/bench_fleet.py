"""The fleet view over 50 workspaces: time to the first full screen, and CPU when idle.

50 workspaces below one folder (20 of loopdeck's own loops in git repositories, 15 ralph-loops,
15 continuous-session loops), opened as `loopdeck tui --scan DIR` would (the real app, headless,
in process). Time to first screen: from starting the app to the fleet table holding all 50
rows. Idle CPU: the process's CPU time over 20 s with nothing changing (the fleet `stat`s every
workspace each second and reads none again).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

IDLE_S = 20
WORKSPACES = 50


def build(root: Path) -> None:
    from tui import screenshots

    for key, value in screenshots.GIT_ENV.items():
        os.environ[key] = value
    for n in range(WORKSPACES):
        folder = root / f"ws{n:02d}"
        if n < 20:
            (screenshots.escalation if n % 5 == 0 else screenshots.running)(folder)
        elif n < 35:
            (folder / ".claude").mkdir(parents=True)
            (folder / ".claude" / "ralph-loop.local.md").write_text(screenshots.RALPH)
        else:
            (folder / "docs").mkdir(parents=True)
            state = {"status": "running", "currentSession": n, "maxSessions": 60, "queueSnapshot": ["a", "b"]}
            (folder / "docs" / ".continuous-session-state.json").write_text(json.dumps(state))


async def measure(root: Path) -> tuple[float, float, int]:
    from tui.monitor import FLEET, MonitorApp
    from tui.screens.fleet import FleetScreen

    start = time.perf_counter()
    app = MonitorApp([], scan_root=root, git=False, prompts=False)
    async with app.run_test(size=(120, 60)) as pilot:
        screen = app.get_screen(FLEET)
        assert isinstance(screen, FleetScreen)
        while len(screen.all_rows()) < WORKSPACES:
            await pilot.pause(0.005)
            if time.perf_counter() - start > 60:
                raise SystemExit("the fleet never showed 50 loops")
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
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        began = time.perf_counter()
        build(root)
        print(f"built {WORKSPACES} workspaces in {time.perf_counter() - began:.1f} s")
        first, cpu, polls = asyncio.run(measure(root))
        print(f"fleet of {WORKSPACES}: first full screen in {first * 1000:.0f} ms")
        print(f"fleet of {WORKSPACES}: idle CPU {cpu:.1f} % of a core over {IDLE_S} s ({polls} polls)")


if __name__ == "__main__":
    main()
