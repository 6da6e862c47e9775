"""The monitor: file-change-to-screen latency, and its CPU when idle and while the demo runs.

Latency (the real app, headless): 100 journal lines, 50 ms apart, each timed until the journal
panel shows it; then 30 edits of the task file, 1 s apart, each timed until the Task sources
panel shows the new count (edits closer together are paced on purpose: `tui.pace`). CPU: the
real `loopdeck tui` in a tmux pseudo-terminal, its process's CPU time over 60 s (after 5 s of
start-up), first with nothing happening, then while the demo's runner works (1–2 s per
iteration). Targets: p95 < 100 ms; CPU < 1 % of a core when idle, < 5 % while the demo runs.
The machine's load average is printed with each figure.
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
from collections.abc import Callable
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from textual.widgets import RichLog

from loop.demo import workspace
from loop.store.journal import Journal
from loop.store.paths import Workspace
from tools.screenshots import running, settle
from tui.app import LoopdeckApp
from tui.widgets.sources import SourcesPanel

SECONDS = 60


async def latency(root: Path) -> tuple[list[float], list[float]]:
    """Milliseconds from each change to the screen: journal lines, then task file edits."""
    ws = running(root)
    todo = ws.root / "TODO.md"
    lines = ["# Tasks"] + [f"- [ ] task {i}" for i in range(120)]
    todo.write_text("\n".join(lines) + "\n")
    journal = Journal(ws.journal)
    app = LoopdeckApp(ws, git=False, prompts=False)
    marks: list[float] = []
    edits: list[float] = []

    def mark(text: str) -> None:
        journal.append("warning", None, {"message": text})

    def marked(log: RichLog, text: str) -> bool:
        return any(text in line.text for line in log.lines[-5:])

    def shows(panel: SourcesPanel, want: str) -> bool:
        return want in str(panel.border_subtitle)

    async def timed(change: Callable[[], object], shown: Callable[[], bool], what: str) -> float:
        start = time.perf_counter()
        change()
        while not shown():
            await pilot.pause(0.001)
            if time.perf_counter() - start > 5:
                raise SystemExit(f"{what} never reached the screen")
        return (time.perf_counter() - start) * 1000

    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app)
        await asyncio.sleep(0.5)
        log = app.query_one("#journal-lines", RichLog)
        for n in range(100):
            text = f"bench-mark-{n:03d}"
            marks.append(await timed(partial(mark, text), partial(marked, log, text), text))
            await asyncio.sleep(0.05)
        panel = app.query_one(SourcesPanel)
        for n in range(30):
            lines[1 + n] = lines[1 + n].replace("[ ]", "[x]")
            body = "\n".join(lines) + "\n"
            want = f"{120 - n - 1} open"
            edits.append(
                await timed(partial(todo.write_text, body), partial(shows, panel, want), f"edit {n}")
            )
            await asyncio.sleep(1.0)
    return marks, edits


def percentiles(times: list[float]) -> str:
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return f"p50 {statistics.median(ordered):.0f} ms, p95 {p95:.0f} ms, max {ordered[-1]:.0f} ms"


def load() -> str:
    return "load " + " ".join(Path("/proc/loadavg").read_text().split()[:3])


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
        marks, edits = asyncio.run(latency(Path(tmp) / "latency"))
        print(f"journal line → screen, 100 lines: {percentiles(marks)}   target p95 < 100 ms   ({load()})")
        print(f"task file edit → screen, 30 edits: {percentiles(edits)}   target p95 < 100 ms   ({load()})")
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
            f"CPU over {SECONDS} s, idle loop: {cpu_percent(idle, 'ld-idle'):.2f} % of a core   target < 1 %"
            f"   ({load()})",
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
                f"   target < 5 %   ({load()})"
            )
        finally:
            runner.terminate()
            runner.wait(30)


if __name__ == "__main__":
    main()
