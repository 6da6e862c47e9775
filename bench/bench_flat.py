"""Flat at scale: every figure of the performance table, each beside its reference measured in
the same run, on this machine, with its load average.

    python bench/bench_flat.py [--hook-sizes 1,100,1024] [--runs 7] [--tasks 200] [--archives 10000]
                               [--fleet 50,200] [--soak-iterations 10000] [--soak-seconds 60]
                               [--skip hook,runner,status,fleet,monitor]

1. the Stop hook, run by the very command `loopdeck install` writes (each Stop a process of its
   own, its bytecode compiled by the install), on a 1 MB, a 100 MB and a 1 GB transcript (page
   cache warm, a loop in its steady state), interleaved with its reference, ralph-loop's bash
   hook (bench/ralph_hook.sh). The goal: below ralph-loop's hook at every size, and flat (the
   largest size's time over the smallest's, printed last, near 1.00×);
2. the runner: `loopdeck run` driving a scripted agent (`sed` ticks one box) through `--tasks`
   tasks, against a bash loop running the same agent as many times in a copy of the same
   repository; per iteration, and the runner's overhead (the difference);
3. `loopdeck status` on a finished loop with `--archives` archived loops, against the same with
   none;
4. the fleet view (`loopdeck tui --scan`) idle over 50 and 200 workspaces, against a Textual app
   of one Static and a Footer, both in terminals of their own;
5. the monitor with a real runner (bench/bench_monitor_soak.py, run here as it is).

Figures are printed, never asserted. Run alone (`bench/` is not part of the tests), from the
project's virtual environment, on an otherwise quiet machine where one can be had: the load
average printed with each figure says how quiet it was.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import bench_hook_vs_bash as hookbench
from bench.bench_monitor_soak import REFERENCE, Terminal, cpu_seconds, load

HERE = Path(__file__).resolve().parent
LOOPDECK = Path(sys.executable).with_name("loopdeck")
AGENT = "#!/bin/sh\ncat > /dev/null\nsed -i '0,/- \\[ \\]/s//- [x]/' TODO.md\necho done\n"
"""The runner's agent and the bash loop's: reads its prompt, ticks the first open box, says so."""


def row(what: str, ours: str, reference: str) -> None:
    print(f"  {what:<44} {ours:<26} {reference}   ({load()})", flush=True)


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples)


def interleaved(runs: int, *jobs: Callable[[], float], settle: float = 0.0) -> list[list[float]]:
    """Each job `runs` times, in turns (the order rotating), after one untimed warm-up turn;
    each `settle` seconds after the one before it ended."""
    found: list[list[float]] = [[] for _ in jobs]
    for run in range(runs + 1):
        order = list(range(len(jobs)))
        order = order[run % len(order) :] + order[: run % len(order)]
        for index in order:
            time.sleep(settle)
            ms = jobs[index]()
            if run:
                found[index].append(ms)
    return found


# --- 1. the Stop hook ---------------------------------------------------------------------------


STOPS_APART_S = 0.1
"""The pause before each timed Stop (and each reference run): far less than an agent's turn."""


def hook(tmp: Path, sizes: list[int], runs: int) -> None:
    medians: dict[float, float] = {}
    if not shutil.which("jq"):
        print("  (no jq: ralph-loop's hook is left out)")
    ours_ws, bash_ws = tmp / "hook-ours", tmp / "hook-bash"
    command = hookbench.workspace(ours_ws)
    (bash_ws / ".claude").mkdir(parents=True)
    for mb in sizes:
        transcript = tmp / f"transcript-{mb}MB.jsonl"
        hookbench.generate(transcript, mb << 20)
        payload = json.dumps(
            {
                "session_id": hookbench.SESSION,
                "transcript_path": str(transcript),
                "cwd": "",
                "hook_event_name": "Stop",
                "stop_hook_active": False,
            }
        )

        def ours(payload: str = payload) -> float:
            here = payload.replace('""', json.dumps(str(ours_ws)))
            ms, out = hookbench.timed(command, ours_ws, here)
            assert json.loads(out)["decision"] == "block", out
            return ms

        def ralph(payload: str = payload) -> float:
            state = bash_ws / ".claude" / "ralph-loop.local.md"
            state.write_text(hookbench.RALPH_STATE.format(session=hookbench.SESSION))
            here = payload.replace('""', json.dumps(str(bash_ws)))
            ms, out = hookbench.timed(["bash", str(HERE / "ralph_hook.sh")], bash_ws, here)
            assert json.loads(out)["decision"] == "block", out
            return ms

        jobs = [ours] + ([ralph] if shutil.which("jq") else [])
        # Stops come an agent's turn apart: each job is timed after a pause, not on the heels
        # of the one before (whose writes and page faults it would pay for)
        got = interleaved(runs, *jobs, settle=STOPS_APART_S)
        a = median_ms(got[0])
        size = transcript.stat().st_size / 2**20
        medians[size] = a
        reference = "ralph-loop's hook: left out"
        if len(got) > 1:
            r = median_ms(got[1])
            verdict = "below it" if a < r else "NOT below it"
            reference = f"ralph-loop's hook {r:.1f} ms (loopdeck {a / r:.2f}×, {verdict})"
        row(f"Stop hook, {size:,.0f} MB transcript (median of {runs})", f"{a:.1f} ms", reference)
        transcript.unlink()
    if len(medians) > 1:
        small, large = min(medians), max(medians)
        what = f"Stop hook, {large:,.0f} MB over {small:,.0f} MB"
        row(what, f"{medians[large] / medians[small]:.2f}×", "flat: 1.00× (noise aside)")


# --- 2. the runner ------------------------------------------------------------------------------


def runner(tmp: Path, tasks: int, rounds: int) -> None:
    """`rounds` pairs, loopdeck and the bash loop in turns (each on a fresh copy of the repository);
    the medians per iteration."""
    from loop.demo import workspace
    from loop.store.archive import latest_summary
    from loop.store.paths import Workspace

    agent = tmp / "runner-agent"
    agent.write_text(AGENT)
    agent.chmod(0o755)
    trust = tmp / "runner-trust"
    trust.mkdir(mode=0o700)
    env = {**os.environ, "LOOPDECK_TRUST_HOME": str(trust)}
    ours: list[float] = []
    theirs: list[float] = []
    iterations = 0
    for n in range(rounds):
        root = workspace.create(tmp / f"runner-repo-{n}", tasks=tasks)
        copy = workspace.create(tmp / f"bash-repo-{n}", tasks=tasks)
        argv = [str(LOOPDECK), "-C", str(root), "run", "bench: tick every box", "--agent", str(agent)]
        argv += ["--agent-format", "text", "--task-file", "TODO.md", "--no-github", "--no-tasks"]
        argv += ["--headless", "--max-iterations", str(tasks * 2)]
        start = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, cwd=root)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            print(f"  the runner ended with {done.returncode}: {done.stderr.decode(errors='replace')[-400:]}")
            return
        found = latest_summary(Workspace(root))
        iterations = int(found[1].get("iterations") or 0) if found else 0
        if not iterations:
            print("  the runner's summary names no iterations")
            return
        loop = f'for i in $(seq {iterations}); do printf "bench: tick every box" | "$0" > /dev/null; done'
        start = time.perf_counter()
        subprocess.run(["bash", "-c", loop, str(agent)], cwd=copy, check=True)
        bash_wall = time.perf_counter() - start
        ours.append(wall / iterations * 1000)
        theirs.append(bash_wall / iterations * 1000)
    a, b = median_ms(ours), median_ms(theirs)
    row(
        f"runner per iteration, {tasks} tasks ({iterations} its., {rounds} rounds)",
        f"{a:.1f} ms ({a - b:.1f} ms overhead)",
        f"a bash loop running the same agent {b:.1f} ms (loopdeck {a / b:.2f}×)",
    )


# --- 3. status ----------------------------------------------------------------------------------


def status(tmp: Path, archives: int, runs: int) -> None:
    from loop.store.archive import folder_name

    def finished(root: Path, count: int) -> Path:
        (root / ".claude").mkdir(parents=True)
        base = 1_767_225_600  # 2026-01-01T00:00:00Z
        folder = root / ".claude" / "loops"
        for n in range(count):
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(base + n * 60))
            one = folder / folder_name(stamp)
            one.mkdir(parents=True)
            record = {"outcome": "completed", "started_at": stamp, "status": "completed", "iteration": 7}
            (one / "summary.json").write_text(json.dumps({**record, "iterations": 7}))
            (one / "state.md").write_text("---\nstatus: completed\n---\n")
        return root

    many, none = finished(tmp / "status-many", archives), finished(tmp / "status-none", 0)

    def timed(root: Path) -> Callable[[], float]:
        def run() -> float:
            start = time.perf_counter()
            subprocess.run([str(LOOPDECK), "-C", str(root), "status"], capture_output=True, check=True)
            return (time.perf_counter() - start) * 1000

        return run

    got = interleaved(runs, timed(many), timed(none))
    a, b = median_ms(got[0]), median_ms(got[1])
    what = f"`status`, finished loop, {archives:,} archives"
    row(what, f"{a:.0f} ms", f"with none {b:.0f} ms ({a / b:.2f}×)")


# --- 4. the fleet -------------------------------------------------------------------------------


def fleet(tmp: Path, counts: list[int], idle: float) -> None:
    from tools import screenshots

    for key, value in screenshots.GIT_ENV.items():
        os.environ[key] = value
    for count in counts:
        root = tmp / f"fleet-{count}"
        for n in range(count):
            folder = root / f"ws{n:03d}"
            kind = n % 5
            if kind < 2:
                (screenshots.escalation if n % 10 == 0 else screenshots.running)(folder)
            elif kind < 4:
                (folder / ".claude").mkdir(parents=True)
                (folder / ".claude" / "ralph-loop.local.md").write_text(screenshots.RALPH)
            else:
                (folder / "docs").mkdir(parents=True)
                state = {"status": "running", "currentSession": n, "maxSessions": 60, "queueSnapshot": ["a"]}
                (folder / "docs" / ".continuous-session-state.json").write_text(json.dumps(state))
        env = {**os.environ, "LOOPDECK_TRUST_HOME": str(tmp / "fleet-trust")}
        monitor = Terminal([str(LOOPDECK), "tui", "--scan", str(root)], env)
        reference = Terminal([sys.executable, "-c", REFERENCE], env)
        try:
            every = f"in {count} folders"  # the fleet's title, once it found them all
            if monitor.wait_for(every, 180) is None or reference.wait_for("reference", 30) is None:
                print(f"  the fleet of {count} never showed all its workspaces")
                continue
            time.sleep(5)  # start-up is not idle
            pids = (monitor.proc.pid, reference.proc.pid)
            before = [cpu_seconds(p) for p in pids]
            began = time.monotonic()
            time.sleep(idle)
            elapsed = time.monotonic() - began
            ours, theirs = ((cpu_seconds(p) - b) / elapsed * 100 for p, b in zip(pids, before, strict=True))
            row(
                f"fleet idle CPU, {count} workspaces",
                f"{ours:.2f} % of a core",
                f"a Static + Footer app {theirs:.2f} %",
            )
        finally:
            monitor.close()
            reference.close()


# --- 5. the monitor -----------------------------------------------------------------------------


def monitor(iterations: int, seconds: float, idle: float) -> None:
    argv = [sys.executable, str(HERE / "bench_monitor_soak.py"), "--iterations", str(iterations)]
    argv += ["--first", str(min(1000, iterations // 2)), "--seconds", str(seconds), "--idle", str(idle)]
    done = subprocess.run(argv, capture_output=True, text=True)
    for line in done.stdout.splitlines()[1:]:
        print(line)
    if done.returncode != 0:
        print(f"  the soak ended with {done.returncode}: {done.stderr.strip()[-400:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hook-sizes", default="1,100,1024", help="transcript sizes in MB")
    parser.add_argument("--runs", type=int, default=7, help="timed runs of each process, interleaved")
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3, help="runner and bash loop pairs, in turns")
    parser.add_argument("--archives", type=int, default=10_000)
    parser.add_argument("--fleet", default="50,200", help="fleet sizes")
    parser.add_argument("--fleet-idle", type=float, default=20.0, help="seconds of the fleet's idle window")
    parser.add_argument("--soak-iterations", type=int, default=10_000)
    parser.add_argument("--soak-seconds", type=float, default=60.0)
    parser.add_argument("--soak-idle", type=float, default=30.0)
    parser.add_argument("--skip", default="", help="parts left out: hook,runner,status,fleet,monitor")
    args = parser.parse_args()
    if not LOOPDECK.exists():
        sys.exit(f"{LOOPDECK} not found: run from the project's virtual environment")
    skip = {part.strip() for part in args.skip.split(",") if part.strip()}
    print(f"flat at scale: {os.cpu_count()} cores, {load()}")
    with tempfile.TemporaryDirectory(prefix="loopdeck-flat-") as tmp_name:
        tmp = Path(tmp_name)
        if "hook" not in skip:
            hook(tmp, [int(s) for s in args.hook_sizes.split(",") if s.strip()], args.runs)
        if "runner" not in skip:
            runner(tmp, args.tasks, args.rounds)
        if "status" not in skip:
            status(tmp, args.archives, args.runs)
        if "fleet" not in skip:
            fleet(tmp, [int(s) for s in args.fleet.split(",") if s.strip()], args.fleet_idle)
    if "monitor" not in skip:
        monitor(args.soak_iterations, args.soak_seconds, args.soak_idle)


if __name__ == "__main__":
    main()
