"""`loopdeck report`: write what a loop did to one file, print where, and open it if asked."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from loop.cli.options import workspace_of
from loop.core.errors import LoopdeckError
from loop.views.report import find_archive, gather
from loop.views.report.files import default_path, text_of, write


def cmd_report(args: argparse.Namespace) -> int:
    ws = workspace_of(args)
    archive = find_archive(ws, args.archive) if args.archive else None
    report = gather(ws, archive=archive, latest_archive=args.latest_archive)
    text = text_of(report, markdown=args.markdown)
    if args.out == "-":
        if args.open:
            raise LoopdeckError("--open needs a file: give --out FILE, or leave --out out")
        sys.stdout.write(text)
        return 0
    path = Path(args.out).expanduser() if args.out else default_path(ws, report, markdown=args.markdown)
    if path.is_dir():
        raise LoopdeckError(f"--out {args.out} is a folder, expected a file name")
    write(path.absolute(), text)
    print(path.absolute())
    if args.open and not open_file(path.absolute()):
        print(
            f"loopdeck: no browser or viewer could open it here; open {path.absolute()} by hand",
            file=sys.stderr,
        )
    return 0


def open_file(path: Path) -> bool:
    """Open `path` with the platform's opener (argv, never a shell): a browser for HTML, and
    for markdown whatever the system opens it with."""
    import webbrowser  # ~10 ms (`-X importtime`): only when --open asks

    try:
        return bool(webbrowser.open(path.as_uri()))
    except webbrowser.Error:
        return False
