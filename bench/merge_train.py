"""The merge train against one-at-a-time landings, in the same run: `loopdeck run --workers 8`
over 24 tasks with scripted workers, a verification suite that takes SUITE seconds, and 3 tasks
that break the suite only beside another task's work (each passes alone).

For each seed both ways run on fresh copies of one project: batches (`--merge-batch 8`) and one
at a time (`--merge-batch 1`). Printed: tasks landed per minute for each and their ratio, the
verifications run, and whether every commit of the loop's branch (every landing) passes the
suite's check. A colliding worker fixes its work once its prompt names the task it fails
beside.

    python bench/merge_train.py                 # SUITE=30 s, seeds 1 2 3 (long: tens of minutes)
    python bench/merge_train.py --suite 3       # a quick look
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable

CHECK = '''"""The bench's suite: SUITE seconds, then each task's file is whole and fits beside the others."""
import os, pathlib, sys, time

time.sleep(float(os.environ.get("BENCH_SUITE_S", "SUITE")))
bad = []
files = {p.stem: p.read_text() for p in pathlib.Path("work").glob("*.txt")}
for task, text in sorted(files.items()):
    for line in text.splitlines():
        if line.startswith("clashes with "):
            other = line.split()[-1]
            fits = f"fits with {other}" in text or f"fits with {task}" in files.get(other, "")
            if other in files and not fits:
                bad.append(f"task {task} beside task {other}")
if bad:
    print("FAILED:", ", ".join(bad))
    sys.exit(1)
print("ok:", len(files), "files")
'''

TASK = re.compile(r"^Your task \(([^)]*)\): ", re.MULTILINE)
BESIDE = re.compile(r"BESIDE TASK (\S+),")


def worker(argv: list[str]) -> int:
    """A scripted worker: works `--turn` seconds (a seeded spread), writes its task's file; a
    colliding task's file clashes with another task until its prompt names that task."""
    parser = argparse.ArgumentParser(prog="merge_train worker")
    parser.add_argument("--turn", type=float, nargs=2, default=(1.0, 3.0))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--clash", action="append", default=[], metavar="TASK:OTHER")
    parser.add_argument("--deaf", action="store_true", help="never fix a clash, even when told")
    args = parser.parse_args(argv)
    prompt = sys.stdin.read()
    found = TASK.search(prompt)
    task = found.group(1) if found else "?"
    rng = random.Random(f"{args.seed}:{task}:{prompt.count('BESIDE TASK')}")
    time.sleep(rng.uniform(*args.turn))
    clashes = dict(c.split(":", 1) for c in args.clash)
    path = Path("work") / f"{task}.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"task {task}"]
    if task in clashes:
        lines.append(f"clashes with {clashes[task]}")
    told = None if args.deaf else BESIDE.search(prompt)
    before = path.read_text() if path.exists() else ""
    lines += [ln for ln in before.splitlines() if ln.startswith("fits with ")]
    if told:
        lines.append(f"fits with {told.group(1)}")
    path.write_text("\n".join(dict.fromkeys(lines)) + "\n")
    print(f"Done task {task}.")
    return 0


def project(folder: Path, tasks: int, suite: float) -> Path:
    """The project: a git repository with the suite, and the graph (one file per task)."""
    from loop.demo import graph as demo_graph

    root = folder / "repo"
    (root / "work").mkdir(parents=True)
    (root / "check.py").write_text(CHECK.replace('"SUITE"', repr(str(suite))))
    (root / "work" / "base.txt").write_text("base\n")
    (root / ".gitignore").write_text(".demo/\ngraph/\n")
    env = {**os.environ, **IDENTITY}
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True, env=env)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", "start"], cwd=root, check=True, env=env)
    rows = tuple((str(i), f"Part {i}", (), (f"work/{i}.txt",)) for i in range(1, tasks + 1))
    demo_graph.create(root / "graph", rows)
    return root


IDENTITY = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
}


def run_once(
    folder: Path, batch: int, args: argparse.Namespace, seed: int, clashes: list[str]
) -> dict[str, Any]:
    root = project(folder, args.tasks, args.suite)
    agent = [PY, str(Path(__file__).resolve()), "worker", "--seed", str(seed)]
    agent += ["--turn", str(args.suite * args.turn[0]), str(args.suite * args.turn[1])]
    for clash in clashes:
        agent += ["--clash", clash]
    check = f"{PY} check.py"
    env = {**os.environ, **IDENTITY, "PYTHONPATH": str(REPO), "CLAUDE_CONFIG_DIR": str(folder / "claude")}
    argv = [PY, "-m", "loop.cli", "-C", str(root), "run", "Build the parts", "--workers", str(args.workers)]
    argv += ["--graph", str(root / "graph"), "--agent", " ".join(agent), "--headless"]
    argv += ["--verify", check, "--verify-allow", check, "--merge-batch", str(batch)]
    argv += ["--merge-checks", str(args.checks)]
    argv += ["--max-iterations", "200"]
    start = time.monotonic()
    done = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=args.timeout)
    wall = time.monotonic() - start
    events = journal(root)
    merged = [e for e in events if e.get("kind") == "task-merged"]
    verifications = sum(e.get("kind") in ("verification-passed", "verification-failed") for e in events)
    collided = sorted({str(e["data"].get("task")) for e in events if e.get("data", {}).get("beside")})
    return {
        "exit": done.returncode,
        "landed": len({str(e["data"]["task"]) for e in merged}),
        "wall_s": wall,
        "rate": len(merged) / (wall / 60),
        "verifications": verifications,
        "green": every_commit_green(root),
        "collided": collided,
        "tail": (done.stdout + done.stderr)[-800:] if done.returncode else "",
    }


def journal(root: Path) -> list[dict[str, Any]]:
    from loop.store.journal import Journal
    from loop.store.paths import Workspace

    return [{"kind": e.kind, "data": e.data} for e in Journal(Workspace(root).journal).read_from(0).events]


def every_commit_green(root: Path) -> bool:
    """Every commit of the loop's branch (its first-parent line: each landing) passes the
    suite's check (its wait skipped)."""
    probe = root.parent / "probe"
    git = ["git", "-C", str(root)]
    shas = subprocess.run([*git, "rev-list", "--first-parent", "main"], capture_output=True, text=True).stdout
    subprocess.run([*git, "worktree", "add", "-q", "--detach", str(probe), "main"], check=True)
    env = {**os.environ, "BENCH_SUITE_S": "0"}
    try:
        for sha in shas.split():
            subprocess.run(["git", "-C", str(probe), "checkout", "-q", "--detach", sha], check=True)
            if subprocess.run([PY, "check.py"], cwd=probe, env=env, capture_output=True).returncode:
                print(f"  RED COMMIT on the loop's branch: {sha}")
                return False
    finally:
        subprocess.run([*git, "worktree", "remove", "--force", str(probe)], check=False)
    return True


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["worker"]:
        return worker(argv[1:])
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--suite", type=float, default=30.0, help="seconds the verification suite takes")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--tasks", type=int, default=24)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--checks", type=int, default=8, help="checks the train may run at once, both ways")
    parser.add_argument(
        "--turn", type=float, nargs=2, default=(0.5, 2.0), help="a worker's turn, as multiples of SUITE"
    )
    parser.add_argument("--modes", nargs="+", default=["one-at-a-time", "batched"])
    parser.add_argument("--timeout", type=float, default=3 * 3600)
    parser.add_argument("--keep", action="store_true", help="keep each run's project, to read its journal")
    args = parser.parse_args(argv)
    print(
        f"merge train: {args.workers} workers, {args.tasks} tasks, suite {args.suite:g} s, "
        f"turns {args.turn[0]:g}-{args.turn[1]:g}x suite, 3 colliding tasks, "
        f"up to {args.checks} checks at once"
    )
    ok = True
    for seed in args.seeds:
        rng = random.Random(seed)
        ids = [str(i) for i in range(1, args.tasks + 1)]
        picked = rng.sample(ids, 6)
        clashes = [f"{picked[i]}:{picked[i + 3]}" for i in range(3)]
        rates: dict[str, float] = {}
        for mode in args.modes:
            batch = 1 if mode == "one-at-a-time" else args.batch
            tmp = tempfile.mkdtemp(prefix="loopdeck-train-")
            try:
                got = run_once(Path(tmp), batch, args, seed, clashes)
            finally:
                if args.keep:
                    print(f"  kept: {tmp}")
                else:
                    shutil.rmtree(tmp, ignore_errors=True)
            rates[mode] = float(got["rate"])
            ok = ok and got["exit"] == 0 and got["green"] is True and got["landed"] == args.tasks
            print(
                f"seed {seed} {mode:<14} landed {got['landed']}/{args.tasks} in {got['wall_s']:6.1f} s: "
                f"{got['rate']:5.2f} tasks/min, {got['verifications']} verifications, "
                f"collided {','.join(got['collided']) or 'none'} (pairs {' '.join(clashes)}), "
                f"loop's branch green at every landing: {got['green']}, exit {got['exit']}",
                flush=True,
            )
            if got["tail"]:
                print("  " + str(got["tail"]).replace("\n", "\n  "))
        if len(rates) == 2 and rates["one-at-a-time"]:
            ratio = rates["batched"] / rates["one-at-a-time"]
            print(f"seed {seed} batched / one-at-a-time landing rate: {ratio:.2f}x", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
