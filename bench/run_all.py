"""Run every bench script in turn and print their figures: `python bench/run_all.py [--full]`.

The long ones run shortened unless `--full` is given: the hook comparison up to 200 MB, the
monitor soak for one minute (run them alone for the figures of record: 1 GB, 10 minutes).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

SHORT: dict[str, list[str]] = {
    "bench_hook_vs_bash.py": ["--sizes", "1,20,200", "--runs", "5"],
    "bench_monitor_soak.py": ["--seconds", "60"],
    "bench_flat.py": ["--hook-sizes", "1,200", "--skip", "monitor"],  # the soak runs on its own here
}
"""Arguments that keep a default run of everything reasonably short."""


def main() -> int:
    full = "--full" in sys.argv[1:]
    failed = 0
    for script in sorted(HERE.glob("bench_*.py")):
        extra = [] if full else SHORT.get(script.name, [])
        print(f"\n== {script.name} {' '.join(extra)}".rstrip(), flush=True)
        failed |= subprocess.call([sys.executable, str(script), *extra], cwd=HERE.parent)
    return failed


if __name__ == "__main__":
    sys.exit(main())
