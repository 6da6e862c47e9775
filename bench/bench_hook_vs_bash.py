"""loopdeck's Stop hook against a ralph-loop style bash hook, side by side, warm and cold.

The bash hook (bench/ralph_hook.sh) does what Anthropic's ralph-loop plugin's Stop hook does:
grep the WHOLE transcript for assistant lines, keep the last, pull its text with jq and look for
the promise. loopdeck, run by the very command `loopdeck install` writes into the project's
settings, reads the transcript from the end. Both run as whole processes (what Claude Code pays
on every turn), interleaved run by run so that neither gets a warmer machine, on transcripts
shaped like real sessions (see `generate`), with the page cache warm and cold
(`posix_fadvise(POSIX_FADV_DONTNEED)` on the transcript before each cold run).

    python bench/bench_hook_vs_bash.py [--sizes 1,20,200,1024] [--runs 7]

Sizes are in MB. The transcripts are written into a temporary folder and deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOOPDECK = Path(sys.executable).with_name("loopdeck")
SESSION = "5c0375b4-57a5-4f26-b12d-d022ee4e51b7"
RALPH_STATE = """---
active: true
iteration: 1
session_id: {session}
max_iterations: 0
completion_promise: "DONE"
started_at: "2026-11-25T21:13:34Z"
---

Build a todo API
"""


# --- transcripts shaped like real ones ---------------------------------------------------------
#
# The sample sessions (claude-code-viewer_*.jsonl) hold, per 100 lines, about 40 assistant lines
# calling a tool (~1.2 KB), 40 user lines carrying the tool's result (0.7–4 KB, now and then a
# long file or log of tens to hundreds of KB), 12 assistant lines of text (~1.3 KB) and a few
# user prompts; every line wears the same envelope (uuids, cwd, session, version, timestamp) and
# is compact JSON, as Claude Code writes it.


def _envelope(kind: str, message: dict[str, object], parent: str, n: int) -> dict[str, object]:
    return {
        "parentUuid": parent,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/home/dev/projects/todo-api",
        "sessionId": SESSION,
        "version": "1.0.98",
        "gitBranch": "main",
        "type": kind,
        "message": message,
        "uuid": str(uuid.UUID(int=n)),
        "timestamp": f"2026-11-25T21:{n // 60 % 60:02d}:{n % 60:02d}.000Z",
    }


def _assistant(content: list[dict[str, object]], n: int) -> dict[str, object]:
    return {
        "id": f"msg_{n:024d}",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-20250514",
        "content": content,
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 4, "cache_creation_input_tokens": 1520, "output_tokens": 180},
    }


def _lines() -> Iterator[dict[str, object]]:
    """An endless session: tool call, tool result, now and then text, a prompt, a long result."""
    n = 0
    parent = str(uuid.UUID(int=0))
    words = ["the", "handler", "validates", "input", "and", "returns", "the", "created", "item", "with"]
    while True:
        n += 1
        tool = ("Read", "Edit", "Bash", "Grep", "Write")[n % 5]
        call: dict[str, object] = {
            "type": "tool_use",
            "id": f"toolu_{n:020d}",
            "name": tool,
            "input": {"file_path": f"/home/dev/projects/todo-api/src/module_{n % 37}.py", "limit": 200}
            if tool != "Bash"
            else {"command": "pytest -q tests/test_api.py", "description": "Run the API tests"},
        }
        yield _envelope("assistant", _assistant([call], n), parent, n)
        size = (700, 1500, 3800, 900, 6000)[n % 5]
        if n % 53 == 0:
            size = 120_000  # a whole file read, or a long test log
        body = (" ".join(words) + "\n") * (size // 70)
        result = {"type": "tool_result", "tool_use_id": f"toolu_{n:020d}", "content": body}
        yield _envelope("user", {"role": "user", "content": [result]}, parent, n)
        if n % 4 == 0:
            text: dict[str, object] = {
                "type": "text",
                "text": " ".join(words * 12) + "\n\nNext I will run the tests.",
            }
            yield _envelope("assistant", _assistant([text], n), parent, n)
        if n % 31 == 0:
            yield _envelope("user", {"role": "user", "content": "Keep going with the next task."}, parent, n)
        parent = str(uuid.UUID(int=n))


def generate(path: Path, size: int) -> None:
    """About `size` bytes of session, ending on an assistant's text without the promise (so
    both hooks block). A ~4 MB stretch is built once and repeated: the hooks do not care that
    lines repeat, only about their shapes and sizes."""
    chunk: list[bytes] = []
    built = 0
    for line in _lines():
        data = json.dumps(line, separators=(",", ":")).encode() + b"\n"
        chunk.append(data)
        built += len(data)
        if built >= min(size, 4 << 20):
            break
    block = b"".join(chunk)
    last = _envelope(
        "assistant", _assistant([{"type": "text", "text": "Tests pass; two tasks left."}], 0), "x", 0
    )
    with path.open("wb") as f:
        written = 0
        while written + len(block) <= size:
            f.write(block)
            written += len(block)
        rest = block[: size - written]
        f.write(rest[: rest.rfind(b"\n") + 1])  # whole lines only
        f.write(json.dumps(last, separators=(",", ":")).encode() + b"\n")
        f.flush()
        os.fsync(f.fileno())  # clean pages: DONTNEED can drop them


# --- running ------------------------------------------------------------------------------------


def drop_cache(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def timed(argv: list[str], cwd: Path, payload: str, env: dict[str, str] | None = None) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, input=payload, capture_output=True, text=True, check=True, env=env)
    return (time.perf_counter() - start) * 1000, done.stdout


def workspace(root: Path) -> list[str]:
    """A project with a loop and loopdeck installed; the Stop hook's command as installed."""
    (root / ".claude").mkdir(parents=True)
    (root / "TODO.md").write_text("- [ ] one task left\n")
    start = ["start", "bench", "--task-file", "TODO.md", "--no-github", "--no-tasks", "--max-iterations", "0"]
    for verb in (start, ["install"]):
        subprocess.run([str(LOOPDECK), *verb], cwd=root, check=True, capture_output=True)
    settings = json.loads((root / ".claude" / "settings.local.json").read_text())
    command: str = settings["hooks"]["Stop"][0]["hooks"][0]["command"]
    return shlex.split(command)  # run without a shell, as the bash hook is: neither pays for one


def compare(transcript: Path, tmp: Path, runs: int, cold: bool) -> tuple[list[float], list[float]]:
    ours_ws, bash_ws = tmp / "ours", tmp / "bash"
    for folder in (ours_ws, bash_ws):
        shutil.rmtree(folder, ignore_errors=True)
    hook = workspace(ours_ws)
    (bash_ws / ".claude").mkdir(parents=True)
    payload = json.dumps(
        {
            "session_id": SESSION,
            "transcript_path": str(transcript),
            "cwd": "",
            "hook_event_name": "Stop",
            "stop_hook_active": False,  # every Stop the first of its prompt: no block cap
        }
    )
    ours: list[float] = []
    theirs: list[float] = []
    for run in range(runs + 1):  # the first pair warms the interpreters and the disk: not kept
        for who in (0, 1) if run % 2 == 0 else (1, 0):  # alternate who goes first
            if cold:
                drop_cache(transcript)
            if who == 0:
                ms, out = timed(hook, ours_ws, payload.replace('""', f'"{ours_ws}"'))
                assert json.loads(out)["decision"] == "block", out
                if run:
                    ours.append(ms)
            else:
                (bash_ws / ".claude" / "ralph-loop.local.md").write_text(RALPH_STATE.format(session=SESSION))
                ms, out = timed(
                    ["bash", str(HERE / "ralph_hook.sh")], bash_ws, payload.replace('""', f'"{bash_ws}"')
                )
                assert json.loads(out)["decision"] == "block", out
                if run:
                    theirs.append(ms)
    return ours, theirs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,20,200,1024", help="transcript sizes in MB (comma-separated)")
    parser.add_argument("--runs", type=int, default=7, help="timed runs per hook, size and cache state")
    args = parser.parse_args()
    if not LOOPDECK.exists():
        sys.exit(f"{LOOPDECK} not found: run from the project's virtual environment")
    if not shutil.which("jq"):
        sys.exit("the bash hook needs jq (apt-get install jq)")
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    print(f"loopdeck's Stop hook vs ralph-loop style bash hook, median of {args.runs} runs (interleaved)")
    print(f"{'transcript':>11}  {'cache':>5}  {'loopdeck':>10}  {'bash':>10}  {'bash / loopdeck':>15}")
    with tempfile.TemporaryDirectory(prefix="loopdeck-hook-bench-") as tmp_name:
        tmp = Path(tmp_name)
        for mb in sizes:
            transcript = tmp / f"transcript-{mb}MB.jsonl"
            generate(transcript, mb << 20)
            real_mb = transcript.stat().st_size / 2**20
            for cold in (False, True):
                ours, theirs = compare(transcript, tmp, args.runs, cold)
                a, b = statistics.median(ours), statistics.median(theirs)
                print(
                    f"{real_mb:>8,.0f} MB  {'cold' if cold else 'warm':>5}  {a:>7.1f} ms  {b:>7.1f} ms"
                    f"  {b / a:>14.1f}x",
                    flush=True,
                )
            transcript.unlink()


if __name__ == "__main__":
    main()
