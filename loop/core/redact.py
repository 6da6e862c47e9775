"""Secrets out of everything loopdeck writes: one place, one list of forms.

Agents and test suites print environment dumps, failing HTTP requests and config files, and
people paste tokens into prompts, answers and notification targets; the state file and its
backup, the journal, the control queue, the logs and the archives keep them for as long as
the workspace lives, notifications carry them to chat rooms, and people paste all of it into
issues. So every file and message loopdeck writes goes through `redact` first (`redact_obj`
for structures, `LineRedactor` for output read as it comes, `target_shown` for a notification
target named in a message). Redacting is idempotent: a redacted text comes back unchanged.

The Stop hook imports this module on every agent turn: it needs `re` only, and a pattern is
compiled only once a text holds one of its needles, not at import. Every repetition in them is
bounded, so that no output (a megabyte of `a_a_a_…`) can make a pattern backtrack quadratically.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

MASK = "[REDACTED]"

_NAME_WORDS = r"(?:KEY|SECRET|TOKEN|PASSWORD|PASSWD|PASSPHRASE|CREDENTIALS?)"
_OPTION_WORDS = (
    r"(?:password|passwd|passphrase|token|secret|api[-_]?key|access[-_]?key|secret[-_]?key"
    r"|access[-_]token|auth[-_]token)"
)

_SECRET_WORDS = ("key", "secret", "token", "passw", "passphrase", "credential")
_NAME_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789_.-"
_GATE_HITS = 200
"""Past this many places to look at, a gate lets the pattern look (it is linear anyway)."""


def _names_a_value(low: str) -> bool:
    """Could `low` hold `NAME=value`: a secret's word, the rest of a name, `=` or `:`? Prose
    names keys and tokens all the time ("the API key from the environment"); this answers for
    it without compiling the pattern, which costs the Stop hook most of a millisecond."""
    hits = 0
    for word in _SECRET_WORDS:
        at = low.find(word)
        while at >= 0:
            hits += 1
            if hits > _GATE_HITS:
                return True
            rest = low[at + len(word) : at + len(word) + 80].lstrip(_NAME_CHARS)
            rest = rest.removeprefix("\\")
            rest = rest[1:] if rest[:1] in ("'", '"') else rest
            if rest.lstrip(" \t")[:1] in (":", "="):
                return True
            at = low.find(word, at + 1)
    return False


def _passes_an_option(low: str) -> bool:
    """Could `low` hold `--NAME value` or `--NAME=value` for a secret's option name?"""
    at = low.find("--")
    hits = 0
    while at >= 0:
        hits += 1
        if hits > _GATE_HITS:
            return True
        window = low[at + 2 : at + 200]
        name = window[: len(window) - len(window.lstrip(_NAME_CHARS))]
        after = window[len(name) : len(name) + 1]
        if after in ("=", " ", "\t") and any(word in name for word in _SECRET_WORDS):
            return True
        at = low.find("--", at + 2)
    return False


# (substrings one of which the text must hold, lowercased, or a function of the lowercased
# text that says whether it may hold one; pattern; replacement). The cheap test skips a
# pattern's pass (and its compilation) over text that cannot hold its secret; a replacement
# keeps the label and drops the secret. Quantifiers are bounded, and possessive (`+`) where
# what follows cannot be part of the run, so nothing backtracks.
_SOURCES: tuple[tuple[tuple[str, ...] | Callable[[str], bool], str, str], ...] = (
    # PEM private keys, the whole body (to the end of the text when the END line is cut off)
    (
        ("private key",),
        r"-----BEGIN ([A-Z0-9 ]{0,32})PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]{0,32}PRIVATE KEY-----|\Z)",
        r"-----BEGIN \1PRIVATE KEY-----" + MASK + r"-----END \1PRIVATE KEY-----",
    ),
    # credentials in URLs: scheme://user:password@host, the user may be empty
    # (`redis://:pw@host`) and the password may hold `@` (`user:p@ss@host`): it runs to the
    # last `@` before the path. The user part is possessive and the password stops at `/`, so
    # each `://` is scanned once, at most 512 characters
    (("://",), r"(://[^\s/:@\"']{0,256}+):[^\s/\"']{1,512}@", r"\1:" + MASK + "@"),
    # webhook URLs whose path is the secret: Slack's, Discord's
    (
        ("hooks.slack.com",),
        r"(?i)(hooks\.slack\.com/(?:services|workflows|triggers)/)[A-Za-z0-9_/-]{1,512}+",
        r"\1" + MASK,
    ),
    (
        ("discord",),
        r"(?i)((?:discord|discordapp)\.com/api/(?:v[0-9]{1,3}/)?webhooks/)[0-9]{1,32}+/[A-Za-z0-9_-]{1,256}+",
        r"\1" + MASK,
    ),
    # a notification target as loopdeck spells it (`apprise:tgram://BOTTOKEN/CHAT`): Apprise
    # puts tokens anywhere in its URLs, so all of it after the service goes
    (
        ("apprise:",),
        r"(?i)(apprise:[a-z0-9+.-]{1,32}+://)(?!\[REDACTED\]|\u2026)[^\s\"'<>]{1,2048}+",
        r"\1" + MASK,
    ),
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
    (("npm_",), r"(?<![A-Za-z0-9])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])", MASK),
    (("xox",), r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9-]{10,512}+", MASK),
    # SendGrid: SG.<22>.<43>
    (("sg.",), r"(?<![A-Za-z0-9])SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])", MASK),
    # `curl -u user:pass`, `--user user:pass` (also `-u 'user:pass'`): the password goes, the
    # user stays; `git push -u origin` (no colon) and `--user-agent` are left alone
    (
        ("-u", "--user"),
        r"(?<![\w-])(-u|--user)([ \t]{1,8}+|=)([\"']?)([^\s:\"']{1,256}+):(?!\[REDACTED\])[^\s\"']{1,512}+",
        r"\1\2\3\4:" + MASK,
    ),
    # `mysql -pPASS` (the password glued to -p), after a MySQL or MariaDB client's name on
    # the same command line: `mkdir -pv` elsewhere is no password
    (
        ("mysql", "mariadb"),
        r"(?i)(\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mariadb)\b[^\n;&|]{0,256}?(?<![\w-])-p)"
        r"(?!\[REDACTED\])(?:\"[^\"\n]{1,512}+\"|'[^'\n]{1,512}+'|[^\s\"']{1,512}+)",
        r"\1" + MASK,
    ),
    (("akia", "asia"), r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Z])", MASK),
    (("aiza",), r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_-]{35}", MASK),
    (
        ("eyj",),
        r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{4,4096}+\.eyJ[A-Za-z0-9_-]{4,8192}+\.[A-Za-z0-9_-]{0,4096}+",
        MASK,
    ),
    # `--password X`, `--db-password=X`, `--api-key "X Y"`: a long option that names a secret,
    # and its value (not `--password-file PATH`, which names where one is; not a following
    # `--option`, nor the word after the option in prose: "pass --token and --secret to it")
    (
        _passes_an_option,
        r"(?i)(?<![\w-])(--(?:[a-z0-9]{1,32}+[-_]){0,4}" + _OPTION_WORDS + r")(=|[ \t]{1,8}+(?!-|"
        r"(?:and|or|to|is|are|was|be|not|with|for|from|by|as|at|the|an?|of|in|on|if|when|that|this"
        r"|should|must|can|could|will|would|may|might|instead|flag|option|argument|value|given)"
        r"(?=[\s.,;:)]|\Z)))(?!\[REDACTED\])"
        r"(?:\"[^\"\n]{1,512}+\"|'[^'\n]{1,512}+'|[\"']?[^\s\"'`]{1,512}+)",
        r"\1\2" + MASK,
    ),
    # NAME=value and NAME: value where NAME says it is a secret (OPENAI_API_KEY, DB_PASSWORD…);
    # the match starts at the telling word, so the scan stays linear whatever precedes it
    (
        _names_a_value,
        r"(?i)(" + _NAME_WORDS + r"[A-Za-z0-9_.-]{0,64}+\\?[\"']?[ \t]{0,8}+[:=][ \t]{0,8}+"
        r"(?:\\?[\"'])?)(?!\[REDACTED\]|(?:\d{1,9}|true|false|null|none)(?![^\s\"'\\,;&<>{}()\[\]]))"
        r"[^\s\"'\\,;&<>{}()\[\]]++",
        r"\1" + MASK,
    ),
)

_ANY_NEEDLE = tuple(
    sorted(
        {needle for needles, _, _ in _SOURCES if not callable(needles) for needle in needles}
        | {*_SECRET_WORDS, "--"}  # what the two gates look for first
    )
)
"""Every needle at once: most short values (a time, a status, an id) hold none of them, and
one pass over this list costs a third of asking each pattern in turn."""

_COMPILED: dict[str, re.Pattern[str]] = {}


def _pattern(source: str) -> re.Pattern[str]:
    """Compiled the first time a text holds one of its needles: most texts hold none of most
    needles, and compiling them all would cost the Stop hook about 3 ms on every turn."""
    pattern = _COMPILED.get(source)
    if pattern is None:
        pattern = _COMPILED[source] = re.compile(source, re.DOTALL)
    return pattern


def redact(text: str) -> str:
    """`text` with every API key, token, password and private key replaced by `[REDACTED]`."""
    if not text:
        return text
    low = text.lower()
    if not any(needle in low for needle in _ANY_NEEDLE):
        return text
    for needles, source, repl in _SOURCES:
        if needles(low) if callable(needles) else any(needle in low for needle in needles):
            text = _pattern(source).sub(repl, text)
    return text


def redact_obj(value: Any, _redact: Callable[[str], str] = redact) -> Any:
    """Every string inside `value` (dicts, lists, tuples, recursively) redacted; keys kept."""
    if isinstance(value, str):
        return _redact(value)
    if isinstance(value, dict):
        return {k: redact_obj(v, _redact) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_obj(v, _redact) for v in value]
    return value


_KEY_BEGIN = r"-----BEGIN [A-Z0-9 ]{0,32}PRIVATE KEY-----"
_KEY_END = r"-----END [A-Z0-9 ]{0,32}PRIVATE KEY-----"
_KEY_LINE = (
    r"[ \t]{0,64}+(?:[A-Za-z0-9+/=]{1,256}+"
    r"|[A-Z][A-Za-z]{0,31}+(?:-[A-Z][A-Za-z]{0,31}+){0,4}+: [^\n]{0,256}+)?"
    r"[ \t\r]{0,64}+\n?"
)
"""A line a PEM body can hold: base64, a header (`Proc-Type: 4,ENCRYPTED`), or nothing."""


class LineRedactor:
    """`redact` for output that arrives in pieces (a process's output, read as it comes).

    It redacts whole lines, so a token split across two reads is whole when it is redacted
    (a line longer than `max_line` is cut there), and it remembers a private key a piece left
    open: the key's lines that follow are dropped up to its END line (or the first line no key
    holds), where `redact` alone, given the next piece, would see base64 and keep it."""

    def __init__(self, max_line: int = 1024 * 1024) -> None:
        self.max_line = max_line
        self._pending = b""
        self._in_key = False

    def feed(self, data: bytes) -> bytes:
        """What of `data` (with what came before it) can be written now, redacted."""
        pending = self._pending + data
        cut = pending.rfind(b"\n") + 1
        if cut == 0 and len(pending) > self.max_line:
            cut = len(pending)
        self._pending = pending[cut:]
        return self._clean(pending[:cut]) if cut else b""

    def close(self) -> bytes:
        """The last, unfinished line, redacted."""
        rest, self._pending = self._pending, b""
        return self._clean(rest) if rest else b""

    def _clean(self, data: bytes) -> bytes:
        """`data` redacted; output that is not UTF-8 passes through untouched where it is not."""
        text = data.decode("utf-8", "surrogateescape")
        if self._in_key:
            text = self._after_key(text)
        opened = False
        if "PRIVATE KEY-----" in text:
            begins = list(_pattern(_KEY_BEGIN).finditer(text))
            opened = bool(begins) and _pattern(_KEY_END).search(text, begins[-1].end()) is None
        out = redact(text)
        if opened:  # redact masked it to the end of this piece; its lines to come are dropped
            self._in_key = True
            if text.endswith("\n") and not out.endswith("\n"):
                out += "\n"
        return out.encode("utf-8", "surrogateescape")

    def _after_key(self, text: str) -> str:
        """`text` from where the open key's lines end: after its END line, or at the first
        line that cannot be part of a key."""
        pos = 0
        while pos < len(text):
            newline = text.find("\n", pos)
            stop = len(text) if newline < 0 else newline + 1
            end = _pattern(_KEY_END).search(text, pos, stop)
            if end is not None:
                self._in_key = False
                rest = text[end.end() :]
                return rest[1:] if rest.startswith("\n") else rest
            if _pattern(_KEY_LINE).fullmatch(text, pos, stop) is None:
                self._in_key = False
                return text[pos:]
            pos = stop
        return ""


def target_shown(target: str) -> str:
    """A notification target as a journal line or an archive may show it: an http(s) URL as
    its scheme and host (a Slack or Discord webhook's path is its secret, and a URL's user part
    and query can be), an Apprise URL as its service (Apprise puts tokens anywhere in them),
    anything else redacted."""
    if target.startswith("apprise:"):
        service, sep, _rest = target[len("apprise:") :].partition("://")
        return f"apprise:{service}://\u2026" if sep and service.isalnum() else "apprise:\u2026"
    scheme, sep, rest = target.partition("://")
    if sep and scheme.lower() in ("http", "https"):
        host = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0].rpartition("@")[2]
        return f"{scheme}://{host}/\u2026"
    return redact(target)
