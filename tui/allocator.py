"""The C allocator set for a monitor that runs for days (glibc's; elsewhere nothing is done).

Measured with `bench/bench_monitor_soak.py` (the real runner from iteration 1,000 to 10,000):
with glibc's defaults the monitor's memory (RSS) grew 4.9 MB and ended at 66.9 MB; with these
settings it grew 2.4 MB and ended at 61.2 MB. The Python objects the monitor keeps grow by a
fraction of that: the rest was the allocator's own keeping. The three were measured together:

- `M_MMAP_THRESHOLD` fixed at 128 KB. By default glibc raises it to the size of each large block
  freed (up to 32 MB), after which the monitor's large passing buffers (a task file read, a
  journal's tail) come from the heap and leave holes in it; fixed, they are mapped and given
  back to the system when freed.
- `M_TRIM_THRESHOLD` at 128 KB: the free top of the heap is given back beyond that.
- `M_ARENA_MAX` at 1: the worker threads (the snapshot's, git's) share the main heap, not one
  each that keeps what it once held.

A person who sets the allocator up themselves (`MALLOC_*`, `GLIBC_TUNABLES`) keeps theirs.
"""

from __future__ import annotations

import ctypes
import os
import sys
from typing import Any

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
SETTINGS = ((M_MMAP_THRESHOLD, 128 * 1024), (M_TRIM_THRESHOLD, 128 * 1024), (M_ARENA_MAX, 1))
"""(`mallopt` parameter, value), as glibc's malloc.h numbers them."""


def tune(libc: Any = None) -> bool:
    """Apply `SETTINGS` (at the monitor's start, before its threads); whether they were.
    `libc`: the C library to set (tests); by default the process's own."""
    if not sys.platform.startswith("linux") or "GLIBC_TUNABLES" in os.environ:
        return False
    if any(name.startswith("MALLOC_") for name in os.environ):
        return False
    try:
        mallopt = (libc if libc is not None else ctypes.CDLL(None)).mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    return all(mallopt(param, value) == 1 for param, value in SETTINGS)
