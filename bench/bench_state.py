"""State file: one read+write cycle (what a driver does per Stop), and the write alone.

Target (issue 2): write < 5 ms.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import measure, row
from loop.store.paths import Workspace
from loop.store.state import LoopState, StateStore


def main() -> None:
    with tempfile.TemporaryDirectory(dir=Path.cwd()) as tmp:
        ws = Workspace(Path(tmp))
        ws.claude_dir.mkdir()
        store = StateStore(ws)
        state = LoopState.new("Build the todo API. " * 20, verify=["pytest -q", "ruff check ."])
        store.write(state)

        def cycle() -> None:
            with store.locked():
                current = store.read()
                assert current is not None
                current.iteration += 1
                store.write(current)

        def write() -> None:
            state.iteration += 1
            store.write(state)

        print("state file (.claude/orchestrator-loop.local.md), fsync'd, on", Path.cwd())
        row("read + write cycle under the lock", measure(cycle, 300), "")
        row("write (atomic, backup kept)", measure(write, 300), "< 5 ms")
        row("read", measure(store.read, 300))


if __name__ == "__main__":
    main()
