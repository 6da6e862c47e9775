"""Secrets out of everything loopdeck writes: one place, one list of forms.

Agents and test suites print environment dumps, failing HTTP requests and config files; the
journal, the iteration logs and the archived summaries keep them for as long as the workspace
lives, and people paste them into issues. So every file and stream loopdeck writes goes
through `redact` first.

The Stop hook imports this module on every agent turn: it needs `re` only, and its patterns
are compiled on first use, not at import.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

MASK = "[REDACTED]"

_NAME_WORDS = r"(?:KEY|SECRET|TOKEN|PASSWORD|PASSWD|PASSPHRASE|CREDENTIALS?)"

# (pattern, replacement); a replacement keeps the label and drops the secret.
_SOURCES: tuple[tuple[str, str], ...] = (
    # PEM private keys, the whole body (to the end of the text when the END line is cut off)
    (
        r"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
        r"-----BEGIN \1PRIVATE KEY-----" + MASK + r"-----END \1PRIVATE KEY-----",
    ),
    # credentials in URLs: scheme://user:password@host
    (r"(?i)\b([a-z][a-z0-9+.-]*://[^\s/:@\"']+):[^\s/@\"']+@", r"\1:" + MASK + "@"),
    # Authorization headers, whatever the scheme
    (
        r"(?i)\b((?:proxy-)?authorization\"?\s*[:=]\s*\"?)(?:(basic|bearer|token|digest)\s+)?[^\s\"',]+",
        r"\1\2 " + MASK,
    ),
    (r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/-]{16,}=*", r"\1" + MASK),
    # vendor key and token forms
    (r"(?<![A-Za-z0-9])sk-ant-[A-Za-z0-9_-]{4,}", MASK),
    (r"(?<![A-Za-z0-9])sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{16,}", MASK),
    (r"(?<![A-Za-z0-9])(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{8,}", MASK),
    (r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})", MASK),
    (r"(?<![A-Za-z0-9])glpat-[A-Za-z0-9_-]{16,}", MASK),
    (r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{16,}", MASK),
    (r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9-]{10,}", MASK),
    (r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Z])", MASK),
    (r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_-]{35}", MASK),
    (r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*", MASK),
    # NAME=value and NAME: value where NAME says it is a secret (OPENAI_API_KEY, DB_PASSWORD…)
    (
        r"(?i)(?<![A-Za-z0-9])([A-Za-z0-9_.-]*" + _NAME_WORDS + r"[A-Za-z0-9_.-]*\\?[\"']?[ \t]*[:=][ \t]*"
        r"(?:\\?[\"'])?)(?!\[REDACTED\]|(?:\d{1,9}|true|false|null|none)(?![^\s\"'\\,;&<>{}()\[\]]))"
        r"[^\s\"'\\,;&<>{}()\[\]]+",
        r"\1" + MASK,
    ),
)

_COMPILED: list[tuple[re.Pattern[str], str]] = []


def _patterns() -> list[tuple[re.Pattern[str], str]]:
    if not _COMPILED:
        _COMPILED.extend((re.compile(src, re.DOTALL), repl) for src, repl in _SOURCES)
    return _COMPILED


def redact(text: str) -> str:
    """`text` with every API key, token, password and private key replaced by `[REDACTED]`."""
    if not text:
        return text
    for pattern, repl in _patterns():
        text = pattern.sub(repl, text)
    return text


def redact_bytes(data: bytes) -> bytes:
    """`redact` for output that may not be UTF-8: undecodable bytes pass through untouched."""
    return redact(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")


def redact_obj(value: Any, _redact: Callable[[str], str] = redact) -> Any:
    """Every string inside `value` (dicts, lists, tuples, recursively) redacted; keys kept."""
    if isinstance(value, str):
        return _redact(value)
    if isinstance(value, dict):
        return {k: redact_obj(v, _redact) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_obj(v, _redact) for v in value]
    return value
