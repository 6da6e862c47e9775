"""Finished or replaced loops go to `.claude/loops/<started_at>-<loop id>/`, never to the bin.

A person coming back in the morning wants to know what the loop did, even if a new loop has
started since: the archive keeps the final state and a summary.
"""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from loop.core.model import LoopState, same_loop
from loop.core.redact import redact, redact_obj, target_shown
from loop.core.timeutil import iso_ms, utcnow
from loop.store.paths import Workspace, loop_folder_name
from loop.store.safeopen import make_parents, write_bytes
from loop.store.state import render


def folder_name(started_at: str, loop_id: str = "") -> str:
    return loop_folder_name(started_at, loop_id)


def move_logs(workspace: Workspace, state: LoopState, folder: Path) -> Path | None:
    """Move the loop's iteration logs into its archive `folder` (as `iterations/`), at its
    ending: the archive then holds what the agent said, and the next loop starts with none.
    The folder where they were, if any."""
    logs = workspace.iteration_logs(state.started_at, state.loop_id)
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
    folder = _folder_for(workspace.archive_dir, state, reuse)
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
        **({"loop_id": state.loop_id} if state.loop_id else {}),
        "status": state.status,
        "iteration": state.iteration,
        "max_iterations": state.max_iterations,
        "prompt": state.prompt,
        **(summary or {}),
    }
    text = json.dumps(redact_obj(record), indent=2, ensure_ascii=False, default=str) + "\n"
    write_bytes(folder / "summary.json", text.encode("utf-8", "replace"))
    return folder


def _folder_for(archive_dir: Path, state: LoopState, reuse: bool) -> Path:
    """The folder an ending of `state` goes to: `<started_at>-<id>`, then `.N` when it is the
    Nth archive of a loop started in that second (another loop's, or this one's earlier
    ending), so that the names alone order them; with `reuse`, this loop's earlier folder."""
    second = folder_name(state.started_at)
    base = folder_name(state.started_at, state.loop_id)
    try:
        with os.scandir(archive_dir) as entries:
            siblings = sorted(
                entry.name
                for entry in entries
                if entry.name == second or entry.name.startswith((second + "-", second + "."))
            )
    except (FileNotFoundError, NotADirectoryError):
        siblings = []
    if reuse:
        for name in siblings:
            if (name == base or name.startswith(base + ".")) and _same_loop(archive_dir / name, state):
                return archive_dir / name
    n = len(siblings) + 1
    folder = archive_dir / (base if n == 1 else f"{base}.{n}")
    while folder.exists():
        n += 1
        folder = archive_dir / f"{base}.{n}"
    return folder


def _same_loop(folder: Path, state: LoopState) -> bool:
    """Is `folder` an earlier ending of this very loop (not one replaced by it)?"""
    try:
        record = json.loads((folder / "summary.json").read_text())
    except (OSError, ValueError):
        return False
    return (
        isinstance(record, dict)
        and same_loop(
            str(record.get("started_at") or ""),
            str(record.get("loop_id") or ""),
            state.started_at,
            state.loop_id,
        )
        and record.get("outcome") != "replaced by a new loop"
        and record.get("status") in ("running", "paused", "stopped", "failed", "stopping", "initializing")
    )


_STAMP = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2})-(\d{2})-(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}-?\d{2})?(?:-[0-9A-Za-z]+)?"
    r"(?:\.(\d+))?"
)
"""A folder's name: `started_at` as `folder_name` writes it (`2026-01-09T10-30-00+00-00`), the
loop's id after it (none in folders archived before loops had one), and the `.N` of the Nth
archive of that second."""


def _order(name: str) -> tuple[int, str, int]:
    """Where a folder stands among the archives, from its name alone: by the moment its loop
    started (in UTC), then by its `.N`; a name that holds no moment (`unknown`, a folder a
    person made) comes before every one that does."""
    match = _STAMP.fullmatch(name)
    if match is None:
        return (0, name, 0)
    year, month, day, hour, minute, second, fraction, zone, n = match.groups()
    stamp = f"{year}{month}{day}{hour}{minute}{second}"
    if zone and zone.replace("-", "").replace("+", "").strip("0"):  # not UTC: moved to UTC
        digits = zone[1:].replace("-", "")
        offset = timedelta(minutes=int(digits[:2]) * 60 + int(digits[2:]))
        try:
            moment = datetime.strptime(stamp, "%Y%m%d%H%M%S").replace(tzinfo=UTC)
        except ValueError:
            return (0, name, 0)
        stamp = (moment - offset if zone[0] == "+" else moment + offset).strftime("%Y%m%d%H%M%S")
    return (1, stamp + (fraction or "").ljust(9, "0"), int(n) if n else 1)


PLAIN_END = "+00-00"
PLAIN_LENGTH = len("2026-01-09T10-30-00+00-00")
ID_LENGTH = len("-1f2e3d4c5b6a")
"""The names nearly every archive has (a loop started in UTC, the first archived in its second,
with its id or from before loops had one): among such names, the order of the strings is the
order in time."""


def _plain(name: str) -> bool:
    if len(name) == PLAIN_LENGTH:
        return name.endswith(PLAIN_END)
    return (
        len(name) == PLAIN_LENGTH + ID_LENGTH
        and name[PLAIN_LENGTH] == "-"
        and name.startswith(PLAIN_END, PLAIN_LENGTH - len(PLAIN_END))
        and "." not in name
    )


def latest(workspace: Workspace) -> Path | None:
    """The newest archive: the folder whose name holds the latest start (`folder_name`), found
    in one pass over the folder's entries, its summary checked only for the folders tried (the
    newest, unless it has none). Its cost does not grow with the number of archives beyond that
    one listing: no summary of the others is opened or looked at, and of the usual names
    (`PLAIN_END`) only the greatest is read as a moment (`_order`), the others being compared
    as strings."""
    plain: list[str] = []
    keyed: list[tuple[tuple[int, str, int], str]] = []
    try:
        with os.scandir(workspace.archive_dir) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    name = entry.name
                    if _plain(name):
                        plain.append(name)
                    else:
                        keyed.append((_order(name), name))
    except (FileNotFoundError, NotADirectoryError):
        return None
    while plain or keyed:  # the newest first; the next only when it has no summary (rare)
        while plain:  # the greatest plain name that is a moment joins the others
            best = max(plain)
            plain.remove(best)
            keyed.append((_order(best), best))
            if keyed[-1][0][0]:
                break
        newest = max(keyed)
        folder = workspace.archive_dir / newest[1]
        if os.path.isfile(folder / "summary.json"):
            return folder
        keyed.remove(newest)
    return None


def latest_summary(workspace: Workspace) -> tuple[Path, dict[str, Any]] | None:
    """The newest archive and its summary (`latest`), None when there is none or its summary
    does not read as one."""
    folder = latest(workspace)
    if folder is None:
        return None
    try:
        data = json.loads((folder / "summary.json").read_text())
    except (OSError, ValueError):
        return None
    return (folder, data) if isinstance(data, dict) else None
