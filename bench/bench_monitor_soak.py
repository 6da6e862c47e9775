"""The real monitor, left running against a busy loop: memory, CPU and change-to-screen time.

`loopdeck tui DIR` runs in a pseudo-terminal (120x40); its output is fed to a terminal emulator
(pyte), so "on screen" means what a person would see. A driver in this process plays a runner
iterating about 5 times a second: journal events and a state write per step, a task-file edit
every 10 steps. Every 2 s a marker event goes into the journal, and the time until the marker
shows on the emulated screen is one change-to-screen sample.

    python bench/bench_monitor_soak.py [--seconds 600]

Targets (issue 12): RSS growth < 5 MB over the run, CPU < 15 % of a core, change-to-screen
p95 < 100 ms. RSS "start" is taken after a 5 s warm-up (start-up is not the steady state).
"""

from __future__ import annotations

import argparse
import fcntl
import os
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyte

from loop.demo import workspace
from loop.store.journal import Journal
from loop.store.paths import Workspace
from loop.store.state import LoopState, StateStore

COLS, ROWS = 120, 40
STEP_S = 0.2
MARK_EVERY_S = 2.0
WARMUP_S = 5.0
LOOPDECK = Path(sys.executable).with_name("loopdeck")


class Terminal:
    """A pty running the monitor, and the screen its output draws (read on a thread)."""

    def __init__(self, root: Path) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(COLS), "LINES": str(ROWS)}
        self.proc = subprocess.Popen(
            [str(LOOPDECK), "tui", str(root)],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            start_new_session=True,
        )
        os.close(slave)
        self.master = master
        self.screen = pyte.Screen(COLS, ROWS)
        self.stream = pyte.ByteStream(self.screen)
        self.lock = threading.Lock()
        self.updated = threading.Condition(self.lock)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            with self.updated:
                self.stream.feed(data)
                self.updated.notify_all()

    def wait_for(self, text: str, timeout: float) -> float | None:
        """Seconds until `text` is on the screen, or None."""
        start = time.perf_counter()
        deadline = start + timeout
        with self.updated:
            while True:
                if any(text in line for line in self.screen.display):
                    return time.perf_counter() - start
                left = deadline - time.perf_counter()
                if left <= 0:
                    return None
                self.updated.wait(left)

    def close(self) -> None:
        try:
            os.write(self.master, b"q")
            self.proc.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(5)
        os.close(self.master)


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Driver:
    """Plays a runner iterating every STEP_S: what the monitor sees of a busy loop."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.store = StateStore(ws)
        self.journal = Journal(ws.journal)
        self.stop = threading.Event()
        self.steps = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        state = LoopState.new("soak", task_file="TODO.md", check_github=False, check_tasks=False)
        state.status, state.driver, state.pid, state.max_iterations = "running", "runner", os.getpid(), 0
        self.store.write(state)
        self.journal.append("loop-started", 0, {"max_iterations": 0})
        self.thread.start()

    def _run(self) -> None:
        todo = self.ws.root / "TODO.md"
        while not self.stop.wait(STEP_S):
            self.steps += 1
            n = self.steps
            with self.store.locked():
                state = self.store.read()
                assert state is not None
                state.iteration = n
                self.store.write(state)
            self.journal.append("iteration-started", n, {"max_iterations": 0})
            self.journal.append("iteration-completed", n, {"duration_s": STEP_S})
            if n % 10 == 0:
                text = todo.read_text()
                flip = ("- [ ]", "- [x]") if n % 20 == 0 else ("- [x]", "- [ ]")
                todo.write_text(text.replace(*flip, 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=600.0, help="how long to soak (default 600)")
    args = parser.parse_args()
    if not LOOPDECK.exists():
        sys.exit(f"{LOOPDECK} not found: run from the project's virtual environment")
    with tempfile.TemporaryDirectory(prefix="loopdeck-soak-") as tmp:
        ws = Workspace(workspace.create(Path(tmp) / "repo", tasks=40))
        driver = Driver(ws)
        driver.start()
        term = Terminal(ws.root)
        try:
            if term.wait_for("Journal", 20) is None:
                sys.exit("the monitor never drew its journal panel")
            time.sleep(WARMUP_S)
            pid = term.proc.pid
            rss_start, cpu_start, t_start = rss_kb(pid), cpu_seconds(pid), time.monotonic()
            samples: list[float] = []
            rss_timeline: list[tuple[float, int]] = []
            missed = 0
            mark = 0
            while time.monotonic() - t_start < args.seconds:
                if not rss_timeline or time.monotonic() - t_start - rss_timeline[-1][0] >= args.seconds / 8:
                    rss_timeline.append((time.monotonic() - t_start, rss_kb(pid)))
                mark += 1
                text = f"soak-marker-{mark:05d}"
                driver.journal.append("warning", driver.steps, {"message": text})
                seen = term.wait_for(text, 5.0)
                if seen is None:
                    missed += 1
                else:
                    samples.append(seen * 1000)
                time.sleep(max(0.0, MARK_EVERY_S - (seen or 5.0)))
            elapsed = time.monotonic() - t_start
            cpu = (cpu_seconds(pid) - cpu_start) / elapsed * 100
            rss_end = rss_kb(pid)
        finally:
            driver.stop.set()
            driver.thread.join(5)
            term.close()
    ordered = sorted(samples) or [float("nan")]
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    print(f"monitor soak: {elapsed:.0f} s, driver {driver.steps} steps ({driver.steps / elapsed:.1f}/s)")
    print(
        f"RSS start {rss_start / 1024:.1f} MB, end {rss_end / 1024:.1f} MB, "
        f"growth {(rss_end - rss_start) / 1024:+.1f} MB   target < 5 MB"
    )
    timeline = ", ".join(f"{at:.0f} s {kb / 1024:.1f}" for at, kb in rss_timeline)
    print(f"RSS along the run (MB): {timeline}, end {rss_end / 1024:.1f}")
    print(f"CPU {cpu:.1f} % of a core   target < 15 %")
    print(
        f"change → screen ({len(samples)} markers, {missed} missed): p50 {statistics.median(ordered):.0f} ms,"
        f" p95 {p95:.0f} ms, max {ordered[-1]:.0f} ms   target p95 < 100 ms"
    )


if __name__ == "__main__":
    main()
