"""Text from a loop's files shown on a terminal without the terminal acting on it.

A state file, a task title, a queued note or a notification target comes from the workspace:
someone else's text. Printed raw, an escape sequence in it could rewrite the line above (CR,
`ESC[2K`), hide text (`ESC[8m`), set the window title (OSC), ring the bell, or reorder what a
person reads (bidi overrides). So every such value goes through `visible` on its way to a
terminal: each control character is shown as an escape a person can read, never sent.
"""

from __future__ import annotations

import re

_NAMED = {
    "\x1b": "\\e",
    "\r": "\\r",
    "\n": "\\n",
    "\x07": "\\a",
    "\x08": "\\b",
    "\x0b": "\\v",
    "\x0c": "\\f",
    "\x00": "\\0",
}
_UNSAFE = re.compile(
    "[\x00-\x08\x0a-\x1f\x7f-\x9f"  # C0 (but tab), DEL, C1 (CSI, OSC, ST and the rest)
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # bidi marks, embeddings, overrides, isolates
    "\u2028\u2029"  # line and paragraph separators
    "\u200b-\u200d\u2060-\u2064\ufeff]"  # zero-width characters: text a person cannot see
)
_UNSAFE_KEEP_LINES = re.compile(_UNSAFE.pattern.replace("\x0a-\x1f", "\x0b-\x1f"))


def _shown(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: object, keep_newlines: bool = False) -> str:
    """`text` with every control character shown as a readable escape (`\\e`, `\\r`, `\\x9b`,
    `\\u202e`). `keep_newlines`: a newline stays a line break (a whole prompt shown as lines)."""
    value = text if isinstance(text, str) else str(text)
    pattern = _UNSAFE_KEEP_LINES if keep_newlines else _UNSAFE
    return pattern.sub(_shown, value)
