"""Small timing helpers shared by the bench scripts (figures printed, never asserted)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def measure(fn: Callable[[], object], repeat: int, warmup: int = 3) -> list[float]:
    """Wall-clock milliseconds of `repeat` calls, after `warmup` untimed ones."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return times


def summary(times: list[float]) -> str:
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return f"median {statistics.median(ordered):7.2f} ms   p95 {p95:7.2f} ms   (n={len(ordered)})"


def row(label: str, times: list[float], target: str = "") -> None:
    print(f"{label:<48} {summary(times)}" + (f"   target {target}" if target else ""))
