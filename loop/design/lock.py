"""The design is locked while its loop runs: the state records its checksum when the loop
starts, and the drivers compare it each turn (one file read and hash). The engine escalates
when it differs; a sandboxed agent cannot write it at all (`paths`)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from loop.core.model import LoopState
from loop.design.parse import MAX_BYTES, Design, read_bytes

KEY = "design"
"""Where the state keeps the design's record (`LoopState.extra`)."""


def shown(root: Path, path: Path) -> str:
    """The design's path as the state and the prompt name it: relative to the workspace when
    inside it, else absolute."""
    full = Path(os.path.abspath(path))
    try:
        return str(full.relative_to(os.path.abspath(root)))
    except ValueError:
        return str(full)


def record(root: Path, design: Design) -> dict[str, Any]:
    """What the state keeps of a design: enough to check it, show it and lock it."""
    return {
        "path": shown(root, design.path),
        "sha256": design.sha256,
        "type": design.task_type,
        "status": design.status,
        "criteria": [{"text": c.text, "command": c.command} for c in design.criteria],
        "commands": design.commands,
    }


def recorded(state: LoopState) -> dict[str, Any] | None:
    data = state.extra.get(KEY)
    if not isinstance(data, dict) or not isinstance(data.get("path"), str) or not data.get("path"):
        return None
    return data


def paths(root: Path, state: LoopState | None) -> tuple[Path, ...]:
    """The files a sandboxed agent of this loop may read but not write (its design)."""
    data = recorded(state) if state is not None else None
    return () if data is None else (root / data["path"],)


def changed(root: Path, state: LoopState) -> str | None:
    """The design's path when it differs from what the loop started with (changed, removed,
    replaced by a symlink: a link counts as changed even to the same content, as it is never
    read through); None when it is the same, or the loop has none."""
    data = recorded(state)
    if data is None:
        return None
    try:
        digest = hashlib.sha256(read_bytes(root / data["path"], MAX_BYTES + 1)).hexdigest()
    except OSError:
        return str(data["path"])
    return None if digest == data.get("sha256") else str(data["path"])
