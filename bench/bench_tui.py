"""The monitor: file-change-to-screen latency, and its CPU when idle and while the demo runs.

Latency: 100 edits of the task file; for each, the time until the Task sources panel shows the
new count (the real app with real watchfiles, headless). CPU: the real `loopdeck tui` in a tmux
pseudo-terminal, its process's CPU time over 60 s (after 5 s of start-up), first with nothing
happening, then while the demo's runner works (1–2 s per iteration). Targets: p95 < 100 ms; CPU
< 1 % of a core when idle, < 5 % while the demo runs.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loop.demo import workspace
from loop.store.paths import Workspace

SECONDS = 60


async def latency(root: Path) -> list[float]:
    from tui.app import LoopdeckApp
    from tui.screenshots import running, settle
    from tui.widgets.sources import SourcesPanel

    ws = running(root)
    todo = ws.root / "TODO.md"
    lines = ["# Tasks"] + [f"- [ ] task {i}" for i in range(120)]
    todo.write_text("\n".join(lines) + "\n")
    app = LoopdeckApp(ws, git=False, prompts=False)
    times: list[float] = []
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app)
        await asyncio.sleep(0.5)
        panel = app.query_one(SourcesPanel)
        for n in range(100):
            lines[1 + n] = lines[1 + n].replace("[ ]", "[x]")
            want = f"{120 - n - 1} open"
            start = time.perf_counter()
            todo.write_text("\n".join(lines) + "\n")
            while want not in str(panel.border_subtitle):
                await pilot.pause(0.001)
                if time.perf_counter() - start > 5:
                    raise SystemExit(f"change {n} never reached the screen")
            times.append((time.perf_counter() - start) * 1000)
            await asyncio.sleep(0.05)
    return times


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tui_pid(session: str) -> int:
    out = subprocess.run(
        ["tmux", "list-panes", "-t", session, "-F", "#{pane_pid}"], capture_output=True, text=True, check=True
    ).stdout.split()
    return int(out[0])


def cpu_percent(root: Path, session: str) -> float:
    loopdeck = Path(sys.executable).with_name("loopdeck")
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "120", "-y", "40", f"exec {loopdeck} tui {root}"],
        check=True,
    )
    try:
        time.sleep(5)  # start-up is not idle
        pid = tui_pid(session)
        before, start = cpu_seconds(pid), time.monotonic()
        time.sleep(SECONDS)
        used = cpu_seconds(pid) - before
        return used / (time.monotonic() - start) * 100
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        times = asyncio.run(latency(Path(tmp) / "latency"))
        ordered = sorted(times)
        print(
            f"file change → screen, 100 changes: p50 {statistics.median(ordered):.0f} ms, "
            f"p95 {ordered[94]:.0f} ms, max {ordered[-1]:.0f} ms   target p95 < 100 ms"
        )
        if not shutil.which("tmux"):
            print("CPU: tmux not found; skipped")
            return
        idle = workspace.create(Path(tmp) / "idle", tasks=8)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "loop.cli",
                "-C",
                str(idle),
                "start",
                "idle loop",
                "--task-file",
                "TODO.md",
                "--no-github",
                "--no-tasks",
            ],
            check=True,
            capture_output=True,
        )
        print(
            f"CPU over {SECONDS} s, idle loop: {cpu_percent(idle, 'ld-idle'):.2f} % of a core   target < 1 %",
            flush=True,
        )
        demo = workspace.create(Path(tmp) / "demo", tasks=40)
        runner = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "loop.cli",
                "-C",
                str(demo),
                "run",
                "bench",
                "--task-file",
                "TODO.md",
                "--agent",
                workspace.agent_command("--sleep", "1", "2"),
                "--no-github",
                "--no-tasks",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            while not Workspace(demo).state.exists():
                time.sleep(0.05)
            busy = cpu_percent(demo, "ld-busy")
            print(
                f"CPU over {SECONDS} s while the demo runs (1–2 s per iteration): {busy:.2f} % of a core"
                "   target < 5 %"
            )
        finally:
            runner.terminate()
            runner.wait(30)


if __name__ == "__main__":
    main()
