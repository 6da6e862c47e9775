"""Which commands a person on this machine agreed to run for a workspace.

A state file can arrive with a repository (committed by someone else, or changed by a pull):
its agent command and verification commands would then run unattended, on this machine, with
nobody having chosen them. So the commands a loop runs are trusted only when this machine
recorded them: when a person started the loop here, gave them on the command line, or
confirmed them (`loopdeck trust`, or `--yes` for scripts). The record lives outside the
workspace (`$XDG_STATE_HOME/loopdeck/trust/`), where no repository can put it.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from loop.model import LoopState
from loop.paths import Workspace

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: the Stop hook does not pay for typing
    from typing import Any


def commands(state: LoopState) -> list[str]:
    """Every command the loop would run: the runner's agent, the verification commands and
    the entries added to their allowlist, any audit."""
    found: list[str] = []
    runner = state.extra.get("runner")
    if isinstance(runner, dict) and isinstance(runner.get("agent"), str):
        found.append(f"agent: {runner['agent']}")
    found += [f"verify: {c}" for c in state.verify]
    allow = state.extra.get("verify_allow")
    if isinstance(allow, list):
        found += [f"allowed: {a}" for a in allow if isinstance(a, str)]
    board = state.extra.get("parallel")
    if isinstance(board, dict) and isinstance(board.get("audit"), str) and board["audit"]:
        found.append(f"audit: {board['audit']}")
    return found


def _home() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "loopdeck" / "trust"


def _record_path(ws: Workspace) -> Path:
    key = hashlib.sha256(str(ws.root.resolve()).encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return _home() / f"{key}.json"


def _digest(listed: list[str]) -> str:
    return hashlib.sha256(json.dumps(listed, ensure_ascii=False).encode("utf-8", "replace")).hexdigest()


def untrusted(ws: Workspace, state: LoopState) -> list[str]:
    """The commands that need a person's confirmation before they run (empty: none, or this
    machine recorded exactly these)."""
    listed = commands(state)
    if not listed:
        return []
    try:
        record: Any = json.loads(_record_path(ws).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return listed
    if isinstance(record, dict) and record.get("digest") == _digest(listed):
        return []
    return listed


def record(ws: Workspace, state: LoopState) -> None:
    """Remember that a person on this machine chose these commands for this workspace."""
    listed = commands(state)
    path = _record_path(ws)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(
            json.dumps({"workspace": str(ws.root), "digest": _digest(listed), "commands": listed}, indent=1),
            encoding="utf-8",
        )
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only home: the person is asked again next time, nothing worse
