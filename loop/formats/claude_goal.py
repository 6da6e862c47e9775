"""Claude Code's own `/goal`: a condition a small model checks after every turn of a session.

`/goal <condition>` (Claude Code 2.1.139 and later) keeps no file of its own: it lives in the
session, and the session's transcript (`~/.claude/projects/<the folder's path, every character
but letters and digits a "-">/<session>.jsonl`) records it as `attachment` lines of type
`goal_status` (seen on 2.1.332, tests/fixtures/samples/real-cli/goal-*.jsonl):

* set: `{"met": false, "sentinel": true, "condition": …}`;
* after each evaluation: `{"met": false, "condition": …, "reason": …}`, or, once met,
  `{"met": true, "condition": …, "reason": …, "iterations": N, "durationMs": …, "tokens": …}`;
* cleared (`/goal clear`): `{"met": true, "sentinel": true, "condition": …}`.

So the last `goal_status` of the folder's newest transcript says whether a goal is active. Only
the transcript's end is read (`TAIL_BYTES`): a goal whose last evaluation lies further back (a
very long turn) is not listed until the next one. loopdeck never drives or ends it: Claude Code
does (`/goal clear` in the session).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from loop.core.errors import FileProblem
from loop.formats.view import NeighbourLoop

KIND = "claude-goal"
TAIL_BYTES = 256 * 1024
"""How much of a transcript's end is searched for the goal's last status."""


def _projects(root: Path) -> str:
    """`project_folder`, as a string: the monitor looks for a goal on every snapshot, and a
    `Path` made of the folder's name each time interned that name anew each time."""
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    home = os.path.expanduser(configured) if configured else os.path.join(os.path.expanduser("~"), ".claude")
    return os.path.join(home, "projects", re.sub(r"[^A-Za-z0-9]", "-", str(root)))


def project_folder(root: Path) -> Path:
    """Where Claude Code keeps the transcripts of sessions started in `root`."""
    return Path(_projects(root))


def _newest(folder: str) -> Path | None:
    newest: tuple[float, str] | None = None
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if not entry.name.endswith(".jsonl") or not entry.is_file(follow_symlinks=False):
                    continue
                stamp = (entry.stat(follow_symlinks=False).st_mtime, entry.path)
                if newest is None or stamp > newest:
                    newest = stamp
    except OSError:
        return None
    return Path(newest[1]) if newest is not None else None


def _statuses(path: Path) -> list[dict[str, Any]]:
    """The `goal_status` lines in the transcript's last `TAIL_BYTES`, oldest first."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            start = max(0, size - TAIL_BYTES)
            f.seek(start)
            data = f.read(TAIL_BYTES)
    except OSError as exc:
        raise FileProblem(path, f"cannot be read ({exc.strerror})") from None
    lines = data.split(b"\n")
    if start:
        lines = lines[1:]  # cut in the middle
    found = []
    for raw in lines:
        if b"goal_status" not in raw:
            continue
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        status = obj.get("attachment") if isinstance(obj, dict) and obj.get("type") == "attachment" else None
        if isinstance(status, dict) and status.get("type") == "goal_status":
            found.append({**status, "_ts": obj.get("timestamp"), "_session": obj.get("sessionId")})
    return found


def locate(root: Path) -> Path | None:
    """The transcript of the folder's newest session when it has an active goal, else None."""
    newest = _newest(_projects(root))
    if newest is None:
        return None
    try:
        statuses = _statuses(newest)
    except FileProblem:
        return None
    return newest if statuses and statuses[-1].get("met") is False else None


def read(path: Path) -> NeighbourLoop:
    statuses = _statuses(path)
    if not statuses:
        raise FileProblem(path, "has no /goal status in its last part (the goal ended or is far back)")
    last = statuses[-1]
    condition = last.get("condition")
    status = "running"
    if last.get("met") is True:
        status = "stopped" if last.get("sentinel") else "completed"  # cleared, or met
    since = max(
        (i for i, s in enumerate(statuses) if s.get("sentinel") and s.get("met") is False), default=None
    )
    evaluations = [s for s in statuses[(since or 0) :] if not s.get("sentinel")]
    iterations = last.get("iterations")
    reason = last.get("reason")
    return NeighbourLoop(
        kind=KIND,
        state_file=str(path),
        status=status,
        iteration=iterations if isinstance(iterations, int) else len(evaluations),
        prompt=condition if isinstance(condition, str) else "",
        started_at=str(statuses[since]["_ts"]) if since is not None and statuses[since].get("_ts") else None,
        updated_at=str(last["_ts"]) if last.get("_ts") else None,
        session_id=str(last["_session"]) if last.get("_session") else path.stem,
        current_task=f"last check: {reason}" if isinstance(reason, str) and reason else None,
    )
