"""The runner's own overhead per iteration, with a near-no-op agent (`sed` ticking one box).

Overhead = wall time per iteration minus the agent's own run time: deciding, counting sources,
state and journal writes, the git progress check, starting and reaping the agent process.
Target (issue 5): < 50 ms. Runs in a real git repo (the demo workspace), 40 tasks.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loop.demo import workspace
from loop.drivers.runner import Options, Runner
from loop.store.journal import Journal
from loop.store.paths import Workspace
from loop.store.state import LoopState

TASKS = 40
NOOP_SCRIPT = "#!/bin/sh\ncat > /dev/null\nsed -i '0,/- \\[ \\]/s//- [x]/' TODO.md\necho done\n"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = workspace.create(Path(tmp) / "repo", tasks=TASKS)
        ws = Workspace(root)
        noop = Path(tmp) / "noop-agent"
        noop.write_text(NOOP_SCRIPT)
        noop.chmod(0o755)
        lines: list[str] = []
        runner = Runner(
            ws, Options(agent=str(noop), iteration_timeout=60, headless=True, poll=0.05), out=lines.append
        )
        start = time.perf_counter()
        code = runner.run(lambda: LoopState.new("bench", task_file="TODO.md", check_github=False))
        wall = time.perf_counter() - start
        assert code == 0, "\n".join(lines[-20:])
        events = Journal(ws.journal).tail(100_000).events
        agent_s = sum(float(e.data.get("duration_s", 0)) for e in events if e.kind == "iteration-completed")
        n = sum(1 for e in events if e.kind == "iteration-completed")
        per = (wall - agent_s) / n * 1000
        print(
            f"{n} iterations ({TASKS} tasks + 4 verification loops) in {wall:.2f} s; "
            f"agent time {agent_s:.2f} s"
        )
        print(f"runner overhead per iteration: {per:.1f} ms   target < 50 ms")


if __name__ == "__main__":
    main()
