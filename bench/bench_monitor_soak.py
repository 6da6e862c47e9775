"""The real monitor watching the real runner: CPU, memory and change-to-screen, each with its
reference measured in the same run.

A git repository (the demo's) with a long checklist; `loopdeck run` drives it with a scripted
agent (a shell script: it waits for its tick, ticks the first open box with sed and says two
lines), so the monitor sees what a real loop makes: the runner's state writes, journal lines,
iteration logs, the task file and git changing every iteration. `loopdeck tui DIR` runs in a
pseudo-terminal (120x40) whose output feeds a terminal emulator (pyte): "on screen" is what a
person would see. Beside it, in a terminal of its own, the reference: a Textual app of one
Static and a Footer, measured over the same windows.

    python bench/bench_monitor_soak.py [--first 1000] [--iterations 10000] [--seconds 60]

1. the runner goes as fast as it can to iteration `--first` (1,000 logs and archives of work);
   RSS of both apps;
2. 5 iterations a second for `--seconds`: CPU of both, the runner's work alone on screen; then
   for `--marks` seconds more, every 2 s a marker line goes into the journal and the time until
   it is on the emulated screen is one change-to-screen sample (each marker is one more change
   to show: the CPU of this window, printed beside, is not the runner's alone);
3. 1 iteration a second, the same;
4. the loop paused (the runner waits), `--idle` seconds: CPU of both;
5. as fast as it can again to iteration `--iterations`; RSS of both.

Targets: CPU < 10 % of a core at 5 Hz, < 3 % at 1 Hz, idle < 1 %; RSS growth < 2 MB from
iteration 1,000 to 10,000; change → screen p95 < 100 ms at 5 Hz. Figures are printed, never
asserted; the machine's load average is printed with them.
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
from loop.store.state import StateError, StateStore

COLS, ROWS = 120, 40
MARK_EVERY_S = 2.0
LOOPDECK = Path(sys.executable).with_name("loopdeck")

AGENT = r"""#!/bin/sh
# The soak's agent: waits for its tick (the period, in ms, is in .claude/soak-period; 0 = none),
# ticks the first open box of TODO.md, says so.
cat > /dev/null
period=$(cat .claude/soak-period 2>/dev/null || echo 0)
if [ "$period" -gt 0 ]; then
  now=$(date +%s%N)
  step=$((period * 1000000))
  wait=$((step - now % step))
  sleep "$(printf '%d.%09d' $((wait / 1000000000)) $((wait % 1000000000)))"
fi
sed -i '0,/- \[ \]/s//- [x]/' TODO.md
echo "Ticked the next open box of TODO.md."
echo "Checked the work: all good."
"""

REFERENCE = """
from textual.app import App
from textual.widgets import Footer, Static

class Reference(App):
    BINDINGS = [("q", "quit", "Quit")]

    def compose(self):
        yield Static("the reference: a Static and a Footer")
        yield Footer()

Reference().run()
"""


class Terminal:
    """A pty running `argv`, and the screen its output draws (read on a thread)."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        env = {**env, "TERM": "xterm-256color", "COLUMNS": str(COLS), "LINES": str(ROWS)}
        self.proc = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True
        )
        os.close(slave)
        self.master = master
        self.screen = pyte.Screen(COLS, ROWS)
        self.stream = pyte.ByteStream(self.screen)
        self.updated = threading.Condition(threading.Lock())
        self.arrived = 0.0
        """When the bytes last fed to the emulator were read off the pty."""
        self.lag: list[float] = []
        """How long the emulator took over each read (the bench's own cost, not the app's)."""
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
            arrived = time.perf_counter()
            with self.updated:
                self.stream.feed(data)
                self.arrived = arrived
                self.lag.append(time.perf_counter() - arrived)
                self.updated.notify_all()

    def wait_for(self, text: str, timeout: float) -> float | None:
        """Seconds until `text` is on the screen, or None: until the app wrote the bytes that
        put it there (a real terminal draws them at once; pyte, in this process, takes a while
        of its own, which is not the app's)."""
        start = time.perf_counter()
        deadline = start + timeout
        with self.updated:
            while True:
                if any(text in line for line in self.screen.display):
                    return max(0.0, self.arrived - start)
                left = deadline - time.perf_counter()
                if left <= 0:
                    return None
                self.updated.wait(left)

    def check(self, what: str) -> None:
        """Stop the bench, with the app's last screen, if the app ended before it was asked to."""
        if self.proc.poll() is not None:
            with self.updated:
                screen = "\n".join(line.rstrip() for line in self.screen.display)
            sys.exit(f"the {what} ended by itself (exit {self.proc.returncode}); its last screen:\n{screen}")

    def close(self) -> None:
        try:
            os.write(self.master, b"q")
            self.proc.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(5)
        os.close(self.master)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load() -> str:
    return "load " + " ".join(Path("/proc/loadavg").read_text().split()[:3])


class Soak:
    def __init__(self, tmp: Path, tasks: int) -> None:
        self.root = workspace.create(tmp / "repo", tasks=tasks)
        self.ws = Workspace(self.root)
        # In the workspace, not in the environment: the runner hands its agent only the
        # variables it allows; loopdeck's own folder changes nothing git sees.
        self.period = self.ws.claude_dir / "soak-period"
        self.period.parent.mkdir(exist_ok=True)
        self.period.write_text("0")
        agent = tmp / "soak-agent"
        agent.write_text(AGENT)
        agent.chmod(0o755)
        trust = tmp / "trust"
        trust.mkdir(mode=0o700)
        self.env = {**os.environ, "LOOPDECK_TRUST_HOME": str(trust)}
        argv = [str(LOOPDECK), "-C", str(self.root), "run", "soak: tick every box", "--agent", str(agent)]
        argv += ["--agent-format", "text", "--task-file", "TODO.md", "--max-iterations", "0"]
        argv += ["--no-github", "--no-tasks", "--headless", "--iteration-timeout", "60"]
        self.log = (tmp / "runner.log").open("wb")
        self.runner = subprocess.Popen(argv, env=self.env, stdout=self.log, stderr=subprocess.STDOUT)
        self.journal = Journal(self.ws.journal)

    def iteration(self) -> int:
        try:
            state = StateStore(self.ws).read()
        except StateError:
            return 0
        return state.iteration if state is not None else 0

    def pace(self, per_second: float) -> None:
        self.period.write_text(str(int(1000 / per_second)) if per_second else "0")

    def until(self, iteration: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.iteration() < iteration:
            if self.runner.poll() is not None:
                raise SystemExit(f"the runner ended (exit {self.runner.returncode}); see its log")
            if time.monotonic() > deadline:
                raise SystemExit(f"iteration {iteration} not reached in {timeout:.0f} s")
            time.sleep(0.25)

    def steer(self, verb: str, *extra: str) -> None:
        done = subprocess.run(
            [str(LOOPDECK), "-C", str(self.root), verb, *extra], env=self.env, capture_output=True, text=True
        )
        if done.returncode != 0:
            raise SystemExit(f"`loopdeck {verb}` failed: {(done.stderr or done.stdout).strip()}")

    def stop(self) -> None:
        if self.runner.poll() is None:
            self.runner.send_signal(signal.SIGTERM)
            try:
                self.runner.wait(30)
            except subprocess.TimeoutExpired:
                self.runner.kill()
                self.runner.wait()
        self.log.close()


def spy(pid: int, seconds: float, out: Path) -> subprocess.Popen[bytes] | None:
    """py-spy recording `pid` for `seconds` (sampling without stopping it), if py-spy is here."""
    exe = Path(sys.executable).with_name("py-spy")
    if not exe.exists():
        print("py-spy not found next to this Python: no profile", file=sys.stderr)
        return None
    argv = [str(exe), "record", "--pid", str(pid), "--duration", str(int(seconds)), "--rate", "200"]
    argv += ["--format", "raw", "--nonblocking", "--output", str(out)]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def window(
    soak: Soak,
    monitor: Terminal,
    reference: Terminal,
    seconds: float,
    marks: bool,
    profile: Path | None = None,
) -> dict[str, float]:
    """CPU (% of a core) of both apps over `seconds`; with `marks`, change-to-screen samples."""
    spying = spy(monitor.proc.pid, seconds, profile) if profile is not None else None
    pids = {"monitor": monitor.proc.pid, "reference": reference.proc.pid}
    before = {k: cpu_seconds(p) for k, p in pids.items()}
    fed = len(monitor.lag)
    first = soak.iteration()
    start = time.monotonic()
    samples: list[float] = []
    missed = 0
    mark = 0
    while time.monotonic() - start < seconds:
        if not marks:
            time.sleep(min(1.0, max(0.0, seconds - (time.monotonic() - start))))
            continue
        mark += 1
        text = f"soak-marker-{os.getpid()}-{mark:05d}"
        soak.journal.append("warning", None, {"message": text})
        seen = monitor.wait_for(text, 5.0)
        if seen is None:
            missed += 1
        else:
            samples.append(seen * 1000)
        time.sleep(max(0.0, MARK_EVERY_S - (seen or 5.0)))
    elapsed = time.monotonic() - start
    monitor.check("monitor")
    found = {k: (cpu_seconds(p) - before[k]) / elapsed * 100 for k, p in pids.items()}
    if spying is not None:
        spying.wait()
    found["rate"] = (soak.iteration() - first) / elapsed
    if samples:
        ordered = sorted(samples)
        found["p50"] = statistics.median(ordered)
        found["p95"] = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
        found["samples"] = len(samples)
        lags = sorted(monitor.lag[fed:]) or [0.0]
        found["lag95"] = lags[min(len(lags) - 1, int(len(lags) * 0.95))] * 1000
    found["missed"] = missed
    return found


class Rows(list[str]):
    """The figures, each printed as it comes too: a bench stopped half-way keeps what it had."""

    def append(self, row: str) -> None:
        print("  " + row, file=sys.stderr, flush=True)
        super().append(row)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--first", type=int, default=1000, help="iteration of the first RSS reading")
    parser.add_argument("--iterations", type=int, default=10000, help="iteration of the last RSS reading")
    parser.add_argument("--seconds", type=float, default=60.0, help="each CPU window at 5 and 1 Hz")
    parser.add_argument(
        "--marks", type=float, default=0.0, help="each change-to-screen window after it (default: --seconds)"
    )
    parser.add_argument("--idle", type=float, default=30.0, help="the idle window")
    parser.add_argument(
        "--profile", metavar="DIR", help="py-spy the monitor in each window (collapsed stacks into DIR)"
    )
    args = parser.parse_args()
    if not LOOPDECK.exists():
        sys.exit(f"{LOOPDECK} not found: run from the project's virtual environment")
    # Stopped with SIGTERM, the bench still ends its apps (`finally` below): an app whose
    # terminal vanishes without a hang-up may spin a core, and spoil every later measurement.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(f"stopped by signal {signum}"))
    rows = Rows()
    with tempfile.TemporaryDirectory(prefix="loopdeck-soak-") as tmp_name:
        soak = Soak(Path(tmp_name), tasks=args.iterations + 500)
        monitor = reference = None
        try:
            soak.until(1, 60)
            monitor = Terminal([str(LOOPDECK), "tui", str(soak.root)], soak.env)
            reference = Terminal([sys.executable, "-c", REFERENCE], soak.env)
            if monitor.wait_for("Journal", 30) is None or reference.wait_for("reference", 30) is None:
                sys.exit("an app never drew its first screen")
            soak.until(args.first, 3600)
            monitor.check("monitor")
            if any("confirm" in line for line in monitor.screen.display):
                sys.exit("the monitor asks for a confirmation: not the screen to measure")
            rss_first = rss_mb(monitor.proc.pid), rss_mb(reference.proc.pid)
            rows.append(
                f"RSS at iteration {soak.iteration():,}: monitor {rss_first[0]:.1f} MB, "
                f"reference {rss_first[1]:.1f} MB   ({load()})"
            )
            for hz in (5.0, 1.0):
                soak.pace(hz)
                time.sleep(3)  # the pace takes a turn or two to settle
                profile = Path(args.profile) / f"monitor-{hz:g}hz.txt" if args.profile else None
                got = window(soak, monitor, reference, args.seconds, marks=False, profile=profile)
                marked = window(soak, monitor, reference, args.marks or args.seconds, marks=True)
                p50, p95 = marked.get("p50", float("nan")), marked.get("p95", float("nan"))
                rows.append(
                    f"at {got['rate']:.1f} iterations/s ({hz:g} Hz): monitor CPU {got['monitor']:.1f} % "
                    f"of a core, reference {got['reference']:.2f} %   ({load()})"
                )
                rows.append(
                    f"  then change → screen p50 {p50:.0f} ms, p95 {p95:.0f} ms "
                    f"({marked.get('samples', 0):.0f} marks, {marked['missed']:.0f} missed; the emulator's "
                    f"own time a read, p95 {marked.get('lag95', 0):.0f} ms, not counted; CPU with the marks "
                    f"{marked['monitor']:.1f} %)   ({load()})"
                )
            soak.steer("pause", "--reason", "soak: idle window")
            time.sleep(5)  # the pause lands at the end of the turn; the monitor settles
            profile = Path(args.profile) / "monitor-idle.txt" if args.profile else None
            got = window(soak, monitor, reference, args.idle, marks=False, profile=profile)
            rows.append(
                f"idle (loop paused): monitor CPU {got['monitor']:.2f} % of a core, "
                f"reference {got['reference']:.2f} %   ({load()})"
            )
            soak.pace(0)
            soak.steer("resume", "--yes")
            soak.until(args.iterations, 7200)
            monitor.check("monitor")
            rss_last = rss_mb(monitor.proc.pid), rss_mb(reference.proc.pid)
            rows.append(
                f"RSS at iteration {soak.iteration():,}: monitor {rss_last[0]:.1f} MB "
                f"({rss_last[0] - rss_first[0]:+.1f} MB since iteration {args.first:,}), "
                f"reference {rss_last[1]:.1f} MB ({rss_last[1] - rss_first[1]:+.1f} MB)   ({load()})"
            )
        finally:
            soak.stop()
            for term in (monitor, reference):
                if term is not None:
                    term.close()
    print("monitor soak (the real runner, the real monitor; reference: a Static + Footer app)")
    for row in rows:
        print("  " + row)
    print("  targets: CPU < 10 % at 5 Hz, < 3 % at 1 Hz, idle < 1 %; RSS growth < 2 MB; p95 < 100 ms")


if __name__ == "__main__":
    main()
