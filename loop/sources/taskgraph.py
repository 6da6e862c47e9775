"""The task graph `run --workers` schedules: a Claude Code Tasks list folder, or one JSON or
YAML file holding the same fields.

The graph is read fresh every cycle and updated in place, in its own format, so a person or
Claude Code looking at it sees who owns what: a worker that adds a task to the list adds it to
the graph. Each update rewrites one task (the folder) or the file, by an atomic rename, and
keeps every field loopdeck does not know.

Fields (Claude Code's): `id`, `subject`, `description`, `status` (pending, in_progress,
completed; `deleted` tasks are left out), `blocks`, `blockedBy`, `owner`, and
`metadata.target_files` (the files the task may change; a top-level `target_files` is read
too).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from loop.core.errors import LoopdeckError
from loop.core.scheduler import Task, Update
from loop.store.frontmatter import atomic_write

MAX_BYTES = 16 * 1024 * 1024


class GraphError(LoopdeckError):
    pass


def _strs(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(str(v) for v in value if isinstance(v, str | int) and not isinstance(v, bool))


TARGETS = "a path relative to the workspace, inside it (no leading `:`, no `/`, no `..`)"


def target_problem(entry: str) -> str | None:
    """Why `entry` of `target_files` is not a file of the workspace, or None. A task's files are
    committed by name (`git add -- FILES`): `:/` or `:(glob)**` would be git's pathspec magic
    for every file of the repository, and `/…` or `../…` a file outside the workspace."""
    if not entry.strip():
        return "an empty path"
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in entry):
        return "a control character"
    if entry.startswith(":"):
        return "git pathspec magic (a leading `:`)"
    if entry.startswith(("/", "~")) or os.path.isabs(entry):
        return "an absolute path"
    if os.path.normpath(entry).split(os.sep)[0] == "..":
        return "a path out of the workspace (`..`)"
    return None


def _files(value: Any, task_id: str) -> tuple[str, ...]:
    files = _strs(value)
    for entry in files:
        problem = target_problem(entry)
        if problem is not None:
            raise GraphError(f"task {task_id}: target_files entry {entry!r} is {problem}; expected {TARGETS}")
    return files


def _task(obj: dict[str, Any], fallback_id: str) -> Task | None:
    status = obj.get("status", "pending")
    if status == "deleted":
        return None
    raw = obj.get("metadata")
    metadata: dict[str, Any] = raw if isinstance(raw, dict) else {}
    task_id = str(obj.get("id", fallback_id))
    files = _files(metadata.get("target_files"), task_id) or _files(obj.get("target_files"), task_id)
    owner = obj.get("owner")
    return Task(
        id=task_id,
        subject=str(obj.get("subject") or obj.get("title") or fallback_id),
        description=str(obj.get("description") or ""),
        status=str(status) if isinstance(status, str) else "pending",
        owner=str(owner) if isinstance(owner, str) and owner else None,
        blocked_by=_strs(obj.get("blockedBy")),
        target_files=files,
        skipped=metadata.get("skipped") is True,
    )


def _sort_key(task: Task) -> tuple[int, int, str]:
    return (0, int(task.id), "") if task.id.isdigit() else (1, 0, task.id)


def _is_yaml(path: Path) -> bool:
    return path.suffix.lower() in (".yaml", ".yml")


def _load_file(path: Path) -> tuple[Any, list[dict[str, Any]]]:
    """The file's whole document and its list of task objects (the same objects, to edit)."""
    try:
        if path.stat().st_size > MAX_BYTES:
            raise GraphError(f"{path}: too large for a task graph")
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise GraphError(f"{path}: cannot be read ({exc.strerror})") from None
    try:
        doc = yaml.safe_load(text) if _is_yaml(path) else json.loads(text)
    except ValueError as exc:  # yaml.YAMLError is a ValueError's cousin: caught below
        raise GraphError(f"{path}: not a task graph ({exc})") from None
    except Exception as exc:
        raise GraphError(f"{path}: not a task graph ({type(exc).__name__}: {exc})") from None
    tasks = doc.get("tasks") if isinstance(doc, dict) else doc
    if not isinstance(tasks, list):
        raise GraphError(f"{path}: expected a list of tasks, or an object with a `tasks` list")
    return doc, [t for t in tasks if isinstance(t, dict)]


def _dump(path: Path, doc: Any) -> None:
    if _is_yaml(path):
        text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    else:
        text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    atomic_write(path, text.encode("utf-8"))


def read(path: Path) -> list[Task]:
    """Every task of the graph (deleted ones left out), in id order. A task file caught
    mid-write or not JSON is passed over: it is read again next cycle."""
    if path.is_dir():
        tasks: list[Task] = []
        for entry in sorted(path.glob("*.json")):
            if entry.name.startswith("."):
                continue
            try:
                obj = json.loads(entry.read_bytes())
            except (OSError, ValueError):
                continue
            if isinstance(obj, dict):
                task = _task(obj, entry.stem)
                if task is not None:
                    tasks.append(task)
        return sorted(tasks, key=_sort_key)
    if not path.exists():
        raise GraphError(f"{path}: no such task graph (a Claude Code Tasks folder, or a .json/.yaml file)")
    _doc, objs = _load_file(path)
    found = [_task(obj, str(i + 1)) for i, obj in enumerate(objs)]
    return sorted((t for t in found if t is not None), key=_sort_key)


def _apply(obj: dict[str, Any], update: Update) -> None:
    obj["status"] = update.status
    if update.owner:
        obj["owner"] = update.owner
    else:
        obj.pop("owner", None)
    raw = obj.get("metadata")
    metadata: dict[str, Any] = raw if isinstance(raw, dict) else {}
    merged = {**metadata, **update.metadata}
    if "skipped" not in update.metadata:  # done, or open again, since a person skipped it
        merged.pop("skipped", None)
    if merged != metadata:
        obj["metadata"] = merged


def write(path: Path, updates: Iterable[Update]) -> None:
    """Carry `updates` into the graph, in place; a task that vanished is passed over."""
    updates = list(updates)
    if not updates:
        return
    if path.is_dir():
        for update in updates:
            target = _task_file(path, update.task)
            if target is None:
                continue
            try:
                obj = json.loads(target.read_bytes())
            except (OSError, ValueError):
                continue
            if isinstance(obj, dict):
                _apply(obj, update)
                atomic_write(target, (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode())
        return
    doc, objs = _load_file(path)
    by_id = {str(obj.get("id", i + 1)): obj for i, obj in enumerate(objs)}
    for update in updates:
        obj = by_id.get(update.task)
        if obj is not None:
            _apply(obj, update)
    _dump(path, doc)


def _task_file(folder: Path, task_id: str) -> Path | None:
    direct = folder / f"{task_id}.json"
    if direct.is_file():
        return direct
    for entry in folder.glob("*.json"):
        with contextlib.suppress(OSError, ValueError):
            obj = json.loads(entry.read_bytes())
            if isinstance(obj, dict) and str(obj.get("id", entry.stem)) == task_id:
                return entry
    return None


def list_id(path: Path) -> str | None:
    """The Claude Code task list a worker should use (`CLAUDE_CODE_TASK_LIST_ID`): the folder's
    name when the graph is a Tasks list folder."""
    return path.name if path.is_dir() else None


def stamp(path: Path) -> str:
    """What changes when the graph does (a task added, edited or removed), cheaply."""
    try:
        if path.is_dir():
            parts = []
            with os.scandir(path) as it:
                for entry in it:
                    if entry.name.endswith(".json"):
                        info = entry.stat()
                        parts.append(f"{entry.name}:{info.st_size}:{info.st_mtime_ns}")
            return "|".join(sorted(parts))
        info = path.stat()
        return f"{info.st_size}:{info.st_mtime_ns}"
    except OSError:
        return ""
