"""Claude Code's settings files as `loopdeck install` reads and writes them: JSON merged, never
replaced (a duplicate key or a file that is not an object is refused with where it is), every
change backed up under a name no later run reuses, and the install record (`install.json`) that
lets `--uninstall` take out exactly what was added. Nothing is written through a symlink."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loop.core.errors import FileProblem
from loop.core.timeutil import utcnow
from loop.store.frontmatter import atomic_write
from loop.store.paths import Workspace
from loop.store.safeopen import UnsafePath, check_parent, make_parents, read_regular

SHARED = "settings.json"
LOCAL = "settings.local.json"
MANIFEST = "install.json"


@dataclass
class Report:
    settings: Path
    changed: bool = False
    backup: Path | None = None
    backups: list[Path] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)
    removed: list[Path] = field(default_factory=list)
    moved_from: Path | None = None
    """The other settings file loopdeck's own entries were taken out of (so they run once)."""
    denied: list[str] = field(default_factory=list)
    """The `permissions.deny` rules the settings hold for loopdeck."""
    sandbox: bool = False
    """Whether Claude Code's Bash sandbox is on by loopdeck's install."""


def read_text(path: Path) -> str | None:
    """A settings or command file's text, None when there is none. A FIFO or device in its place
    is an error (NotRegularFile), never a hang."""
    try:
        data = read_regular(path)
    except FileNotFoundError:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileProblem(path, f"not UTF-8 text (byte {exc.start}); expected JSON settings") from None


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's keys, each once: rewriting a file whose `"hooks"` appears twice would keep
    only the last (JSON readers differ), silently dropping the other."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def load(path: Path) -> dict[str, Any]:
    text = read_text(path)
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise FileProblem(
            path, f"not valid JSON (column {exc.colno}: {exc.msg}); fix it and run again", exc.lineno
        ) from None
    except _DuplicateKey as exc:
        raise FileProblem(
            path,
            f"the key {json.dumps(exc.key, ensure_ascii=True)} appears twice in one object; loopdeck "
            "would keep only one of them: merge the two and run again",
        ) from None
    except RecursionError:
        raise FileProblem(path, "nested too deep to read; expected JSON settings") from None
    if not isinstance(data, dict):
        raise FileProblem(path, f"is a JSON {type(data).__name__}, expected an object of settings", 1)
    return data


def expect(container: dict[str, Any], key: str, kind: type, path: Path, where: str) -> Any:
    value = container.get(key)
    if value is None:
        value = kind()
        container[key] = value
    if not isinstance(value, kind):
        raise FileProblem(path, f"{where} is a {type(value).__name__}, expected a {kind.__name__}")
    return value


def backup_of(path: Path) -> Path:
    """Copy `path` to a backup name no other run uses (created exclusively, never overwritten)."""
    stamp = utcnow().strftime("%Y%m%dT%H%M%S%f")
    for n in range(1000):
        candidate = path.with_name(f"{path.name}.bak-{stamp}" + (f"-{n}" if n else ""))
        try:
            out = candidate.open("xb")  # exclusive: never through a symlink, never over a file
        except FileExistsError:
            continue
        try:
            with out, path.open("rb") as src:
                shutil.copyfileobj(src, out)
            shutil.copystat(path, candidate)
        except BaseException:
            with contextlib.suppress(OSError):
                candidate.unlink()  # a full disk leaves no half backup behind
            raise
        return candidate
    raise FileProblem(path, "cannot find a free backup name")


def json_text(data: dict[str, Any]) -> str:
    """The settings as JSON text. A lone surrogate (`"\\ud800"` in the file read) has no UTF-8
    form: it is written back as the same escape, so nothing of the file is lost or changed."""
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", text)
    return text


def save(path: Path, data: dict[str, Any], report: Report) -> bool:
    new = json_text(data)
    old = read_text(path)
    if old == new:
        return False
    if old is not None:
        backup = backup_of(path)
        report.backups.append(backup)
        report.backup = report.backup or backup
    atomic_write(path, new.encode("utf-8"))  # never through a symlink, never outside .claude/
    report.changed = True
    return True


# --- the install record ----------------------------------------------------------------------


def manifest_path(ws: Workspace) -> Path:
    return ws.private_dir / MANIFEST


def read_manifest(ws: Workspace) -> dict[str, Any]:
    path = manifest_path(ws)
    try:
        data = json.loads(read_regular(path))
    except (FileNotFoundError, ValueError, RecursionError):
        return {"files": {}}
    if not isinstance(data, dict) or not isinstance(data.get("files"), dict):
        return {"files": {}}
    return data


def write_manifest(ws: Workspace, manifest: dict[str, Any]) -> None:
    path = manifest_path(ws)
    if not manifest["files"]:
        check_parent(path)  # never an unlink through a symlinked folder
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return
    make_parents(path)  # a real folder inside .claude/, never a symlink to elsewhere
    atomic_write(path, (json.dumps(manifest, indent=2) + "\n").encode("ascii"))


def refuse_unsafe(ws: Workspace, command_files: Iterable[str]) -> None:
    """Refuse, before anything is written, every place install would write through a symlink
    (a settings file, `.claude/loopdeck`, `.claude/commands` or a command file, `.claude`
    itself) or where no regular file can go: a refusal half-way would leave the settings
    changed and the install unrecorded."""
    for name in (LOCAL, SHARED):
        check_parent(ws.claude_dir / name)
        _no_symlink(ws.claude_dir / name)
    check_parent(manifest_path(ws))
    folder = ws.claude_dir / "commands"
    for name in command_files:
        check_parent(folder / name)
        _no_symlink(folder / name)


def _no_symlink(path: Path) -> None:
    if path.is_symlink():
        raise UnsafePath(
            f"{path} is a symlink (to {os.readlink(path)}); loopdeck does not write through "
            "symlinks: put the file itself there, or move the link away"
        )
