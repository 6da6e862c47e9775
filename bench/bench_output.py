"""The output panel following an iteration log that grows at 1 MB/s.

The real app, headless (120x40), on a runner workspace; a thread appends claude stream-json
lines (agent text and tool calls) to the current iteration's log at about 1 MB/s. Every 0.5 s
one line carries a marker; the time until the marker is in the panel's log is one sample.
Printed: marker-to-panel p50/p95, the process's CPU over the run (all of it: the writer, the
reader thread and the UI), and what the panel skipped to keep up.

    python bench/bench_output.py [--seconds 10] [--rate-mb 1]

Target (issue 15): p95 < 100 ms while following 1 MB/s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools import screenshots
from tui.widgets.output import OutputPanel


def line(n: int) -> str:
    block: dict[str, object]
    if n % 3:
        block = {"type": "text", "text": f"step {n}: reading the code and thinking about the next edit " * 3}
    else:
        block = {"type": "tool_use", "name": "Bash", "input": {"command": f"pytest -q tests/test_{n}.py"}}
    return json.dumps({"type": "assistant", "message": {"content": [block]}}) + "\n"


def writer(log: Path, seconds: float, rate: float, marks: dict[str, float], stop: threading.Event) -> int:
    written = 0
    start = time.monotonic()
    n = 0
    next_mark = start + 0.5
    with log.open("a", encoding="utf-8") as out:
        while not stop.is_set() and time.monotonic() - start < seconds:
            chunk = "".join(line(n + i) for i in range(50))
            n += 50
            now = time.monotonic()
            if now >= next_mark:
                key = f"MARK-{len(marks)}"
                chunk += json.dumps({"type": "assistant", "message": {"content": key}}) + "\n"
                marks[key] = now
                next_mark += 0.5
            out.write(chunk)
            out.flush()
            written += len(chunk)
            behind = written / rate - (time.monotonic() - start)
            if behind > 0:
                time.sleep(behind)
    return written


async def run(seconds: float, rate: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = screenshots.running(Path(tmp) / "w")
        log = ws.private_dir / "iterations" / "0012.log"
        app = screenshots.app_for(ws, git=False, prompts=False)
        marks: dict[str, float] = {}
        seen: dict[str, float] = {}
        async with app.run_test(size=screenshots.SIZE):  # type: ignore[attr-defined]
            await screenshots.settle(app)
            panel = app.query_one(OutputPanel)  # type: ignore[attr-defined]
            stop = threading.Event()
            result: list[int] = []
            thread = threading.Thread(target=lambda: result.append(writer(log, seconds, rate, marks, stop)))
            cpu0, wall0 = time.process_time(), time.monotonic()
            thread.start()
            real_add = panel.add_lines

            def add_lines(reader: object, raw: list[str]) -> None:
                real_add(reader, raw)
                now = time.monotonic()
                for text in raw:
                    if "MARK-" in text:
                        key = "MARK-" + text.split("MARK-")[1].split('"')[0]
                        seen.setdefault(key, now)

            panel.add_lines = add_lines
            while thread.is_alive():
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)
            stop.set()
            thread.join()
            cpu = (time.process_time() - cpu0) / (time.monotonic() - wall0)
            lags = sorted((seen[k] - marks[k]) * 1000 for k in seen)
            written = result[0] if result else 0
            print(f"output panel following {written / 1e6 / seconds:.2f} MB/s for {seconds:.0f} s")
            if lags:
                p95 = lags[max(0, int(len(lags) * 0.95) - 1)]
                p50 = statistics.median(lags)
                print(f"  marker → panel: p50 {p50:.0f} ms, p95 {p95:.0f} ms, max {lags[-1]:.0f} ms")
            print(f"  markers seen {len(seen)} of {len(marks)}; lines read {panel.lines_read}")
            print(f"  process CPU (writer + reader + UI): {cpu * 100:.0f} % of a core")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rate-mb", type=float, default=1.0)
    args = parser.parse_args()
    asyncio.run(run(args.seconds, args.rate_mb * 1e6))


if __name__ == "__main__":
    main()
