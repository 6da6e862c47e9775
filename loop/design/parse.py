"""Reading a design file: the loop's contract, written by a person (or with one) before it runs.

The format is plain markdown, read tolerantly (README: "The design file"):

* `## Acceptance Criteria` (or `Success Criteria`, `Definition of Done`): a list, `- [ ]`, `- [x]`,
  `-`, `*` or `1.`. A criterion whose line ends with a command in backticks after a colon
  (`- [ ] API tests pass: \\`pytest tests/api\\``) is checked by running it; any other needs
  judgement.
* `## Validation` (or `Verification`): the commands in a fenced block, a line each (`#` comments
  and a leading `$ ` are dropped), or list items holding a command in backticks.
* The task type: a `## Task Type` section, a `Type:` / `Task Type:` line, or `type:` in front
  matter; one word (feature, bugfix, refactor, ...). It names the completion promise
  (`FEATURE_COMPLETE`).
* An optional `Status:` line (or front-matter `status:`), read and shown, never written.

Bad input is a `DesignError`: one line saying what, where, and what was expected.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from loop.core.errors import LoopdeckError

MAX_BYTES = 1024 * 1024
"""A design is a page or two; a file larger than this is not one."""
PATTERN = "DESIGN-*.md"
"""The design files `start` looks for in the workspace root when a loop names none."""
DEFAULT_TYPE = "task"

_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?:\[([ xX~-])\]\s*)?(.*\S)\s*$")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_FIELD = re.compile(r"^\W*(task[ _-]?type|type|status)\W*:\s*\**\s*(.*?)\s*$", re.IGNORECASE)
_COMMAND_AT_END = re.compile(r"^(.*?):\s*`([^`]+)`[\s.]*$")
_BACKTICKED = re.compile(r"`([^`]+)`")
_WORD = re.compile(r"[a-z0-9][a-z0-9_-]*")


class DesignError(LoopdeckError):
    """A design file loopdeck cannot read as one."""


@dataclass(frozen=True, slots=True)
class Criterion:
    """One acceptance criterion: its words, the command that checks it (None: it needs
    judgement), whether its box is ticked, and its line in the file."""

    text: str
    command: str | None = None
    done: bool = False
    line: int = 0


@dataclass(frozen=True, slots=True)
class Design:
    """What a loop takes from a design file."""

    path: Path
    title: str
    task_type: str
    criteria: tuple[Criterion, ...]
    validation: tuple[str, ...]
    sha256: str
    status: str | None = None

    @property
    def commands(self) -> list[str]:
        """Every command that checks the work: the validation commands, then the criteria's,
        each once."""
        found = [*self.validation, *(c.command for c in self.criteria if c.command)]
        return list(dict.fromkeys(found))

    @property
    def judged(self) -> list[Criterion]:
        """The criteria no command checks: the agent checks them, and says how each holds."""
        return [c for c in self.criteria if c.command is None]

    @property
    def promise(self) -> str:
        """The completion promise the task type names: `feature` → `FEATURE_COMPLETE`."""
        return f"{self.task_type.upper().replace('-', '_')}_COMPLETE"


def read_bytes(path: Path, limit: int) -> bytes:
    """The bytes of the design at `path`, at most `limit`: a regular file, never through a
    symlink (`O_NOFOLLOW`: a link is refused, not followed, wherever it points), never a FIFO
    or device. OSError (ELOOP for a symlink) when it is not one."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            what = "a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a device"
            raise OSError(errno.EINVAL, f"it is {what}", str(path))
        chunks: list[bytes] = []
        got = 0
        while got < limit and (chunk := os.read(fd, min(65536, limit - got))):
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read(path: Path) -> Design:
    """The design at `path` (never through a symlink); DesignError when it cannot be one."""
    try:
        data = read_bytes(path, MAX_BYTES + 1)
    except FileNotFoundError:
        raise DesignError(f"design file {path}: not found (expected a DESIGN-<timestamp>.md)") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP or os.path.islink(path):
            raise DesignError(
                f"design file {path}: is a symbolic link; expected the design itself, a regular file"
            ) from None
        why = exc.strerror or str(exc)
        raise DesignError(f"design file {path}: cannot be read ({why}); expected a regular file") from None
    if len(data) > MAX_BYTES:
        raise DesignError(f"design file {path}: larger than {MAX_BYTES // 1024} KB; expected a page or two")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DesignError(
            f"design file {path}: byte {exc.start} is not UTF-8; expected markdown text"
        ) from None
    return parse(text, path, hashlib.sha256(data).hexdigest())


def newest(root: Path) -> Path | None:
    """The newest `DESIGN-*.md` in `root` (by name, whose timestamp sorts; then by time), or None."""
    found = [p for p in root.glob(PATTERN) if p.is_file() and not p.is_symlink()]
    if not found:
        return None
    return max(found, key=lambda p: (p.name, p.stat().st_mtime))


def parse(text: str, path: Path, sha256: str = "") -> Design:
    """A design's parts from its text; DesignError naming `path` and the line when one is wrong."""
    lines = text.splitlines()
    front, start = _front_matter(lines)
    fields: dict[str, str] = {}
    sections: dict[str, list[tuple[int, str]]] = {}
    title = ""
    current: str | None = None
    fence: str | None = None
    for number, line in enumerate(lines[start:], start + 1):
        opened = _FENCE.match(line)
        if fence is None and opened is None:
            heading = _HEADING.match(line)
            if heading is not None:
                name = heading.group(2).strip()
                if len(heading.group(1)) == 1 and not title:
                    title = name.strip("*_ ")
                current = _section(name)
                if current is not None and current in sections:
                    raise DesignError(f"{path}:{number}: a second `{name}` section; expected one")
                if current is not None:
                    sections[current] = []
                continue
            field = _FIELD.match(line)
            if field is not None and current is None:
                key = "type" if "type" in field.group(1).lower() else "status"
                fields.setdefault(key, field.group(2).strip("*_` "))
        if opened is not None:
            fence = (
                None if fence is not None and line.strip().startswith(fence) else (fence or opened.group(1))
            )
        if current is not None:
            sections[current].append((number, line))
    if fence is not None:
        raise DesignError(f"{path}: a code block is never closed; expected a closing {fence}")
    criteria = _criteria(sections.get("criteria"), path)
    validation = _validation(sections.get("validation", []))
    task_type = _task_type(sections.get("type"), fields.get("type") or front.get("type"), path)
    status = fields.get("status") or front.get("status") or None
    return Design(path, title, task_type, criteria, validation, sha256, status)


def _front_matter(lines: list[str]) -> tuple[dict[str, str], int]:
    """`key: value` lines between a leading `---` and the next (no YAML: only plain values)."""
    if not lines or lines[0].strip() != "---":
        return {}, 0
    values: dict[str, str] = {}
    for i, line in enumerate(lines[1:], 1):
        if line.strip() in ("---", "..."):
            return values, i + 1
        key, sep, value = line.partition(":")
        if sep and key.strip():
            values[key.strip().lower()] = value.strip().strip("\"'")
    return {}, 0  # never closed: not front matter


def _section(name: str) -> str | None:
    words = re.sub(r"[^a-z ]+", " ", name.lower()).split()
    joined = " ".join(words)
    if "acceptance" in words or "criteria" in words or "definition of done" in joined:
        return "criteria"
    if words and words[0] in ("validation", "verification", "validate", "verify"):
        return "validation"
    if joined in ("type", "task type"):
        return "type"
    return None


def _criteria(lines: list[tuple[int, str]] | None, path: Path) -> tuple[Criterion, ...]:
    if lines is None:
        raise DesignError(
            f"{path}: no acceptance criteria; expected a `## Acceptance Criteria` section with a "
            "list (`- [ ] ...`)"
        )
    found: list[Criterion] = []
    fence: str | None = None
    for number, line in lines:
        opened = _FENCE.match(line)
        if opened is not None:
            fence = None if fence is not None else opened.group(1)
            continue
        item = _ITEM.match(line) if fence is None and not line.startswith(("    ", "\t")) else None
        if item is None:
            continue
        words = item.group(2)
        command = None
        at_end = _COMMAND_AT_END.match(words)
        if at_end is not None:
            command = at_end.group(2).strip() or None
        found.append(Criterion(words, command, (item.group(1) or " ") in "xX", number))
    if not found:
        first = lines[0][0] - 1 if lines else 0
        raise DesignError(
            f"{path}:{first}: the acceptance criteria section lists nothing; expected items such as "
            "`- [ ] API tests pass: `pytest tests/api``"
        )
    return tuple(found)


def _validation(lines: list[tuple[int, str]]) -> tuple[str, ...]:
    found: list[str] = []
    fence: str | None = None
    for _number, line in lines:
        opened = _FENCE.match(line)
        if opened is not None:
            fence = None if fence is not None else opened.group(1)
            continue
        if fence is not None:
            command = line.strip()
            if command.startswith("$ "):
                command = command[2:].strip()
            if command and not command.startswith("#"):
                found.append(command)
            continue
        item = _ITEM.match(line)
        if item is not None:
            quoted = _BACKTICKED.search(item.group(2))
            if quoted is not None and quoted.group(1).strip():
                found.append(quoted.group(1).strip())
    return tuple(dict.fromkeys(found))


def _task_type(lines: list[tuple[int, str]] | None, given: str | None, path: Path) -> str:
    text = given
    where = path.name
    for number, line in lines or []:
        words = line.strip().strip("-*+`_ ").strip()
        if words and not _FENCE.match(line):
            text, where = words, f"{path}:{number}"
            break
    if not text:
        return DEFAULT_TYPE
    word = _WORD.match(text.strip().strip("*_`[]() ").lower())
    if word is None:
        raise DesignError(
            f"{where}: task type {text!r} is not a word; expected one such as feature or bugfix"
        )
    return word.group(0)[:40].rstrip("-_")
