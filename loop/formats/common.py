"""Reading other tools' loop files without trusting them.

Neighbour files are written by tools loopdeck does not control, by hand, or half-way through a
crash. Every problem becomes a `FileProblem` naming the file, the line where one is known and
what was expected, so a viewer can show it instead of a traceback.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from loop.core.errors import FileProblem

MAX_BYTES = 4 * 1024 * 1024
"""Loop state files are a few kilobytes; anything past this is not one, and reading it on every
refresh of a fleet of fifty would cost more than the view is worth."""


def read_text(path: Path) -> str:
    """The file as UTF-8 text, or a `FileProblem` saying why it is not a text file."""
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise FileProblem(
                path, f"is {size} bytes; a loop state file is expected under {MAX_BYTES >> 20} MiB"
            )
        data = path.read_bytes()
    except FileNotFoundError:
        raise FileProblem(path, "no such file") from None
    except IsADirectoryError:
        raise FileProblem(path, "is a folder, expected a file") from None
    except OSError as exc:
        raise FileProblem(path, f"cannot be read ({exc.strerror})") from None
    nul = data.find(b"\x00")
    if nul >= 0:
        raise FileProblem(path, "binary data (a NUL byte), expected text", data.count(b"\n", 0, nul) + 1)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise FileProblem(
            path, f"not UTF-8 text (byte 0x{data[exc.start]:02x}), expected text", line
        ) from None


class JsonFields:
    """A JSON object read from a file, with typed getters whose errors name file, line and type."""

    def __init__(self, path: Path, text: str, data: dict[str, Any]) -> None:
        self.path = path
        self.text = text
        self.data = data

    @classmethod
    def load(cls, path: Path) -> JsonFields:
        text = read_text(path)
        if not text.strip():
            raise FileProblem(path, "is empty, expected a JSON object", 1)
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            truncated = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")
            where = f"{exc.msg} at column {exc.colno}"
            what = f"the file ends early (truncated?): {where}" if truncated else where
            raise FileProblem(path, f"not valid JSON: {what}", exc.lineno) from None
        except RecursionError:
            raise FileProblem(path, "not valid JSON: nested too deeply") from None
        if not isinstance(data, dict):
            raise FileProblem(path, f"expected a JSON object at the top, found {_kind(data)}", 1)
        return cls(path, text, data)

    def line_of(self, key: str) -> int | None:
        """The line where `"key":` first appears: near enough to point a person at it."""
        match = re.search(rf'"{re.escape(key)}"\s*:', self.text)
        return self.text.count("\n", 0, match.start()) + 1 if match else None

    def _problem(self, key: str, expected: str, value: Any) -> FileProblem:
        return FileProblem(
            self.path, f'"{key}" should be {expected}, found {_kind(value)}', self.line_of(key)
        )

    def get(self, *keys: str) -> tuple[str, Any]:
        """The first of `keys` present (tools disagree on snake_case and camelCase)."""
        for key in keys:
            if key in self.data and self.data[key] is not None:
                return key, self.data[key]
        return keys[0], None

    def require(self, *keys: str, expected: str) -> tuple[str, Any]:
        key, value = self.get(*keys)
        if value is None:
            raise FileProblem(self.path, f'"{keys[0]}" is missing: expected {expected}')
        return key, value

    def integer(self, *keys: str, required: bool = False) -> int | None:
        key, value = self.require(*keys, expected="a whole number") if required else self.get(*keys)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._problem(key, "a whole number", value)
        if value < 0:
            raise FileProblem(self.path, f'"{key}" should be 0 or more, found {value}', self.line_of(key))
        return value

    def string(self, *keys: str, required: bool = False) -> str | None:
        key, value = self.require(*keys, expected="text") if required else self.get(*keys)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self._problem(key, "text", value)
        return value

    def array(self, *keys: str) -> list[Any]:
        key, value = self.get(*keys)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self._problem(key, "a list", value)
        return value

    def mapping(self, *keys: str) -> dict[str, Any]:
        key, value = self.get(*keys)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self._problem(key, "an object", value)
        return value

    def status(self, allowed: tuple[str, ...], *keys: str) -> str:
        key, value = self.require(*(keys or ("status",)), expected="one of " + ", ".join(allowed))
        if not isinstance(value, str):
            raise self._problem(key, "text", value)
        if value not in allowed:
            raise FileProblem(
                self.path,
                f'"{key}" is "{_short(value)}", expected one of {", ".join(allowed)}',
                self.line_of(key),
            )
        return value

    def items(self, key: str, title_keys: tuple[str, ...] = ("title", "id")) -> list[str]:
        """The titles of a list of tasks, each a string or an object with a title."""
        titles: list[str] = []
        for index, item in enumerate(self.array(key)):
            if isinstance(item, str):
                titles.append(item)
            elif isinstance(item, dict):
                titles.append(next((str(item[k]) for k in title_keys if isinstance(item.get(k), str)), "?"))
            else:
                raise FileProblem(
                    self.path,
                    f'"{key}"[{index}] should be text or an object, found {_kind(item)}',
                    self.line_of(key),
                )
        return titles


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        return f'the text "{_short(value)}"'
    if isinstance(value, list):
        return "a list"
    return "an object"


def _short(text: str, limit: int = 40) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"
