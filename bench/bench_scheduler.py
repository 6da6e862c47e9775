"""The parallel scheduler: time per cycle with 1,000 tasks and 12 workers (target < 20 ms), and
the runner's overhead per worker turn (a real run of trivial workers, minus their own time)."""

from __future__ import annotations

import random
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import measure, row
from loop.core import scheduler, workflow
from loop.core.model import LoopState
from loop.core.scheduler import Board, Task, Worker

NOW = datetime(2026, 1, 9, 10, 30, tzinfo=UTC)


def graph(n: int, seed: int = 7) -> list[Task]:
    rng = random.Random(seed)
    tasks = []
    for i in range(1, n + 1):
        blocked = (
            tuple(str(b) for b in rng.sample(range(1, i), min(i - 1, rng.randint(0, 3)))) if i > 1 else ()
        )
        files = tuple(f"src/m{rng.randint(0, 300)}.py" for _ in range(rng.randint(1, 4)))
        status = "completed" if i <= n // 3 else "pending"
        tasks.append(Task(str(i), f"task {i}", status=status, blocked_by=blocked, target_files=files))
    return tasks


def cycle_figure() -> None:
    tasks = graph(1000)
    ready = scheduler.ready(tasks)
    workers = tuple(
        Worker(f"worker-{i}", t.id, t.target_files, "2026-01-09T10:00:00+00:00")
        for i, t in enumerate(ready[:11])
    )
    state = LoopState.new("bench")
    scheduler.keep(state, Board(graph="g", capacity=12, workers=workers, serial=11))
    times = measure(lambda: workflow.cycle(state, tasks, NOW, None), repeat=200)
    row("scheduler cycle, 1,000 tasks, 12 workers", times, "< 20 ms")
    scheduler.keep(state, Board(graph="g", capacity=12, workers=workers[:1], serial=1))
    times = measure(lambda: workflow.cycle(state, tasks, NOW, None), repeat=200)
    row("scheduler cycle, 1,000 tasks, 11 to start", times, "< 20 ms")


def turn_overhead(tasks: int = 60, workers: int = 12) -> None:
    """The driver's own time per worker turn: deciding, writing the graph, the state and the
    journal, starting the process and reading its end (the agent is `true`; waiting between
    polls is not counted)."""
    from loop.demo import graph as demo
    from loop.drivers import parallel
    from loop.drivers.runner import Options
    from loop.store.paths import Workspace

    root = Path(tempfile.mkdtemp(prefix="loopdeck-bench-")) / "project"
    spec = tuple((str(i), f"task {i}", (), (f"f{i}.txt",)) for i in range(1, tasks + 1))
    folder = demo.create(root / "graph", spec)
    (root / ".claude").mkdir(parents=True, exist_ok=True)
    busy = [0.0]

    def timed(name: str) -> None:
        original = getattr(parallel.ParallelRunner, name)

        def wrapper(self: parallel.ParallelRunner, *args: object, **kwargs: object) -> object:
            start = time.perf_counter()
            try:
                return original(self, *args, **kwargs)
            finally:
                busy[0] += time.perf_counter() - start

        setattr(parallel.ParallelRunner, name, wrapper)

    timed("on_ended")
    timed("apply_cycle")
    options = Options(agent="true", headless=True, poll=0.02)
    run = parallel.ParallelRunner(
        Workspace(root), options, parallel.Parallel(folder, workers), out=lambda line: None
    )
    start = time.perf_counter()
    code = run.run(lambda: _state())
    wall = time.perf_counter() - start
    assert code == 0, code
    print(
        f"{'runner overhead per worker turn':<48} {busy[0] / tasks * 1000:7.2f} ms of driver time per turn   "
        f"({tasks} turns, {workers} workers, {wall:.2f} s wall in all)"
    )


def _state() -> LoopState:
    return LoopState.new("bench", max_iterations=0, check_tasks=False, check_github=False)


if __name__ == "__main__":
    cycle_figure()
    turn_overhead()
