"""Where a report is written, and writing it whole.

A live loop's report goes to `.claude/loopdeck/reports/<loop>.html` (loopdeck's own folder, out
of commits); an ended loop's goes into its archive folder (`report.html` beside `summary.json`),
so it travels with the archive. A file is replaced whole (written aside, then renamed): a
browser with the old one open never reads half of the new.
"""

from __future__ import annotations

import os
from pathlib import Path

from loop.store.paths import Workspace
from loop.store.safeopen import write_bytes
from loop.views.report.gather import gather
from loop.views.report.model import LoopReport

REPORT_NAME = "report"


def default_path(ws: Workspace, report: LoopReport, markdown: bool = False) -> Path:
    suffix = ".md" if markdown else ".html"
    if report.folder is not None:
        return Path(report.folder) / (REPORT_NAME + suffix)
    return ws.private_dir / "reports" / (report.name + suffix)


def text_of(report: LoopReport, markdown: bool = False) -> str:
    """The report as a page (HTML) or as markdown. The plotting library loads here, only."""
    if markdown:
        from loop.views.report import markdown as writer
    else:
        from loop.views.report import html as writer  # type: ignore[no-redef]
    return writer.render(report)


def write(path: Path, text: str) -> Path:
    """Write `text` to `path` whole; inside `.claude/` never through a symlink."""
    data = text.encode("utf-8", "replace")
    aside = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    inside = any(part.name == ".claude" for part in path.parents)
    try:
        if inside:
            write_bytes(aside, data)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(aside, "wb") as f:
                f.write(data)
        os.replace(aside, path)
    finally:
        if os.path.lexists(aside):
            os.unlink(aside)
    return path


def ending_report(ws: Workspace, folder: Path) -> Path | None:
    """Write an ended loop's report into its archive `folder`, as the run that drove it ends
    (the summary prints where). A report is a courtesy: one that cannot be written (a full
    disk, a bug) never fails the ending; the summary then names none."""
    try:
        report = gather(ws, archive=folder)
        return write(default_path(ws, report), text_of(report))
    except Exception:  # never the ending's problem: `loopdeck report` says what went wrong
        return None
