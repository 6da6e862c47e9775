"""What the sandbox costs a turn: the same trivial agent run by the runner's own turn
(`loop.processes.agent.run`) unsandboxed and under bubblewrap, interleaved in the same run,
with the load average.

    python bench/bench_sandbox.py [--runs 50]

Two agents: `/bin/true` (the floor: a process start) and `python -c pass` (an interpreter's
start). Per turn: the median and the 90th percentile, and the sandbox's difference (the goal:
25 ms or less more per turn). A turn's time includes making the sandbox's argv (the files it
protects checked and made) and bubblewrap's start. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loop.processes import agent, sandbox


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.2f} {five:.2f}"


def p90(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]


def turn(command: str, root: Path, box: tuple[sandbox.Spec, sandbox.Status] | None) -> float:
    start = time.perf_counter()
    log = root / ".claude" / "loopdeck" / "turn.log"
    env = {**os.environ, "HOME": str(root.parent / "home")}  # the CLIs' folders made there, not in yours
    ran = agent.run(command, "go", root, log, 60, lambda: None, env=env, sandbox=box)
    ms = (time.perf_counter() - start) * 1000
    assert ran.exit_code == 0, ran.tail or ran.error
    return ms


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    status = sandbox.detect("auto")
    print(f"sandbox: {sandbox.describe(status, True)}")
    if not status.on:
        print("no sandbox can start here: nothing to compare")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        (root / ".claude" / "loopdeck").mkdir(parents=True)
        (Path(tmp) / "home").mkdir()
        box = (sandbox.Spec(root, root), status)
        for command in ("/bin/true", f"{sys.executable} -c pass"):
            plain: list[float] = []
            boxed: list[float] = []
            for run in range(args.runs + 1):  # the first pair untimed (a warm-up)
                order = [(plain, None), (boxed, box)] if run % 2 else [(boxed, box), (plain, None)]
                for found, which in order:
                    ms = turn(command, root, which)
                    if run:
                        found.append(ms)
            diff = statistics.median(boxed) - statistics.median(plain)
            print(f"{command}  ({args.runs} turns each, {load()})")
            for label, samples in (("unsandboxed", plain), ("sandboxed", boxed)):
                print(
                    f"  {label:<12} median {statistics.median(samples):7.2f} ms   p90 {p90(samples):7.2f} ms"
                )
            print(
                f"  difference   median {diff:+7.2f} ms   "
                f"p90 {p90(boxed) - p90(plain):+7.2f} ms   (goal: <= 25 ms)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
