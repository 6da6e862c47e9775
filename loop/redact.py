"""Secrets out of everything loopdeck writes: one place, one list of forms.

Agents and test suites print environment dumps, failing HTTP requests and config files; the
journal, the iteration logs and the archived summaries keep them for as long as the workspace
lives, and people paste them into issues. So every file and stream loopdeck writes goes
through `redact` first.

The Stop hook imports this module on every agent turn: it needs `re` only, and a pattern is
compiled only once a text holds one of its needles, not at import. Every repetition in them is
bounded, so that no output (a megabyte of `a_a_a_…`) can make a pattern backtrack quadratically.
"""

from __future__ import annotations

import re
from collections.abc import Callable

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: the Stop hook does not pay for typing
    from typing import Any


MASK = "[REDACTED]"

_NAME_WORDS = r"(?:KEY|SECRET|TOKEN|PASSWORD|PASSWD|PASSPHRASE|CREDENTIALS?)"

# (substrings one of which the text must hold, lowercased; pattern; replacement). The cheap
# `in` test skips a pattern's pass over text that cannot hold its secret; a replacement keeps
# the label and drops the secret. Quantifiers are bounded, and possessive (`+`) where what
# follows cannot be part of the run, so nothing backtracks.
_SOURCES: tuple[tuple[tuple[str, ...], str, str], ...] = (
    # PEM private keys, the whole body (to the end of the text when the END line is cut off)
    (
        ("private key",),
        r"-----BEGIN ([A-Z0-9 ]{0,32})PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]{0,32}PRIVATE KEY-----|\Z)",
        r"-----BEGIN \1PRIVATE KEY-----" + MASK + r"-----END \1PRIVATE KEY-----",
    ),
    # credentials in URLs: scheme://user:password@host
    (("://",), r"(://[^\s/:@\"']{1,256}+):[^\s/@\"']{1,512}+@", r"\1:" + MASK + "@"),
    # Authorization headers, whatever the scheme
    (
        ("authorization",),
        r"(?i)\b((?:proxy-)?authorization\"?[ \t]{0,8}+[:=][ \t]{0,8}+\"?)"
        r"(?:(basic|bearer|token|digest)[ \t]{1,8}+)?[^\s\"',]+",
        r"\1\2 " + MASK,
    ),
    (("bearer",), r"(?i)\b(bearer[ \t]{1,16}+)[A-Za-z0-9._~+/-]{16,4096}+=*", r"\1" + MASK),
    # vendor key and token forms
    (("sk-ant-",), r"(?<![A-Za-z0-9])sk-ant-[A-Za-z0-9_-]{4,512}+", MASK),
    (("sk-",), r"(?<![A-Za-z0-9])sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{16,512}+", MASK),
    (("_live_", "_test_"), r"(?<![A-Za-z0-9])(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{8,512}+", MASK),
    (
        ("gh", "github_pat_"),
        r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{20,512}+|github_pat_[A-Za-z0-9_]{20,512}+)",
        MASK,
    ),
    (("glpat-",), r"(?<![A-Za-z0-9])glpat-[A-Za-z0-9_-]{16,512}+", MASK),
    (("hf_",), r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{16,512}+", MASK),
    (("xox",), r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9-]{10,512}+", MASK),
    (("akia", "asia"), r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Z])", MASK),
    (("aiza",), r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_-]{35}", MASK),
    (
        ("eyj",),
        r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{4,4096}+\.eyJ[A-Za-z0-9_-]{4,8192}+\.[A-Za-z0-9_-]{0,4096}+",
        MASK,
    ),
    # NAME=value and NAME: value where NAME says it is a secret (OPENAI_API_KEY, DB_PASSWORD…);
    # the match starts at the telling word, so the scan stays linear whatever precedes it
    (
        ("key", "secret", "token", "passw", "passphrase", "credential"),
        r"(?i)(" + _NAME_WORDS + r"[A-Za-z0-9_.-]{0,64}+\\?[\"']?[ \t]{0,8}+[:=][ \t]{0,8}+"
        r"(?:\\?[\"'])?)(?!\[REDACTED\]|(?:\d{1,9}|true|false|null|none)(?![^\s\"'\\,;&<>{}()\[\]]))"
        r"[^\s\"'\\,;&<>{}()\[\]]++",
        r"\1" + MASK,
    ),
)

_COMPILED: dict[str, re.Pattern[str]] = {}


def _pattern(source: str) -> re.Pattern[str]:
    """Compiled the first time a text holds one of its needles: most texts hold none of most
    needles, and compiling all sixteen costs the Stop hook about 1.5 ms on every turn."""
    pattern = _COMPILED.get(source)
    if pattern is None:
        pattern = _COMPILED[source] = re.compile(source, re.DOTALL)
    return pattern


def redact(text: str) -> str:
    """`text` with every API key, token, password and private key replaced by `[REDACTED]`."""
    if not text:
        return text
    low = text.lower()
    for needles, source, repl in _SOURCES:
        if any(needle in low for needle in needles):
            text = _pattern(source).sub(repl, text)
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
