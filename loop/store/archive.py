"""Finished or replaced loops go to `.claude/loops/<started_at>/`, never to the bin.

A person coming back in the morning wants to know what the loop did, even if a new loop has
started since: the archive keeps the final state and a summary.
"""

from __future__ import annotations

import json
from pathlib import Path

from loop.core.model import LoopState
from loop.core.redact import redact, redact_obj, target_shown
from loop.core.timeutil import iso_ms, utcnow
from loop.store.paths import Workspace, loop_folder_name
from loop.store.safeopen import make_parents, write_bytes
from loop.store.state import render

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: the Stop hook does not pay for typing
    from typing import Any


def folder_name(started_at: str) -> str:
    return loop_folder_name(started_at)


def move_logs(workspace: Workspace, state: LoopState, folder: Path) -> Path | None:
    """Move the loop's iteration logs into its archive `folder` (as `iterations/`), at its
    ending: the archive then holds what the agent said, and the next loop starts with none.
    The folder where they were, if any."""
    import os

    logs = workspace.iteration_logs(state.started_at)
    if not logs.is_dir() or logs.is_symlink():
        return None
    target = folder / "iterations"
    if not target.exists():
        os.replace(logs, target)
        return target
    for entry in sorted(logs.iterdir()):  # a second ending of the same loop: add what is new
        if not (target / entry.name).exists() and not entry.is_symlink():
            os.replace(entry, target / entry.name)
    return target


def archive(
    workspace: Workspace,
    state: LoopState,
    outcome: str,
    summary: dict[str, Any] | None = None,
    reuse: bool = False,
) -> Path:
    """Write the state and a summary into a fresh archive folder; returns the folder.

    `reuse`: one loop's endings (an escalation, then another after `run`, then its completion)
    share its folder, the latest summary replacing the previous, instead of a new folder per
    ending. Both are redacted, the commands, paths and notification targets the live state
    keeps as given too (a target as its scheme and host): an archive outlives the loop, nothing
    runs from it, and it gets shared when people ask for help."""
    base = workspace.archive_dir / folder_name(state.started_at)
    folder = base
    n = 1
    while folder.exists() and not (reuse and _same_loop(folder, state)):
        n += 1
        folder = base.with_name(f"{base.name}.{n}")
    make_parents(folder)  # inside .claude/, not through a symlinked loops/
    folder.mkdir(exist_ok=True)
    shown = state.copy()
    shown.notify = [target_shown(str(target)) for target in state.notify]
    text = redact(render(shown, verbatim=frozenset()))
    write_bytes(folder / "state.md", text.encode("utf-8", "replace"))
    record = {
        "outcome": outcome,
        "archived_at": iso_ms(utcnow()),
        "started_at": state.started_at,
        "status": state.status,
        "iteration": state.iteration,
        "max_iterations": state.max_iterations,
        "prompt": state.prompt,
        **(summary or {}),
    }
    text = json.dumps(redact_obj(record), indent=2, ensure_ascii=False, default=str) + "\n"
    write_bytes(folder / "summary.json", text.encode("utf-8", "replace"))
    return folder


def _same_loop(folder: Path, state: LoopState) -> bool:
    """Is `folder` an earlier ending of this very loop (not one replaced by it)?"""
    try:
        record = json.loads((folder / "summary.json").read_text())
    except (OSError, ValueError):
        return False
    return (
        isinstance(record, dict)
        and record.get("started_at") == state.started_at
        and record.get("outcome") != "replaced by a new loop"
        and record.get("status") in ("running", "paused", "stopped", "failed", "stopping", "initializing")
    )


def latest(workspace: Workspace) -> Path | None:
    try:
        folders = [p for p in workspace.archive_dir.iterdir() if (p / "summary.json").exists()]
    except FileNotFoundError:
        return None
    return max(folders, key=lambda p: (p / "summary.json").stat().st_mtime, default=None)
