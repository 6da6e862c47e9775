"""Source 3: a markdown checklist (`--task-file`).

`- [ ]` pending, `- [~]` in progress, `- [x]`/`- [X]` done, `- [-]` skipped; `*`, `+` and
numbered bullets, any indentation. Boxes inside fenced code blocks or HTML comments are
examples, not tasks, and do not count. The file must stay inside the workspace: the loop reads
what the agent may write, and nothing else.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

from loop.core.model import field, record
from loop.sources.base import MAX_ITEMS, SourceReport, TaskItem, unavailable
from loop.store.safeopen import read_regular

NAME = "task_file"
MAX_BYTES = 64 * 1024 * 1024

_BOX = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+\[([ xX~-])\](?=[ \t]|$)[ \t]*(.*)$", re.MULTILINE)
_MARK = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+\[([ xX~-])\](?=[ \t]|$)", re.MULTILINE)
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")
_STATUS = {" ": "pending", "~": "in_progress", "x": "done", "X": "done", "-": "skipped"}


@record
class Checklist:
    pending: int = 0
    in_progress: int = 0
    done: int = 0
    skipped: int = 0
    items: list[TaskItem] = field(default_factory=list)
    first_pending_line: int | None = None
    first_in_progress_line: int | None = None

    def add(self, mark: str, title: str, line: int) -> None:
        status = _STATUS[mark]
        if status == "pending":
            self.pending += 1
            if self.first_pending_line is None:
                self.first_pending_line = line
        elif status == "in_progress":
            self.in_progress += 1
            if self.first_in_progress_line is None:
                self.first_in_progress_line = line
        elif status == "done":
            self.done += 1
        else:
            self.skipped += 1
        if len(self.items) < MAX_ITEMS:
            self.items.append(TaskItem(title=title.strip(), status=status, line=line))


def parse(text: str) -> Checklist:
    """Count the boxes of a markdown checklist. Never raises, whatever the text."""
    if "```" not in text and "~~~" not in text and "<!--" not in text:
        return _parse_plain(text)
    return _parse_lines(text)


def _parse_plain(text: str) -> Checklist:
    """The common case, with no fences or comments: the marks counted in one `findall`, and
    only the items a report lists (and the first open ones) built one by one."""
    result = Checklist()
    counts = Counter(_MARK.findall(text))
    line, pos = 1, 0
    for match in _BOX.finditer(text):
        line += text.count("\n", pos, match.start())
        pos = match.start()
        mark = match.group(1)
        if len(result.items) < MAX_ITEMS:
            result.items.append(TaskItem(title=match.group(2).strip(), status=_STATUS[mark], line=line))
        if mark == " " and result.first_pending_line is None:
            result.first_pending_line = line
        if mark == "~" and result.first_in_progress_line is None:
            result.first_in_progress_line = line
        if (
            len(result.items) >= MAX_ITEMS
            and (result.first_pending_line or not counts[" "])
            and (result.first_in_progress_line or not counts["~"])
        ):
            # Everything a report needs is known; a mark the text never holds is not waited for
            # (an ordinary list has no `[~]`: without this it walked all 100,000 boxes).
            break
    if len(result.items) >= MAX_ITEMS and (
        result.first_pending_line is None or result.first_in_progress_line is None
    ):
        for mark, attr in ((" ", "first_pending_line"), ("~", "first_in_progress_line")):
            if getattr(result, attr) is None and counts[mark]:
                found = next(m for m in _BOX.finditer(text) if m.group(1) == mark)
                setattr(result, attr, text.count("\n", 0, found.start()) + 1)
    result.pending = counts[" "]
    result.in_progress = counts["~"]
    result.done = counts["x"] + counts["X"]
    result.skipped = counts["-"]
    return result


def _parse_lines(text: str) -> Checklist:
    result = Checklist()
    fence: str | None = None
    in_comment = False
    for number, line in enumerate(text.split("\n"), 1):
        if fence is not None:
            stripped = line.strip()
            if stripped.startswith(fence) and stripped.strip(fence[0]) == "":
                fence = None
            continue
        visible = line
        if in_comment or "<!--" in line:
            visible, in_comment = _strip_comments(line, in_comment)
        if "``" in visible or "~~" in visible:  # cheap test first: most lines are not fences
            opened = _FENCE.match(visible)
            if opened and not (opened.group(1)[0] == "`" and "`" in visible[opened.end() :]):
                fence = opened.group(1)  # a backtick fence's info string holds no backtick
                continue
        if "[" not in visible:
            continue
        match = _BOX.match(visible)
        if match:
            result.add(match.group(1), match.group(2), number)
    return result


def _strip_comments(line: str, in_comment: bool) -> tuple[str, bool]:
    """The parts of `line` outside HTML comments, and whether a comment is still open after it."""
    out: list[str] = []
    pos = 0
    while pos <= len(line):
        if in_comment:
            end = line.find("-->", pos)
            if end == -1:
                return "".join(out), True
            pos, in_comment = end + 3, False
        else:
            start = line.find("<!--", pos)
            if start == -1:
                out.append(line[pos:])
                break
            out.append(line[pos:start])
            pos, in_comment = start + 4, True
    return "".join(out), in_comment


def resolve(workspace_root: Path, path_text: str) -> Path:
    """The task file's real path, refusing anything outside the workspace (`../`, symlinks out)."""
    root = workspace_root.resolve()
    candidate = Path(path_text).expanduser()
    if not candidate.is_absolute():
        candidate = root / candidate
    real = candidate.resolve()
    if not real.is_relative_to(root):
        raise ValueError(
            f"task file {path_text!r} resolves to {real}, outside the workspace {root}; "
            "expected a file inside it"
        )
    return real


def check(workspace_root: Path, path_text: str | None, now: str) -> SourceReport:
    if not path_text:
        return SourceReport(
            NAME, enabled=False, available=False, error="no task file configured", checked_at=now
        )
    try:
        path = resolve(workspace_root, path_text)
    except (ValueError, OSError, RuntimeError) as exc:
        return unavailable(NAME, str(exc), now, detail=path_text)
    try:
        info = path.stat()
        if info.st_size > MAX_BYTES:
            return unavailable(
                NAME,
                f"{path}: larger than {MAX_BYTES >> 20} MB; not a checklist",
                now,
                detail=str(path),
                path=str(path),
            )
        found = _unchanged(path, info)
        if found is not None:
            return _report(path, found[0], found[1], now)
        data = read_regular(path, MAX_BYTES + 1)  # a FIFO or device is unreadable, never a hang
    except FileNotFoundError:
        return unavailable(NAME, f"{path}: no such file", now, detail=str(path), path=str(path))
    except IsADirectoryError:
        return unavailable(
            NAME, f"{path}: is a folder, expected a markdown file", now, detail=str(path), path=str(path)
        )
    except OSError as exc:
        return unavailable(
            NAME, f"{path}: cannot be read ({exc.strerror})", now, detail=str(path), path=str(path)
        )
    if b"\x00" in data[:8192]:
        return unavailable(
            NAME, f"{path}: binary data, expected a markdown checklist", now, detail=str(path), path=str(path)
        )
    known = _PARSED.get(str(path))
    if known is not None and known.data == data:  # touched, not changed: no parse
        result, warnings = known.result, known.warnings
    else:
        warnings = ()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            text = data.decode("utf-8", "replace")
            warnings = (f"{path}: not valid UTF-8 at byte {exc.start}; read with replacements",)
        result = parse(text)
    _remember(path, info, data, result, warnings)
    return _report(path, result, warnings, now)


class _Parsed:
    """A task file as last parsed: what it held (the bytes, for files up to `KEEP_BYTES`), and
    the `stat` it had when read."""

    __slots__ = ("data", "result", "seen", "settled", "warnings")

    def __init__(
        self,
        seen: tuple[int, ...],
        settled: bool,
        data: bytes | None,
        result: Checklist,
        warnings: tuple[str, ...],
    ) -> None:
        self.seen = seen
        self.settled = settled
        """Last changed long enough before it was read that any later change has another `stat`."""
        self.data = data
        self.result = result
        self.warnings = warnings


_PARSED: dict[str, _Parsed] = {}
"""The task files parsed, by path: a driver counts the same file at every decision and the
monitor at every change of any loop file, while the file itself changes once an iteration."""
KEEP_FILES = 16
KEEP_BYTES = 4 * 1024 * 1024
"""Files up to this size are kept to compare: read again, the same bytes are not parsed again."""
SETTLED_NS = 2_000_000_000
"""A file's times move in steps (a few ms on Linux, 2 s on FAT): a `stat` identifies its
content only once the file has been left alone longer than a step when it is read."""


def _seen(info: os.stat_result) -> tuple[int, ...]:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _unchanged(path: Path, info: os.stat_result) -> tuple[Checklist, tuple[str, ...]] | None:
    """What `path` held when parsed, when its `stat` proves it has not changed since."""
    known = _PARSED.get(str(path))
    if known is None or not known.settled or known.seen != _seen(info):
        return None
    return known.result, known.warnings


def _remember(
    path: Path, info: os.stat_result, data: bytes, result: Checklist, warnings: tuple[str, ...]
) -> None:
    import time

    settled = time.time_ns() - max(info.st_mtime_ns, info.st_ctime_ns) > SETTLED_NS
    if len(_PARSED) >= KEEP_FILES and str(path) not in _PARSED:
        _PARSED.clear()
    _PARSED[str(path)] = _Parsed(
        seen=_seen(info),
        settled=settled,
        data=data if len(data) <= KEEP_BYTES else None,
        result=result,
        warnings=warnings,
    )


def _report(path: Path, result: Checklist, warnings: tuple[str, ...], now: str) -> SourceReport:
    return SourceReport(
        NAME,
        enabled=True,
        available=True,
        pending=result.pending,
        in_progress=result.in_progress,
        done=result.done,
        skipped=result.skipped,
        items=tuple(result.items),
        checked_at=now,
        detail=str(path),
        warnings=warnings,
        path=str(path),
    )


def mark_current(path: Path, mark: str = "-") -> TaskItem | None:
    """Mark the current task (the first `[~]`, else the first `[ ]`) as `mark`, editing only
    that one character; skip uses `-`.

    Returns the item changed, or None when nothing is open. Writes atomically, so the agent
    editing the same file never sees it half-written.
    """
    from loop.store.frontmatter import atomic_write

    text = path.read_text(encoding="utf-8")
    result = parse(text)
    line_no = result.first_in_progress_line or result.first_pending_line
    if line_no is None:
        return None
    lines = text.splitlines(keepends=True)
    line = lines[line_no - 1]
    match = _BOX.match(line.rstrip("\r\n"))
    if match is None:  # pragma: no cover - parse() just found it
        return None
    index = match.start(1)
    lines[line_no - 1] = line[:index] + mark + line[index + 1 :]
    # a fresh, unguessable temp name opened O_EXCL|O_NOFOLLOW: the agent cannot aim it elsewhere
    atomic_write(path, "".join(lines).encode("utf-8"))
    return TaskItem(title=match.group(2).strip(), status=_STATUS.get(mark, mark), line=line_no)
