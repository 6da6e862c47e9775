"""Source 3: a markdown checklist (`--task-file`).

`- [ ]` pending, `- [~]` in progress, `- [x]`/`- [X]` done, `- [-]` skipped; `*`, `+` and
numbered bullets, any indentation. Boxes inside fenced code blocks or HTML comments are
examples, not tasks, and do not count. The file must stay inside the workspace: the loop reads
what the agent may write, and nothing else.
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from loop.sources.base import MAX_ITEMS, SourceReport, TaskItem, unavailable
from loop.store.frontmatter import atomic_write
from loop.store.safeopen import read_regular

NAME = "task_file"
MAX_BYTES = 64 * 1024 * 1024

_BOX = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+\[([ xX~-])\](?=[ \t]|$)[ \t]*(.*)$", re.MULTILINE)
_MARK = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+\[([ xX~-])\](?=[ \t]|$)", re.MULTILINE)
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")
_STATUS = {" ": "pending", "~": "in_progress", "x": "done", "X": "done", "-": "skipped"}


@dataclass(slots=True)
class Checklist:
    pending: int = 0
    in_progress: int = 0
    done: int = 0
    skipped: int = 0
    items: list[TaskItem] = field(default_factory=list)
    first_pending_line: int | None = None
    first_in_progress_line: int | None = None
    fenced: bool = False
    """The text holds a code fence or an HTML comment: a line's meaning depends on the lines
    before it (`reparse` cannot count the lines that changed alone)."""

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
    result = _parse_lines(text)
    result.fenced = True
    return result


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
        result, warnings = _parsed(path, data, known)
    _remember(path, info, data, result, warnings)
    return _report(path, result, warnings, now)


def _parsed(path: Path, data: bytes, known: _Parsed | None) -> tuple[Checklist, tuple[str, ...]]:
    """The checklist `data` holds, and what to warn of: only the lines that changed are parsed
    when the file was parsed before (and kept)."""
    if known is not None and known.data is not None and not known.warnings:
        again = reparse(known.data, known.result, data)  # a box ticked: the lines around it
        if again is not None:
            return again, ()
    warnings: tuple[str, ...] = ()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = data.decode("utf-8", "replace")
        warnings = (f"{path}: not valid UTF-8 at byte {exc.start}; read with replacements",)
    return parse(text), warnings


_MARK_OF = {
    mark: re.compile(rf"^[ \t]*(?:[-*+]|\d{{1,9}}[.)])[ \t]+\[{re.escape(mark)}\](?=[ \t]|$)", re.MULTILINE)
    for mark in (" ", "~")
}


def reparse(old: bytes, parsed: Checklist, new: bytes) -> Checklist | None:
    """`parse(new)`, worked out from `parsed` (`parse(old)`) and the lines that differ: the
    common start and end of both found by bisection (comparisons of bytes), then only the lines
    between them parsed. A loop ticks a box of a long checklist every iteration: a file of 10,000
    tasks is one line parsed, not 10,000. None when it cannot be (a code fence or an HTML comment
    makes a line's meaning depend on the lines before it, bytes that are not UTF-8): parse it.

    `old` must be valid UTF-8 (the file as parsed with no warnings), `parsed` what `parse`
    made of it."""
    if parsed.fenced:
        return None
    start, old_end, new_end = _changed_lines(old, new)
    try:
        was, now = old[start:old_end].decode("utf-8"), new[start:new_end].decode("utf-8")
    except UnicodeDecodeError:
        return None
    if any(marker in now for marker in ("```", "~~~", "<!--")):
        return None
    first = old.count(b"\n", 0, start) + 1
    """The line number of the first line that differs (the same in both)."""
    delta = now.count("\n") - was.count("\n")
    # The line after the lines that differ, when any follows (they end with a newline, or are none).
    rest_old = first + was.count("\n") if not was or was.endswith("\n") else None
    rest_new = first + now.count("\n") if not now or now.endswith("\n") else None
    gone, came = Counter(_MARK.findall(was)), Counter(_MARK.findall(now))
    boxes: list[TaskItem] = []
    line, pos = first, 0
    for match in _BOX.finditer(now):
        line += now.count("\n", pos, match.start())
        pos = match.start()
        boxes.append(TaskItem(title=match.group(2).strip(), status=_STATUS[match.group(1)], line=line))
    items = parsed.items
    before = [item for item in items if item.line is not None and item.line < first]
    boxes_of_old = parsed.pending + parsed.in_progress + parsed.done + parsed.skipped
    if len(items) < MAX_ITEMS or len(items) == boxes_of_old:
        # Every box of `old` is listed (a checklist of exactly MAX_ITEMS boxes included): the
        # list is put together again.
        after = [
            item if not delta else replace(item, line=item.line + delta)  # a box ticked: as is
            for item in items
            if rest_old is not None and item.line is not None and item.line >= rest_old
        ]
        items = (before + boxes + after)[:MAX_ITEMS]
    elif len(before) < len(items):
        return None  # a listed box changed, and the boxes after the list are not known

    def first_of(mark: str, known: int | None) -> int | None:
        if known is not None and known < first:
            return known
        status = _STATUS[mark]
        found = next((box.line for box in boxes if box.status == status), None)
        if found is not None or known is None:
            return found  # none in `old` at all: none in the lines after the change either
        if rest_old is not None and known >= rest_old:
            return known + delta
        if rest_new is None:
            return None
        tail = new[new_end:].decode("utf-8")  # valid: the end of `old`
        match = _MARK_OF[mark].search(tail)
        return None if match is None else rest_new + tail.count("\n", 0, match.start())

    return Checklist(
        pending=parsed.pending - gone[" "] + came[" "],
        in_progress=parsed.in_progress - gone["~"] + came["~"],
        done=parsed.done - gone["x"] - gone["X"] + came["x"] + came["X"],
        skipped=parsed.skipped - gone["-"] + came["-"],
        items=list(items),
        first_pending_line=first_of(" ", parsed.first_pending_line),
        first_in_progress_line=first_of("~", parsed.first_in_progress_line),
    )


def _changed_lines(old: bytes, new: bytes) -> tuple[int, int, int]:
    """(start, end in `old`, end in `new`): the whole lines that differ between `old` and `new`;
    before `start` and after the ends, both hold the same bytes (the same lines)."""
    size = min(len(old), len(new))
    lo, hi = 0, size  # old[:lo] == new[:lo]; the first difference is at `hi` at the latest
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if old[lo:mid] == new[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    prefix = lo
    lo, hi = 0, size - prefix  # the same from the end, not overlapping the common start
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if old[len(old) - mid : len(old) - lo] == new[len(new) - mid : len(new) - lo]:
            lo = mid
        else:
            hi = mid - 1
    start = old.rfind(b"\n", 0, prefix) + 1
    old_end, new_end = len(old) - lo, len(new) - lo
    if lo and not (_line_start(old, old_end) and _line_start(new, new_end)):
        cut = old.find(b"\n", old_end)  # the end of the line the common end starts in
        grow = (cut + 1 if cut >= 0 else len(old)) - old_end
        old_end, new_end = old_end + grow, new_end + grow
    return start, old_end, new_end


def _line_start(data: bytes, index: int) -> bool:
    return index == 0 or data[index - 1 : index] == b"\n"


@dataclass(frozen=True, slots=True)
class _Parsed:
    """A task file as last parsed: what it held (the bytes, for files up to `KEEP_BYTES`), and
    the `stat` it had when read."""

    seen: tuple[int, ...]
    settled: bool
    """Last changed long enough before it was read that any later change has another `stat`."""
    data: bytes | None
    result: Checklist
    warnings: tuple[str, ...]


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
