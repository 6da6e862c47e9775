"""The verb that tells what a loop did: `report` (one HTML page, or markdown for a pull request)."""

from __future__ import annotations

from loop.cli.definition.base import Command, VerbGroup


def add(verbs: VerbGroup) -> None:
    report = verbs.add_parser(
        "report",
        help="what a loop did, as one HTML page with charts (or markdown)",
        description=(
            "Write a report of a loop: how it ended and why, its tests, tasks, cost and turn times per "
            "iteration, its questions and escalations, and what to look at first. One HTML file that "
            "loads nothing from the network (charts are inline SVG), or markdown for a pull request. "
            "Of the live loop by default, else of the latest archived one."
        ),
    )
    which = report.add_mutually_exclusive_group()
    which.add_argument(
        "--archive",
        metavar="ID",
        help="an archived loop: its folder name in .claude/loops (or the start of it) or its loop id",
    )
    which.add_argument(
        "--latest-archive", action="store_true", help="the latest archived loop, even when one runs now"
    )
    report.add_argument(
        "--out",
        metavar="FILE",
        help="where to write it (- for standard output; default: the loop's archive folder, or "
        ".claude/loopdeck/reports/ for a live loop)",
    )
    report.add_argument("--markdown", action="store_true", help="GitHub-flavoured markdown instead of HTML")
    report.add_argument("--open", action="store_true", help="open it with the system's browser or viewer")
    report.set_defaults(func=Command("loop.cli.report:cmd_report"))
