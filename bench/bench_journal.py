"""Journal: the last 50 events of a 1 GB journal (real events, not a sparse file).

Targets (issue 2): tail < 20 ms. Issue 12: `control.applied_ids` (what `--wait` polls ten times
a second) reads from the end within a byte budget: the journals here hold no `command-applied`
event at all, its worst case (it read the whole file before: 2.7 s at 100 MB, 28 s at 1 GB).
Writes the 1 GB file once into bench/.data/ (reused).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import measure, row
from loop.store import control
from loop.store.journal import Journal

DATA = Path(__file__).resolve().parent / ".data"


def big_journal(size: int) -> Path:
    path = DATA / f"journal-{size >> 20}MB.jsonl"
    if path.exists() and path.stat().st_size >= size:
        return path
    DATA.mkdir(exist_ok=True)
    lines = []
    for i in range(2000):
        event = {
            "ts": "2026-11-25T10:00:00.000Z",
            "kind": "iteration-started",
            "iteration": i,
            "data": {"max_iterations": 100, "note": "x" * (i % 300)},
        }
        lines.append(json.dumps(event))
    block = ("\n".join(lines) + "\n").encode()
    with path.open("wb") as f:
        written = 0
        while written < size:
            f.write(block)
            written += len(block)
    return path


def main() -> None:
    for size in (1 << 20, 100 << 20, 1 << 30):
        path = big_journal(size)
        journal = Journal(path)
        result = journal.tail(50)
        assert len(result.events) == 50
        label = f"tail 50 of {path.stat().st_size / 2**20:,.0f} MB ({result.bytes_read} B read)"
        row(label, measure(lambda: journal.tail(50), 200), "< 20 ms")  # noqa: B023
        row(
            f"applied_ids (--wait poll), {path.stat().st_size / 2**20:,.0f} MB",
            measure(lambda: control.applied_ids(journal), 50),  # noqa: B023
            "< 20 ms",
        )
    os.sync()


if __name__ == "__main__":
    main()
