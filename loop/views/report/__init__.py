"""`loopdeck report`: what a loop did, as one file a person opens in the morning.

`gather` reads a loop (live, archived, or known only from its journal) into a `LoopReport`:
how it ended and why, its per-iteration figures (`loop.views.progress.series`), each task's
turns, commits, cost and checks, the questions, the escalations and what to look at first.
`html` draws it as one self-contained page (inline CSS, charts as inline SVG, nothing fetched);
`markdown` writes the same as text for a pull request. Only `html` loads the plotting library,
and only when a report is written: nothing here is on the Stop hook's path.
"""

from loop.views.report.find import find_archive
from loop.views.report.gather import gather
from loop.views.report.model import LoopReport, ReportError

__all__ = ["LoopReport", "ReportError", "find_archive", "gather"]
