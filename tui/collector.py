"""Python's garbage collector set for a monitor that runs for days.

A full collection walks every object the process holds. Once the monitor's screen is up, that is
about a hundred thousand objects (Textual's widgets, styles and caches, the modules), nearly all
of which live as long as the monitor does. Walking them took 35 to 110 ms each time, about every
ten seconds while a loop ran five iterations a second: a frame held back by a tenth of a second
is what a person sees stutter, and what made the monitor's slowest change-to-screen times.

Frozen (`gc.freeze`) once the first screen is drawn, they are left out of every later
collection; what the monitor makes afterwards (snapshots, rows, prompts) is collected as before.
"""

from __future__ import annotations

import gc


def settle() -> None:
    """Collect what starting up left behind, then freeze what is left: it is the monitor's own
    lasting state, and no collection needs to walk it again."""
    gc.collect()
    gc.freeze()
