"""Verification commands (seed 004 §4, seed 003 §4.4.8): checked against an allowlist before
the loop starts, run without a shell unless the command needs one, with a timeout, their output
kept to the last lines and scrubbed of secrets before it reaches the journal.

An overnight loop runs these commands unattended, over and over: a typo'd `rm -rf /` or a
`curl … | sh` pasted from a README must be refused before the first iteration, not discovered.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from loop.agent import kill_group
from loop.errors import LoopdeckError

DEFAULT_ALLOW = (
    "pytest",
    "python -m pytest",
    "python3 -m pytest",
    "tox",
    "nox",
    "ruff",
    "mypy",
    "black --check",
    "flake8",
    "pyright",
    "npm test",
    "npm run test",
    "npm run build",
    "npm run lint",
    "npm run typecheck",
    "pnpm test",
    "pnpm run",
    "yarn test",
    "yarn run",
    "npx tsc",
    "npx eslint",
    "npx vitest",
    "npx jest",
    "cargo test",
    "cargo build",
    "cargo check",
    "cargo clippy",
    "cargo fmt --check",
    "go test",
    "go build",
    "go vet",
    "make",
    "just",
    "gradle test",
    "./gradlew test",
    "mvn test",
    "dotnet test",
    "dotnet build",
    "bundle exec rspec",
    "rspec",
    "git diff --check",
    "true",
)
"""Test, build and lint commands; a workspace adds its own in the state's `verify_allow`."""

_SHELL_OPS = re.compile(r"\|\||&&|[|;<>`]|\$\(")
_SEGMENTS = re.compile(r"\|\||&&|[|;]")


class CommandRefused(LoopdeckError):
    pass


def _danger(argv: Sequence[str], whole: str) -> str | None:
    """A reason to refuse `argv` whatever the allowlist says."""
    if not argv:
        return None
    name = Path(argv[0]).name
    flags = "".join(a[1:] for a in argv[1:] if a.startswith("-") and not a.startswith("--"))
    if name == "rm" and ("r" in flags or "R" in flags or "--recursive" in argv):
        targets = [a for a in argv[1:] if not a.startswith("-")]
        if any(t in ("/", "~", "*", ".", "..", "/*", "~/") or t.startswith(("/", "~")) for t in targets):
            return "deletes recursively outside the project"
    if name in ("sudo", "su", "doas", "mkfs", "shutdown", "reboot", "dd"):
        return f"runs {name}"
    if name == "git" and len(argv) > 1:
        if argv[1] == "push" and any(a in ("-f", "--force", "--force-with-lease") for a in argv):
            return "force-pushes"
        if argv[1] == "reset" and "--hard" in argv:
            return "throws away uncommitted work (git reset --hard)"
        if argv[1] == "clean" and any("f" in a for a in argv[2:] if a.startswith("-")):
            return "deletes untracked files (git clean -f)"
    if re.search(r"\b(curl|wget)\b[^|]*\|\s*(sudo\s+)?(ba|z|da|fi)?sh\b", whole):
        return "pipes a download into a shell"
    if re.search(r":\(\)\s*\{", whole):
        return "is a fork bomb"
    return None


def _allowed(argv: Sequence[str], allow: Iterable[str]) -> bool:
    for entry in allow:
        prefix = shlex.split(entry)
        if not prefix:
            continue
        if len(argv) >= len(prefix) and all(
            a == p or (i == 0 and Path(a).name == p)
            for i, (a, p) in enumerate(zip(argv, prefix, strict=False))
        ):
            return True
    return False


@dataclass(frozen=True)
class Check:
    command: str
    argv: tuple[str, ...] | None
    """None: the command needs a shell (pipes, `&&`, redirects) and runs as `sh -c`."""


def check(command: str, extra_allow: Iterable[str] = ()) -> Check:
    """Refuse a verification command that is dangerous or not allowlisted, with the reason."""
    allow = (*DEFAULT_ALLOW, *extra_allow)
    text = command.strip()
    if not text:
        raise CommandRefused("verification command is empty")
    needs_shell = bool(_SHELL_OPS.search(text))
    segments = [s.strip() for s in _SEGMENTS.split(text)] if needs_shell else [text]
    for segment in segments:
        try:
            argv = shlex.split(segment)
        except ValueError as exc:
            raise CommandRefused(f"verification command {command!r} cannot be parsed: {exc}") from None
        argv = [a for a in argv if not re.fullmatch(r"\d?[<>]{1,2}.*", a)]
        reason = _danger(argv, text)
        if reason:
            raise CommandRefused(f"verification command {command!r} refused: it {reason}")
        if argv and not _allowed(argv, allow):
            raise CommandRefused(
                f"verification command {command!r} refused: {' '.join(argv[:2])!r} is not in the "
                "allowlist (test, build and lint commands such as pytest, npm test, cargo test, "
                "make, ruff, mypy); add it to `verify_allow` in the state file if you trust it"
            )
    return Check(text, None if needs_shell else tuple(shlex.split(text)))


# --- secrets -------------------------------------------------------------------------------

_SECRETS = [
    re.compile(r"\b(sk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,})"),
    re.compile(r"\b(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"),
    re.compile(r"\b(AKIA[0-9A-Z]{16})\b"),
    re.compile(r"\b(xox[abprs]-[A-Za-z0-9-]{10,})"),
    re.compile(r"\b(AIza[0-9A-Za-z_-]{35})"),
    re.compile(
        r"(?i)\b((?:api[_-]?key|secret|token|password|passwd|authorization)\s*[:=]\s*)(\"?)([^\s\"']{8,})"
    ),
    re.compile(r"(?i)\b(bearer\s+)([A-Za-z0-9._~+/-]{16,}=*)"),
]


def redact(text: str) -> str:
    """Replace what looks like an API key, token or password with `[REDACTED]`."""
    for pattern in _SECRETS:
        if pattern.groups >= 3:
            text = pattern.sub(lambda m: f"{m.group(1)}{m.group(2)}[REDACTED]", text)
        elif pattern.groups == 2:
            text = pattern.sub(lambda m: f"{m.group(1)}[REDACTED]", text)
        else:
            text = pattern.sub("[REDACTED]", text)
    return text


# --- running -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    command: str
    exit_code: int
    duration_s: float
    tail: str
    """The last lines of stdout and stderr together, redacted."""
    timed_out: bool = False

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


def run(item: Check, cwd: Path, timeout: float = 600.0, last_lines: int = 50) -> Outcome:
    start = time.monotonic()
    argv: Sequence[str] = item.argv if item.argv is not None else ["/bin/sh", "-c", item.command]
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as exc:
        return Outcome(item.command, 127, time.monotonic() - start, f"cannot start: {exc.strerror}")
    timed_out = False
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_group(proc.pid)
        out, _ = proc.communicate()
    lines = out.decode("utf-8", "replace").splitlines()[-last_lines:]
    tail = redact("\n".join(lines))
    if timed_out:
        tail += f"\n(timed out after {timeout:g} s)"
    return Outcome(item.command, proc.returncode, round(time.monotonic() - start, 3), tail, timed_out)
