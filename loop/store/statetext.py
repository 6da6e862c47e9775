"""The state file's text: what each key may hold, and the text read into a `LoopState`
(`parse`) and written from one (`render`).

Apart from `loop.store.state` (the file itself: its lock, its backup, its crash-safe writes)
because this part is pure text, the part a property test drives with generated states.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from loop.core.errors import FileProblem
from loop.core.model import DRIVERS, KNOWN_KEYS, NULL, STATUSES, WAITING_KINDS, LoopState
from loop.core.redact import redact
from loop.store.frontmatter import _YAML, _YAML_WORDS, fast_front_matter, scalar, yaml_module

MAX_STATE_BYTES = 4 * 1024 * 1024
"""A state file is a few hundred bytes; anything this big is not one, and parsing it would stall
the hook."""


MAX_INT = 2**63 - 1
"""Whole numbers in the state are counts, offsets and pids: anything larger is a typo or an
attack, and Python refuses to even print one of more than 4300 digits."""

FIELD_CAPS = {
    "session_id": 256,
    "github_project_id": 256,
    "started_at": 64,
    "loop_id": 64,
    "current_task": 2000,
    "completion_promise": 2000,
    "task_file": 4096,
    "transcript_path": 4096,
}
"""Characters kept of strings that come from outside (the hook's input, task titles): a 5 MB
session id must not make the state file too large to read back."""

VERBATIM = frozenset(
    {"verify", "verify_allow", "runner", "audit", "notify", "task_file", "transcript_path", "graph", "files"}
)
"""Keys (at any depth: the runner's record, the parallel board's graph, audit and files) whose
values are written as given, not redacted: commands the loop runs, files it opens, targets it
sends to. A token inside one is what makes it work; written as `[REDACTED]` it would run,
open or send to something else. Everything else in the state (the prompt, the task, the
agent's question, a person's answer and notes, the reasons it waits, error signatures) is
redacted as it is rendered; an archive redacts these keys too, as nothing runs from it."""


class StateError(FileProblem):
    """The state file exists but is not a loop state (bad YAML, wrong types, binary…)."""


class Unstorable(ValueError):
    """A state value that cannot be written so that it reads back (a number beyond MAX_INT)."""


def _expect_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_INT


def _expect_bool(value: Any) -> bool:
    return isinstance(value, bool)


def _expect_str(value: Any) -> bool:
    return isinstance(value, str)


def _expect_opt_str(value: Any) -> bool:
    if isinstance(value, int) and not isinstance(value, bool):
        return abs(value) <= MAX_INT
    return value is None or isinstance(value, str)


def _expect_opt_int(value: Any) -> bool:
    return value is None or _expect_int(value)


def _expect_waiting(value: Any) -> bool:
    return value is None or (
        isinstance(value, dict)
        and value.get("kind") in WAITING_KINDS
        and isinstance(value.get("reason"), str)
    )


def _int_map(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and _expect_int(v) for k, v in value.items())


def _expect_str_list(value: Any) -> bool:
    return value is None or (isinstance(value, list) and all(isinstance(v, str) for v in value))


_STRINGS = ("github_project_id", "session_id", "current_task", "loop_id")
"""Keys whose value is text even when YAML reads it as a number (a hand-written id)."""

WHOLE = (_expect_int, "a whole number >= 0")
FLAG = (_expect_bool, "true or false")
"""What most keys hold: the check, and what an error says was expected."""

_SCHEMA: dict[str, tuple[Any, str]] = {
    # the Ralph loop's keys, in their order
    "iteration": WHOLE,
    "max_iterations": (_expect_int, "a whole number >= 0 (0 = no limit; at most 2**63-1)"),
    "completion_promise": (_expect_opt_str, 'a string ("null" for none)'),
    "task_file": (_expect_opt_str, 'a path ("null" for none)'),
    "check_tasks": FLAG,
    "check_github": FLAG,
    "github_project_id": (_expect_opt_str, "a project number or id"),
    "started_at": (_expect_opt_str, "an ISO 8601 timestamp"),
    "verification_mode": FLAG,
    "verification_remaining": WHOLE,
    # loopdeck's additions
    "loop_id": (_expect_opt_str, "the loop's id"),
    "status": (lambda v: v in STATUSES, "one of " + ", ".join(STATUSES)),
    "driver": (lambda v: v is None or v in DRIVERS, "hook, runner or null"),
    "pid": (_expect_opt_int, "a process id or null"),
    "session_id": (_expect_opt_str, "a session id or null"),
    "current_task": (_expect_opt_str, "a task title or null"),
    "verify_loops": WHOLE,
    "verify": (_expect_str_list, "a list of commands"),
    "control_offset": (_expect_int, "a byte offset >= 0"),
    "escalated": FLAG,
    "consecutive_blocks": WHOLE,
    "transcript_path": (_expect_opt_str, "a path or null"),
    "waiting_for": (_expect_waiting, "null or a map with kind, reason and since"),
    "stuck": (lambda v: v is None or isinstance(v, dict), "a map"),
    "limits": (lambda v: v is None or _int_map(v), "a map of whole numbers >= 0"),
    "usage": (lambda v: v is None or _int_map(v), "a map of whole numbers >= 0"),
    "notify": (_expect_str_list, "a list of notification targets"),
    "last_validation": (lambda v: v is None or isinstance(v, dict), "a map"),
}
assert tuple(_SCHEMA) == KNOWN_KEYS
REQUIRED_KEYS = ("iteration", "max_iterations")


def render(state: LoopState, verbatim: frozenset[str] = VERBATIM) -> str:
    """The state file's text. A key the file did not have is added only once it means
    something (a round trip of the original format adds nothing; a new state writes every key),
    and a key whose value did not change keeps its exact text. Values are redacted (all but
    the `verbatim` keys: see VERBATIM) and made storable on the way (see `storable`), before
    they are rendered, so the text reads back as the values written."""
    values = state.values()
    order = [k for k in state._order if k in values]
    order += [
        k
        for k in values
        if k not in order and (not state._order or k in state.extra or values[k] != _DEFAULTS[k])
    ]
    nl = state._newline
    kept_clean = _kept_text_clean(state, verbatim)
    parts = ["---" + nl, state._preamble if kept_clean else redact(state._preamble)]
    for key in order:
        value = _clean(values[key], key, verbatim)
        if (
            key in state._raw
            and key in state._seen
            and _same(state._seen[key], value)
            and (kept_clean or key in verbatim or redact(state._raw[key]) == state._raw[key])
        ):
            parts.append(state._raw[key])
        else:
            parts.append(f"{_key_text(key)}: {scalar(storable(value, FIELD_CAPS.get(key), key))}{nl}")
    parts.append("---" + nl)
    parts.append(storable(_clean_text(state.body)))
    return "".join(parts)


def _kept_text_clean(state: LoopState, verbatim: frozenset[str]) -> bool:
    """Does the text a render may keep as it was read (the lines of unchanged keys, comments
    before the first) hold nothing to redact? One pass over all of it: a key's lines are
    checked one by one only when it does."""
    kept = [state._preamble, *(text for key, text in state._raw.items() if key not in verbatim)]
    joined = "".join(kept)
    return redact(joined) == joined


def _clean(value: Any, key: str, verbatim: frozenset[str]) -> Any:
    """`value` redacted, all the way down, except under the `verbatim` keys."""
    if key in verbatim:
        return value
    if isinstance(value, str):
        return _clean_text(value, verbatim)
    if isinstance(value, dict):
        return {k: _clean(v, str(k), verbatim) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v, key, verbatim) for v in value]
    return value


_CLEANED: dict[tuple[str, frozenset[str] | None], str] = {}
"""Long texts as last redacted (the prompt, the parallel board): the state is rendered on
every write, twice when the previous file is kept as the backup, and its prompt rarely
changes; a driver pays for redacting it once."""


def _clean_text(text: str, verbatim: frozenset[str] | None = None) -> str:
    """`text` redacted. With `verbatim`, a text that is a map kept as a line of JSON (the
    parallel board) is redacted value by value, so that it stays JSON and its `verbatim` keys
    stay as they are; without (the prompt), it is text whatever it looks like."""
    if len(text) < 256:
        return _redact_text(text, verbatim)
    done = _CLEANED.get((text, verbatim))
    if done is None:
        if len(_CLEANED) >= 16:
            _CLEANED.clear()
        done = _CLEANED[(text, verbatim)] = _redact_text(text, verbatim)
    return done


def _redact_text(text: str, verbatim: frozenset[str] | None) -> str:
    plain = redact(text)
    if plain == text or verbatim is None or text[:1] != "{":
        return plain
    try:
        loaded = json.loads(text)
    except ValueError:
        return plain
    if not isinstance(loaded, dict):
        return plain
    return json.dumps(_clean(loaded, "", verbatim), ensure_ascii=False, separators=(",", ":"))


_DEFAULTS: dict[str, Any] = LoopState().values()

_SURROGATES = "[\ud800-\udfff]"
_PLAIN_KEY = re.compile(r"[A-Za-z_][\w.-]*")


def storable(value: Any, cap: int | None = None, key: str = "value") -> Any:
    """`value` as it can be written and read back: lone surrogates (which UTF-8 cannot hold)
    become U+FFFD, strings longer than `cap` are cut, numbers beyond MAX_INT raise Unstorable;
    lists and maps are made storable all the way down (keys too)."""
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return value
    if isinstance(value, int):
        if abs(value) > MAX_INT:
            digits = len(str(abs(value))) if abs(value) < 10**4000 else "thousands of"
            raise Unstorable(f"{key}: a number of {digits} digits is larger than 2**63-1")
        return value
    if isinstance(value, str):
        text = value if value.isascii() else _without_surrogates(value)
        return text[:cap] if cap is not None and len(text) > cap else text
    if isinstance(value, list | tuple):
        return [storable(v, None, key) for v in value]
    if isinstance(value, dict):
        return {
            storable(str(k) if not isinstance(k, str) else k): storable(v, None, key)
            for k, v in value.items()
        }
    return value


def _without_surrogates(text: str) -> str:
    """`text` with each lone surrogate as U+FFFD. UTF-8 refuses them, so a text it encodes has
    none, and the pattern (compiled on first use) is only run over the rare one that does."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return re.sub(_SURROGATES, "\ufffd", text)
    return text


def _key_text(key: str) -> str:
    """A key as YAML reads it back as the same string: plain when it is a plain word, quoted
    otherwise (`"a: b"`, `"true"`, `"#x"`, `""`)."""
    key = storable(key)
    if _PLAIN_KEY.fullmatch(key) and key not in _YAML_WORDS:
        return key
    return str(scalar(key))


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and bool(a == b)


_KEY_LINE = re.compile(r"^(?:([A-Za-z_][\w.-]*)|\"((?:[^\"\\]|\\.)*)\"|'((?:[^']|'')*)')[ \t]*:")


def _line_key(match: re.Match[str]) -> str:
    """The key a `_KEY_LINE` match names, quoted keys unquoted (`"a: b": 1` is key `a: b`)."""
    plain, double, single = match.groups()
    if plain is not None:
        return str(plain)
    if single is not None:
        return str(single).replace("''", "'")
    try:
        return str(json.loads(f'"{double}"'))
    except ValueError:
        return str(double)


def _anchor_line(text: str) -> int | None:
    """The line (of the file) of the first YAML anchor or alias in the front matter, if any.

    loopdeck never writes them; read, they are how an alias bomb (a few lines that expand to
    gigabytes when a checker walks them) gets in."""
    yaml = yaml_module()
    for event in yaml.parse(text, Loader=_YAML["loader"]):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            return int(event.start_mark.line) + 2
    return None


MAX_DEPTH = 50
"""Lists and maps inside a value nest at most this deep: loopdeck writes none deeper than two."""


def _unreadable(value: Any, depth: int = 0) -> str | None:
    """What makes `value` more than a state can hold (a whole number beyond MAX_INT, nesting
    deeper than MAX_DEPTH), or None."""
    if depth > MAX_DEPTH:
        return f"nests lists or maps more than {MAX_DEPTH} deep"
    if isinstance(value, int) and not isinstance(value, bool):
        return "holds a number larger than 2**63-1" if abs(value) > MAX_INT else None
    if isinstance(value, list):
        return next((r for v in value if (r := _unreadable(v, depth + 1))), None)
    if isinstance(value, dict):
        return next(
            (r for k, v in value.items() if (r := _unreadable(k, depth + 1) or _unreadable(v, depth + 1))),
            None,
        )
    return None


def parse(data: bytes, path: Path | str) -> LoopState:
    """Parse a state file's bytes, or raise StateError naming path, line and problem."""
    lines = _text(data, path).splitlines(keepends=True)
    if lines[0].rstrip("\r\n").rstrip() != "---":
        raise StateError(path, "no front matter: the first line must be '---'", 1)
    close = next((i for i in range(1, len(lines)) if lines[i].rstrip() == "---"), None)
    if close is None:
        raise StateError(path, "front matter never closed: expected a second '---' line", len(lines))
    fm_lines = lines[1:close]
    loaded = _front_matter(fm_lines, path)
    preamble, raw, key_lines = _segments(fm_lines)
    for key in REQUIRED_KEYS:
        if key not in loaded:
            raise StateError(path, f"missing key '{key}'", close + 1)
    state = LoopState(body="".join(lines[close + 1 :]))
    for key, value in loaded.items():
        key = str(key)
        if key in _SCHEMA:
            check, expected = _SCHEMA[key]
            if not check(value):
                raise StateError(
                    path, f"{key}: expected {expected}, got {_describe(value)}", key_lines.get(key)
                )
            setattr(state, key, _normalised(key, value))
        else:
            problem = _unreadable(value)
            if problem is not None:
                raise StateError(path, f"{key}: {problem}", key_lines.get(key))
            state.extra[key] = value
    state._order = [str(k) for k in loaded]
    state._newline = "\r\n" if lines[0].endswith("\r\n") else "\n"
    if set(raw) == {str(k) for k in loaded}:  # every key's text found: unchanged keys keep it
        state._raw = raw
        state._preamble = "".join(preamble)
        state._seen = {k: getattr(state, k) for k in KNOWN_KEYS if k in loaded}
        state._seen.update(state.extra)
    return state


def _text(data: bytes, path: Path | str) -> str:
    """The file's bytes as text, or StateError when they are not a small UTF-8 text file."""
    if not data:
        raise StateError(path, "empty file; expected YAML front matter opening with '---'", 1)
    if len(data) > MAX_STATE_BYTES:
        raise StateError(path, f"{len(data)} bytes is far too large for a loop state file")
    if b"\x00" in data:
        nul_line = data[: data.index(b"\x00")].count(b"\n") + 1
        raise StateError(path, "binary data (NUL byte); expected a text file", nul_line)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad_line = data[: exc.start].count(b"\n") + 1
        raise StateError(path, f"not UTF-8 text (byte {exc.start}); expected a text file", bad_line) from None
    return text.removeprefix("\ufeff")


def _front_matter(fm_lines: list[str], path: Path | str) -> dict[Any, Any]:
    """The front matter's keys and values: by the fast path for the flat lines loopdeck writes,
    else by PyYAML (anchors and aliases refused)."""
    loaded = fast_front_matter(fm_lines)
    if loaded is None:
        yaml = yaml_module()
        try:
            anchor = _anchor_line("".join(fm_lines))
            if anchor is not None:
                raise StateError(
                    path, "YAML anchors and aliases (&, *) are not allowed in a state file", anchor
                )
            loaded = yaml.load("".join(fm_lines), Loader=_YAML["loader"])
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = mark.line + 2 if mark is not None else None
            problem = getattr(exc, "problem", None) or str(exc)
            raise StateError(path, f"front matter is not valid YAML: {problem}", where) from None
        except (ValueError, RecursionError) as exc:  # e.g. an integer of more than 4300 digits
            problem = "a number too large to read" if "digits" in str(exc) else type(exc).__name__
            raise StateError(path, f"front matter holds a value loopdeck cannot read: {problem}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise StateError(path, f"front matter is a {type(loaded).__name__}, expected key: value pairs", 2)
    return loaded


def _segments(fm_lines: list[str]) -> tuple[list[str], dict[str, str], dict[str, int]]:
    """The front matter cut at its keys: the lines before the first key (comments), each key's
    text (its line and the lines that continue it), and the line each key starts on."""
    preamble: list[str] = []
    raw: dict[str, str] = {}
    key_lines: dict[str, int] = {}
    current: str | None = None
    for index, text_line in enumerate(fm_lines):
        match = _KEY_LINE.match(text_line)
        if match:
            current = _line_key(match)
            key_lines.setdefault(current, index + 2)
            raw[current] = text_line
        elif current is None:
            preamble.append(text_line)
        else:
            raw[current] += text_line
    return preamble, raw, key_lines


def _normalised(key: str, value: Any) -> Any:
    """A known key's checked value as the state holds it: null as the key's "not set", a
    number read where text belongs as its text."""
    if value is None and key in _UNSET:
        return _UNSET[key]()
    if key in _STRINGS and isinstance(value, int):
        return str(value)
    return value


_UNSET: dict[str, Any] = {
    "completion_promise": lambda: NULL,
    "task_file": lambda: NULL,
    "github_project_id": str,
    "started_at": str,
    "loop_id": str,
    "verify": list,
    "notify": list,
    "stuck": dict,
    "limits": dict,
    "usage": dict,
    "last_validation": dict,
}
"""What a null in the file means for the keys that have a "not set" value of their own."""


def _describe(value: Any) -> str:
    if isinstance(value, str):
        return f"the string {value!r}"
    if value is None:
        return "null"
    return f"{type(value).__name__} {value!r}"
