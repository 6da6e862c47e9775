"""The verbs that read a loop: `status`, `sources`, `log` (`-f` follows it)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from loop import formats
from loop.cli import temporal
from loop.cli.options import workspace_of
from loop.core.errors import LoopdeckError
from loop.core.model import replace
from loop.core.visible import visible
from loop.sources.aggregate import SourceConfig, check_all
from loop.store.journal import Journal, render_line
from loop.store.state import StateStore
from loop.views.snapshot import read
from loop.views.status_text import render


def cmd_status(args: argparse.Namespace) -> int:
    ws = workspace_of(args)
    if temporal.wanted(args, ws):
        return int(temporal.backend().status(args, ws))
    if not args.json:
        code, lines, errors = render(ws)
        for line in lines:
            print(visible(line))
        for line in errors:
            print(f"loopdeck: {visible(line)}", file=sys.stderr)
        return code
    snap = read(ws)
    obj = snap.to_json()
    ours = obj["loop"]
    if snap.error is not None:  # listed like an unreadable neighbour: kind, file, problem
        ours = {
            "kind": formats.OURS,
            "state_file": str(ws.state),
            "status": "unreadable",
            "error": obj["error"],
        }
    obj["loops"] = formats.loops_json(ours, formats.detect(ws.root))
    print(json.dumps(obj, indent=2, ensure_ascii=False))
    if snap.error is not None:
        print(f"loopdeck: error: {snap.error.message}", file=sys.stderr)
        if ws.backup.exists():
            print(f"loopdeck: a backup of the last good state is in {ws.backup}", file=sys.stderr)
        return 1
    return 0


# --- sources -------------------------------------------------------------------------------


def cmd_sources(args: argparse.Namespace) -> int:
    ws = workspace_of(args)
    state = StateStore(ws).read()
    config = SourceConfig.from_state(
        ws,
        state,
        task_file=args.task_file,
        transcript=Path(args.transcript) if args.transcript else None,
        tasks_dir=Path(args.tasks_dir) if args.tasks_dir else None,
        session_id=args.session,
    )
    if args.no_github:
        config = replace(config, check_github=False)
    result = check_all(config)
    if args.json:
        print(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
        return 0
    print(f"{'SOURCE':<14}{'PENDING':>8}{'IN PROG':>9}{'DONE':>7}  WHERE")
    for report in result.sources:
        if not report.enabled:
            where = f"off: {report.error}"
        elif not report.available:
            where = f"UNAVAILABLE: {report.error}"
        else:
            where = report.detail or ""
        counts = (
            f"{report.pending:>8}{report.in_progress:>9}{report.done:>7}"
            if report.available
            else f"{'-':>8}{'-':>9}{'-':>7}"
        )
        print(visible(f"{report.name:<14}{counts}  {where}"))
    print(
        f"\npending total: {result.pending_total}"
        + ("  (UNCERTAIN: a source is unavailable)" if result.uncertain else "")
    )
    for report in result.with_pending:
        for item in report.pending_items()[:5]:
            where = f" (line {item.line})" if item.line else ""
            print(visible(f"  {report.name}: [{item.status}] {item.title}{where}"))
    return 0


def cmd_log(args: argparse.Namespace) -> int:
    ws = workspace_of(args)

    if temporal.wanted(args, ws):
        return int(temporal.backend().log(args, ws))
    if not args.follow and not ws.journal.exists():  # with -f: it waits for a loop to start
        raise LoopdeckError(f"no loop in {ws.root} has a journal yet: `loopdeck run PROMPT` starts one")
    journal = Journal(ws.journal)
    result = journal.tail(args.n)
    for problem in result.problems:
        print(f"loopdeck: {ws.journal}: skipped {problem}", file=sys.stderr)
    if args.json and not args.follow:
        print(json.dumps({"events": [e.to_json() for e in result.events]}, ensure_ascii=False))
        return 0

    def show(events: Sequence[Any]) -> None:
        for event in events:
            line = json.dumps(event.to_json(), ensure_ascii=False) if args.json else render_line(event)
            print(line, flush=True)

    show(result.events)
    if not args.follow:
        return 0
    offset = result.offset
    try:
        while True:
            time.sleep(0.25)
            more = journal.read_from(offset)
            for problem in more.problems:
                print(f"loopdeck: {ws.journal}: skipped {problem}", file=sys.stderr)
            show(more.events)
            offset = more.offset
    except KeyboardInterrupt:
        return 0
