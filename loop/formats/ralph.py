"""Anthropic's ralph-loop plugin: `.claude/ralph-loop.local.md`.

YAML front matter (`active`, `iteration`, `session_id`, `max_iterations` with 0 meaning none,
`completion_promise`, `started_at`) and the prompt as the body. The plugin ends a loop by
deleting the file, which is also its only way to cancel one: loopdeck does the same after a
person confirms, keeping a copy under `.claude/loops/` first (loopdeck never deletes the only
copy of anything).
"""

from __future__ import annotations

import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

from loop.core.errors import FileProblem
from loop.formats.common import read_text
from loop.formats.view import NeighbourLoop

KIND = "ralph-loop"
PATH = ".claude/ralph-loop.local.md"


def read(path: Path) -> NeighbourLoop:
    text = read_text(path)
    meta, body = _split(path, text)
    active = _field(path, text, meta, "active", bool, "true or false", required=True)
    iteration = _field(path, text, meta, "iteration", int, "a whole number", required=True)
    limit = _field(path, text, meta, "max_iterations", int, "a whole number (0 for none)")
    promise = meta.get("completion_promise")
    if promise is not None and not isinstance(promise, str | int | float):
        raise FileProblem(
            path, '"completion_promise" should be text or null', _line(text, "completion_promise")
        )
    started = meta.get("started_at")
    session = meta.get("session_id")
    return NeighbourLoop(
        kind=KIND,
        state_file=str(path),
        status="running" if active else "stopped",
        iteration=iteration,
        max_iterations=limit or None,
        prompt=body.strip(),
        completion_promise=None if promise in (None, "null", "") else str(promise),
        started_at=None if started is None else str(started),
        session_id=None if session is None else str(session),
        can_cancel=True,
    )


def _split(path: Path, text: str) -> tuple[dict[str, Any], str]:
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise FileProblem(path, "expected front matter: a first line `---`", 1)
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if end is None:
        raise FileProblem(path, "the front matter has no closing `---` line (truncated?)", len(lines))
    from loop.store.frontmatter import _YAML, yaml_module

    yaml = yaml_module()  # the project's safe loader, which keeps `started_at` as written
    try:
        meta = yaml.load("".join(lines[1:end]), Loader=_YAML["loader"])
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark is not None else None
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise FileProblem(path, f"front matter is not valid YAML: {problem}", line) from None
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise FileProblem(path, "front matter should be `key: value` lines", 2)
    return meta, "".join(lines[end + 1 :])


def _field(
    path: Path, text: str, meta: dict[str, Any], key: str, kind: type, expected: str, required: bool = False
) -> Any:
    value = meta.get(key)
    if value is None:
        if required:
            raise FileProblem(path, f"`{key}` is missing: expected {expected}")
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise FileProblem(path, f"`{key}` should be {expected}, found {value!r:.40}", _line(text, key))
    return value


def _line(text: str, key: str) -> int | None:
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith(f"{key}:"):
            return number
    return None


def cancel(workspace_root: Path, now: datetime) -> Path:
    """End a ralph loop the plugin's way (its state file gone), after keeping a copy.

    Returns where the copy went. Raises `FileProblem` when there is no loop to cancel.
    """
    state = workspace_root / PATH
    if not state.is_file():
        raise FileProblem(state, "no ralph loop to cancel")
    folder = workspace_root / ".claude" / "loops" / f"{now.strftime('%Y%m%dT%H%M%SZ')}-ralph-loop"
    folder.mkdir(parents=True, exist_ok=True)
    kept = folder / state.name
    shutil.copy2(state, kept)
    state.unlink()
    return kept
