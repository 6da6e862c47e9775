"""Task sources: the TodoWrite lookup on big transcripts, and a 100,000-item checklist.

Targets (issue 3): lookup < 30 ms at every size (latest TodoWrite near the end, or none at all:
the first look reads at most 8 MB, issue 12), repeated lookup
after 1 MB was appended < 10 ms, checklist < 150 ms (with and without `[~]`: an ordinary list
must take the fast path too). Transcripts are built from the real sample
transcript's lines (plus 200 KB tool results, as long sessions have) into bench/.data/.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import measure, row
from loop.sources import task_file, todos

HERE = Path(__file__).resolve().parent
DATA = HERE / ".data"
SAMPLES = HERE.parent / "tests" / "fixtures" / "samples"
SAMPLE = SAMPLES / "claude-code-viewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"


def filler_block() -> bytes:
    """Sample lines without TodoWrite, plus a big tool result: what fills a long session."""
    lines = [line for line in SAMPLE.read_bytes().splitlines(keepends=True) if b"TodoWrite" not in line]
    big = {
        "type": "user",
        "message": {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "log line\n" * 22_000}],
        },
    }
    return b"".join(lines) + json.dumps(big).encode() + b"\n"


def todo_line() -> bytes:
    todos_ = [
        {"content": f"task {i}", "status": "pending" if i % 2 else "completed", "activeForm": f"doing {i}"}
        for i in range(12)
    ]
    line = {
        "type": "assistant",
        "message": {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "TodoWrite", "input": {"todos": todos_}}
            ],
        },
    }
    return json.dumps(line, separators=(",", ":")).encode() + b"\n"


def transcript(size: int) -> Path:
    path = DATA / f"transcript-{size >> 20}MB.jsonl"
    if path.exists():
        return path
    DATA.mkdir(exist_ok=True)
    block = filler_block()
    tail_filler = block  # ~330 KB after the latest TodoWrite: "near the end"
    with path.open("wb") as f:
        written = 0
        body = size - len(tail_filler) - len(todo_line())
        f.write(todo_line())  # an old list far back, which must not be the answer
        while written < body:
            f.write(block)
            written += len(block)
        f.write(todo_line())
        f.write(tail_filler)
    return path


def main() -> None:
    print(f"transcripts built from {SAMPLE.name}")
    for size in (1 << 20, 100 << 20, 1 << 30):
        path = transcript(size)
        found = todos.scan(path)
        assert found.found.todos is not None and len(found.found.todos) == 12
        mb = path.stat().st_size / 2**20
        label = f"TodoWrite lookup, {mb:,.0f} MB ({found.bytes_read >> 10} KB read)"
        row(label, measure(lambda: todos.check(path, "now", None), 30), "< 30 ms")  # noqa: B023

    with tempfile.TemporaryDirectory(dir=DATA) as tmp:
        # A session that never called TodoWrite: the first look reads its last 8 MB only.
        none = Path(tmp) / "no-todowrite.jsonl"
        with none.open("wb") as f:  # sparse: a hole with a newline every MB, real lines at the end
            for mb in range(1, 1024):
                f.seek(mb << 20)
                f.write(b"\n")
            f.seek(1 << 30)
            f.write(filler_block())
        lookup = todos.Lookup(None)
        assert lookup.latest(none).todos is None
        row(
            f"first look, 1 GB, no TodoWrite ({lookup.bytes_read >> 20} MB read)",
            measure(lambda: todos.Lookup(None).latest(none), 10),
            "< 30 ms",
        )

    big = transcript(1 << 30)
    with tempfile.TemporaryDirectory(dir=DATA) as tmp:
        work = Path(tmp) / "t.jsonl"
        shutil.copyfile(big, work)
        cache = Path(tmp) / "cache"
        todos.Lookup(cache).latest(work)
        mb_block = (filler_block() * 4)[: 1 << 20]
        mb_block = mb_block[: mb_block.rfind(b"\n") + 1]
        times = []
        for _ in range(20):
            with work.open("ab") as f:
                f.write(mb_block)
            times += measure(lambda: todos.check(work, "now", cache), 1, warmup=0)
        row("repeated lookup after +1 MB appended to 1 GB", times, "< 10 ms")

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for marks, label in (([" ", "x", "~", "-"], "with [~]"), ([" ", "x", "X", "-"], "ordinary, no [~]")):
            lines = [f"- [{marks[i % 4]}] task number {i} with some words" for i in range(100_000)]
            (root / "TODO.md").write_text("# Tasks\n" + "\n".join(lines) + "\n")
            report = task_file.check(root, "TODO.md", "now")
            assert report.pending == 25_000
            row(
                f"checklist, 100,000 items, {label}",
                measure(lambda: task_file.check(root, "TODO.md", "now"), 20),
                "< 150 ms",
            )
            (root / "FENCED.md").write_text("```\n- [ ] x\n```\n<!-- c -->\n" + "\n".join(lines) + "\n")
            row(
                f"checklist, 100,000 items, {label}, fences/comments",
                measure(lambda: task_file.check(root, "FENCED.md", "now"), 20),
                "< 150 ms",
            )


if __name__ == "__main__":
    main()
