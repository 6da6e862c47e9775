"""The way from the verbs to the Temporal engine: whether a verb is meant for a loop on a
Temporal server, and `loop.temporal.cli`, imported only when one is (the options are in
`loop.cli.definition.temporal`). Importing it loads the SDK (about 0.3 s, and not installed
without the `temporal` extra), so no other verb does: a machine without it gets one line saying
how to install it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from loop.core.errors import LoopdeckError
from loop.core.timeutil import parse_iso
from loop.store.paths import Workspace
from loop.store.safeopen import read_regular
from loop.store.state import StateStore

INSTALL = "the Temporal engine is not installed: pip install 'loopdeck[temporal]'"


def backend() -> Any:
    """`loop.temporal.cli`, or one line saying how to install it."""
    try:
        from loop.temporal import cli  # lazy: the SDK, ~0.3 s, and absent without the extra
    except ImportError as exc:
        if "temporalio" in str(exc):
            raise LoopdeckError(INSTALL) from None
        raise
    return cli


def wanted(args: argparse.Namespace, ws: Workspace | None) -> bool:
    """Is this steering or reading verb for a loop on Temporal (`--temporal`, or the
    workspace's record of its loop there)? The record wins over a loop of the workspace's own
    started before it (a hook or runner loop left from earlier): the later loop is the one a
    person means."""
    if getattr(args, "temporal", None):
        return True
    if ws is None:
        return False
    record = ws.private_dir / "temporal.json"
    if not record.is_file():
        return False
    if not ws.state.exists():
        return True
    return _record_is_newer(record, ws)


def _record_is_newer(record: Path, ws: Workspace) -> bool:
    """Did the recorded Temporal loop start after the workspace's own loop (whose state file
    is there too)? An unreadable state is no loop to steer: the record wins."""
    try:
        recorded = parse_iso(str(json.loads(read_regular(record, 64 * 1024)).get("started_at", "")))
    except (OSError, ValueError, AttributeError):
        return False
    try:
        state = StateStore(ws).read()
    except (OSError, LoopdeckError):
        return True
    if state is None:
        return True
    own = parse_iso(state.started_at or "")
    return recorded is not None and (own is None or recorded >= own)


def cmd_worker(args: argparse.Namespace) -> int:
    """`loopdeck worker`: this machine serves a Temporal server's loops."""
    return int(backend().worker(args))


def cmd_dev(args: argparse.Namespace) -> int:
    """`loopdeck temporal dev`: Temporal's dev server, for a loop of workers on one machine."""
    return int(backend().dev(args))
