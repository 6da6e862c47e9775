"""`loopdeck hook stop`, whole process (what Claude Code pays on every turn), against a bash hook
doing what the ralph-loop plugin's hook does (bench/ralph_hook.sh: grep the whole transcript,
tail, jq), on transcripts of 1 MB, 20 MB, 200 MB and 1 GB.

Targets (issue 4): median < 100 ms at every size, and faster than the bash hook from 20 MB up.
The transcripts are bench_sources.py's (real sample lines plus 200 KB tool results).
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_sources import transcript
from tests.conftest import SAMPLES

HERE = Path(__file__).resolve().parent
LOOPDECK = Path(sys.executable).with_name("loopdeck")
RUNS = 15


def timed(argv: list[str], cwd: Path, payload: str) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, input=payload, capture_output=True, text=True, check=True)
    return (time.perf_counter() - start) * 1000, done.stdout


def main() -> None:
    if not LOOPDECK.exists():
        sys.exit(f"{LOOPDECK} not found: run from the project's virtual environment")
    if not shutil.which("jq"):
        sys.exit("the bash hook needs jq (apt-get install jq)")
    print(f"{'transcript':>12}  {'loopdeck hook stop':>24}  {'bash (ralph-loop style)':>24}")
    for size in (1 << 20, 20 << 20, 200 << 20, 1 << 30):
        path = transcript(size)
        with tempfile.TemporaryDirectory() as tmp:
            ws = Path(tmp)
            (ws / ".claude").mkdir()
            (ws / "TODO.md").write_text("- [ ] one task left\n")
            subprocess.run(
                [
                    str(LOOPDECK),
                    "start",
                    "bench",
                    "--task-file",
                    "TODO.md",
                    "--no-github",
                    "--max-iterations",
                    "0",
                ],
                cwd=ws,
                check=True,
                capture_output=True,
            )
            ralph = (
                (SAMPLES / "ralph-loop.local.md")
                .read_text()
                .replace("max_iterations: 20", "max_iterations: 0")
            )
            payload = json.dumps(
                {
                    "session_id": "s",
                    "transcript_path": str(path),
                    "cwd": str(ws),
                    "hook_event_name": "Stop",
                    "stop_hook_active": True,
                }
            )
            ours, theirs = [], []
            for _ in range(RUNS):
                ms, out = timed([str(LOOPDECK), "hook", "stop"], ws, payload)
                assert json.loads(out)["decision"] == "block", out
                ours.append(ms)
                (ws / ".claude" / "ralph-loop.local.md").write_text(ralph)
                (ws / ".claude" / "orchestrator-loop.local.md").rename(ws / "hidden.md")
                ms, out = timed(["bash", str(HERE / "ralph_hook.sh")], ws, payload)
                assert json.loads(out)["decision"] == "block", out
                theirs.append(ms)
                (ws / ".claude" / "ralph-loop.local.md").unlink()
                (ws / "hidden.md").rename(ws / ".claude" / "orchestrator-loop.local.md")
            mb = path.stat().st_size / 2**20
            print(
                f"{mb:>9,.0f} MB  median {statistics.median(ours):7.1f} ms (max {max(ours):6.1f})"
                f"  median {statistics.median(theirs):7.1f} ms (max {max(theirs):6.1f})",
                flush=True,
            )


if __name__ == "__main__":
    main()
