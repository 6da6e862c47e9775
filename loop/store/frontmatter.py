"""YAML front matter as loopdeck reads and writes it, and atomic file replacement.

The loop's state is YAML front matter. PyYAML costs the Stop hook ~11 ms to import,
and the hook runs on every agent turn, so the flat `key: value` lines loopdeck itself writes are
read by a fast path whose answers a property test pins to PyYAML's; anything else (hand-edited
files, nested values, errors with line numbers) goes through PyYAML, imported on first need.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path
from typing import Any

from loop.store.safeopen import open_write

_YAML: dict[str, Any] = {}


def yaml_module() -> Any:
    """PyYAML, imported on first need: it costs the Stop hook ~11 ms, and the hook's state files
    take the fast path (`_fast_front_matter`); hand-edited files and errors come here."""
    if "module" not in _YAML:
        import yaml

        base = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader

        class Loader(base):  # type: ignore[valid-type,misc]
            """Safe YAML without timestamp resolution: `started_at` stays the text the file
            holds, so writing it back changes nothing."""

        Loader.yaml_implicit_resolvers = {
            first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
            for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
        }

        class FlowDumper(yaml.SafeDumper):
            """Never anchors and aliases: loopdeck refuses them when it reads a state back."""

            def ignore_aliases(self, data: Any) -> bool:
                return True

        # Strings always double-quoted, also as keys inside maps: a plain one holding NEL or
        # another character YAML folds would read back as a different string.
        FlowDumper.add_representer(
            str, lambda dumper, text: dumper.represent_scalar("tag:yaml.org,2002:str", text, style='"')
        )

        _YAML.update(module=yaml, loader=Loader, dumper=FlowDumper)
    return _YAML["module"]


_FAST_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*): (.*)")
_FAST_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_FAST_INT = re.compile(r"-?(?:0|[1-9][0-9]{0,17})")  # longer ones are bounded by the schema
_FAST_PLAIN = re.compile(r"[A-Za-z][A-Za-z0-9_./+-]*|[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+(?:Z|[+-][0-9:]+)")
_YAML_WORDS = frozenset(
    {"y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF"}
    | {"true", "True", "TRUE", "false", "False", "FALSE", "null", "Null", "NULL"}
)


def _fast_scalar(text: str) -> tuple[bool, Any]:
    """Decode one value as YAML would, for the forms loopdeck itself writes (and the Ralph loop's
    example); `(False, None)` when unsure, and the caller asks PyYAML instead."""
    if text == "true" or text == "false":
        return True, text == "true"
    if text == "null":
        return True, None
    if _FAST_INT.fullmatch(text):
        return True, int(text)
    if text[:1] in ('"', "[", "{"):
        if "\\u" in text:
            return False, None  # JSON and YAML disagree on escaped surrogate pairs
        try:
            value = _DECODER.decode(text)  # JSON strings are YAML double-quoted strings
        except (ValueError, RecursionError):  # nested too deep: PyYAML's reading reports it
            return False, None
        if isinstance(value, str) and json_safe(value):
            return True, value
        if isinstance(value, list) and all(isinstance(v, str) and json_safe(v) for v in value):
            return True, value
        if _flat_map(value):
            return True, value
        return False, None
    if _FAST_PLAIN.fullmatch(text) and text not in _YAML_WORDS:
        return True, text
    return False, None


def fast_front_matter(lines: list[str]) -> dict[str, Any] | None:
    """The front matter when every line is `key: value` in a simple form, else None."""
    out: dict[str, Any] = {}
    for line in lines:
        match = _FAST_LINE.fullmatch(line.rstrip("\r\n"))
        if match is None or match.group(1) in out:
            return None
        ok, value = _fast_scalar(match.group(2))
        if not ok:
            return None
        out[match.group(1)] = value
    return out


_UNSAFE = "[\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff\ud800-\udfff\ufffe\uffff]"


def json_safe(text: str) -> bool:
    """JSON's string form is YAML's double-quoted form too, except for control characters and
    what YAML reads as line breaks or refuses as non-printable: those go through PyYAML.

    Every one of those characters is one `str.isprintable` refuses, so a printable string (most
    of them) needs no pattern: compiling it costs the Stop hook half a millisecond."""
    return text.isprintable() or re.search(_UNSAFE, text) is None


class _Unsure:
    """A number JSON reads one way and YAML another (`1e5`, `NaN`): the caller asks PyYAML."""


def _plain_decimal(text: str) -> float | _Unsure:
    """`1800.0`, `-0.25`: a JSON number with a point and no exponent, which YAML reads as the
    same float. YAML 1.1 reads `1e5` as a string and JSON's `Infinity` is no YAML at all."""
    return float(text) if "." in text and "e" not in text.lower() else _Unsure()


def _unsure(_text: str) -> _Unsure:
    return _Unsure()


_DECODER = json.JSONDecoder(parse_float=_plain_decimal, parse_constant=_unsure)
"""JSON as YAML reads it: a number the two read differently comes back unsure. One decoder for
every value (`json.loads` with options builds a new one per call, on the Stop hook's path)."""


def _flat_map(value: Any) -> bool:
    """A map of plain keys to strings, whole numbers, plain decimals, booleans or nulls: JSON
    writes it as a YAML flow mapping that both parsers read alike (the state's `waiting_for`,
    `stuck` and the runner's settings)."""
    return isinstance(value, dict) and all(
        isinstance(k, str)
        and _FAST_KEY.fullmatch(k) is not None
        and (
            v is None
            or isinstance(v, bool | int)
            or (isinstance(v, float) and isinstance(_plain_decimal(repr(v)), float))
            or (isinstance(v, str) and json_safe(v))
        )
        for k, v in value.items()
    )


def scalar(value: Any) -> str:
    """One YAML value on one line: strings double-quoted, lists and maps in flow style."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str) and json_safe(value):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list) and all(isinstance(v, str) and json_safe(v) for v in value):
        return "[" + ", ".join(json.dumps(v, ensure_ascii=False) for v in value) + "]"
    if _flat_map(value):
        return json.dumps(value, ensure_ascii=False)
    style = '"' if isinstance(value, str | list) else None
    text: str = yaml_module().dump(
        value,
        Dumper=_YAML["dumper"],
        default_flow_style=True,
        default_style=style,
        allow_unicode=True,
        width=2**31,
    )
    return text.removesuffix("\n...\n").rstrip("\n")


def atomic_write(path: Path, data: bytes, durable: bool = False) -> None:
    """Replace `path` with `data` in one rename, so no reader ever sees half a file. `durable`
    (the loop's state) also fsyncs the data before the rename, the one fsync of a decision: a
    crash then finds the new file whole or the old one, never a torn or empty one. The folder
    is not fsynced: the rename reaches the disk with the file system's next commit, and a crash
    before it leaves the previous state, as a crash just before the write would. Caches skip
    even the one fsync."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    fd = open_write(tmp, os.O_CREAT | os.O_EXCL)  # inside .claude/, never through a symlink
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if durable:
            os.fsync(fd)
    except BaseException as exc:
        os.close(fd)
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError) and exc.filename is None:  # a full disk: say which file
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        raise
    os.close(fd)
    os.replace(tmp, path)
