"""Verification commands: checked against an allowlist before
the loop starts, run without a shell, with a timeout, their output kept to the last lines and
scrubbed of secrets before it reaches the journal.

An overnight loop runs these commands unattended, over and over: a typo'd `rm -rf /` or a
`curl … | sh` pasted from a README must be refused before the first iteration, not discovered.

An allowlist is only as good as what it checks, so:

* a command is split into argv with `shlex` and executed directly, never through `sh -c`;
  anything the shell would have interpreted (substitution, backticks, variables, `;`, `&`, `|`,
  redirections, globs, newlines) is refused, unless the person allowed a shell for that exact
  command with an allow entry `sh: <the command>`;
* the program is resolved on PATH (absolute PATH entries only) or inside the workspace
  (`./gradlew`), and an allow entry matches the program it *resolves to*, not its file name: a
  script called `pytest` somewhere else is not pytest;
* the options of allowed programs that run code, load plugins, set configuration or reach the
  network (`make --eval`, `pytest -p`, `npm test --script-shell=…`, `mypy
  --python-executable`, `go test -exec`, a `npm run` script nobody listed…) are refused, and
  the paths a command names (files to test, a makefile, a cache or report to write) must stay
  inside the workspace, symlinks resolved: `loop/verify_options.py` holds the rules per program,
  read as each program reads its options (`-sE`, `--ev=`, `-sfFILE`);
* only an allow entry equal to the whole command (`--verify-allow '<the command>'`) lets that
  exact command use such options; an entry it merely starts with does not.

Two boundaries, not one. The allowlist is a guard rail for commands a person typed: it keeps
such a command inside the workspace. Whether the workspace's own code may run at all (its
conftest.py, Makefile, build.rs, package.json scripts, which every test command runs) is decided
by trust: a person confirming the loop's commands with `loopdeck trust` (loop/trust.py). The
refusals here say which boundary refused, and what a person at a terminal can do about it; they
may reach the agent as a failure prompt, so they tell it nothing to do.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from loop.core.errors import LoopdeckError
from loop.core.redact import redact
from loop.processes.agent import child_preexec, kill_group
from loop.processes.sandbox import Spec, Status, wrap
from loop.verify import options as verify_options
from loop.verify import results
from loop.verify.results import TestCounts

__all__ = [
    "DEFAULT_ALLOW",
    "WORKER_ALLOW",
    "Check",
    "CommandRefused",
    "Outcome",
    "check",
    "on_worker",
    "redact",
    "run",
]

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
    "pnpm run test",
    "pnpm run build",
    "pnpm run lint",
    "pnpm run typecheck",
    "yarn test",
    "yarn run test",
    "yarn run build",
    "yarn run lint",
    "yarn run typecheck",
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

WORKER_ALLOW = ("ruff", "black --check", "cargo fmt --check", "git diff --check", "true")
"""What a Temporal worker runs for any loop without its own person allowing more: programs that
run none of the repository's code (no Makefile, no package.json script, no conftest.py, no
build script, no linter plugin). The loop comes from whoever can start a workflow on the
namespace; `loopdeck worker --verify-allow CMD` adds to this, per worker."""

WORKER_HINT = "loopdeck worker --verify-allow"


def on_worker(own: Iterable[str]) -> dict[str, Any]:
    """`check`'s allowlist on a Temporal worker: `WORKER_ALLOW` and the commands the worker's
    own person allowed (`own`), never `DEFAULT_ALLOW` nor what the loop asks for."""
    return {"base": (*WORKER_ALLOW, *own), "hint": WORKER_HINT}


SHELL_PREFIX = "sh:"
"""An allow entry `sh: <exact command>` lets that one command run through `/bin/sh -c`."""


class CommandRefused(LoopdeckError):
    pass


# --- shell syntax ----------------------------------------------------------------------------

_OUTSIDE_QUOTES = {
    ";": "a command separator (;)",
    "&": "a background or '&&' operator (&)",
    "|": "a pipe (|)",
    "<": "a redirection (<)",
    ">": "a redirection (>)",
    "`": "a backtick substitution",
    "$": "a variable or command substitution ($)",
    "(": "a subshell (()",
    ")": "a subshell ())",
    "*": "a glob (*)",
    "?": "a glob (?)",
    "[": "a glob ([)",
    "{": "a brace expansion ({)",
}


def shell_syntax(text: str) -> str | None:
    """What in `text` only a shell would interpret, or None: the command is then exactly the
    words `shlex.split` gives, and running them directly loses nothing the person meant."""
    if "\n" in text or "\r" in text:
        return "a newline (a second command)"
    if "\x00" in text:
        return "a NUL byte"
    quote: str | None = None
    escaped = False
    word_start = True
    for ch in text:
        if escaped:
            escaped = False
            word_start = False
            continue
        if quote == "'":
            if ch == "'":
                quote = None
            continue
        if quote == '"':
            if ch == "\\":
                escaped = True
            elif ch == '"':
                quote = None
            elif ch in "$`":
                return _OUTSIDE_QUOTES[ch] + " inside double quotes"
            continue
        if ch == "\\":
            escaped = True
        elif ch in "'\"":
            quote = ch
        elif ch in _OUTSIDE_QUOTES:
            return _OUTSIDE_QUOTES[ch]
        elif ch == "~" and word_start:
            return "a home-directory expansion (~)"
        elif ch == "#" and word_start:
            return "a comment (#)"
        word_start = ch in " \t"
    return None


# --- danger whatever the allowlist says ------------------------------------------------------


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


# --- the allowlist ---------------------------------------------------------------------------


def _search_path() -> str:
    """PATH without relative entries: `.` on PATH would let the workspace shadow any program."""
    entries = os.environ.get("PATH", os.defpath).split(os.pathsep)
    return os.pathsep.join(p for p in entries if os.path.isabs(p))


def resolve(program: str, cwd: Path | None) -> str | None:
    """The file `program` runs: looked up on PATH when it is a bare name, else relative to the
    workspace. None when there is no such program."""
    if "/" not in program:
        return shutil.which(program, path=_search_path())
    base = cwd if cwd is not None else Path.cwd()
    path = os.path.join(base, program)
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


def _same_program(given: str, allowed: str, cwd: Path | None) -> bool:
    """Is `given` the program the allow entry `allowed` names? Bare names run from PATH and
    match by name (both resolve the same way); a path matches only the same file."""
    if "/" not in given:
        return "/" not in allowed and given == allowed
    if not os.path.isabs(given):
        relative = not os.path.isabs(allowed) and "/" in allowed
        return relative and os.path.normpath(given) == os.path.normpath(allowed)
    target = resolve(allowed, cwd) if not os.path.isabs(allowed) else allowed
    return target is not None and os.path.realpath(given) == os.path.realpath(target)


def _allowed(argv: Sequence[str], allow: Iterable[str], cwd: Path | None) -> list[str] | None:
    """The longest allow entry `argv` starts with, as words; None when no entry fits."""
    best: list[str] | None = None
    for entry in allow:
        if entry.startswith(SHELL_PREFIX):
            continue
        try:
            prefix = shlex.split(entry)
        except ValueError:
            continue
        if not prefix or len(argv) < len(prefix):
            continue
        if not _same_program(argv[0], prefix[0], cwd):
            continue
        if all(a == p for a, p in zip(argv[1:], prefix[1:], strict=False)) and (
            best is None or len(prefix) > len(best)
        ):
            best = prefix
    return best


def _shell_allowed(text: str, allow: Iterable[str]) -> bool:
    return any(
        entry.startswith(SHELL_PREFIX) and entry[len(SHELL_PREFIX) :].strip() == text for entry in allow
    )


def _exactly_allowed(argv: Sequence[str], allow: Iterable[str], cwd: Path | None) -> bool:
    """Did a person allow this whole command, word for word (not an entry it starts with)?"""
    for entry in allow:
        if entry.startswith(SHELL_PREFIX):
            continue
        try:
            words = shlex.split(entry)
        except ValueError:
            continue
        if len(words) == len(argv) and words[1:] == list(argv[1:]) and _same_program(argv[0], words[0], cwd):
            return True
    return False


def _person_can_allow(text: str, hint: str = "loopdeck run --verify-allow") -> str:
    """The one thing a person can do about a refusal, said so that an agent reading it as a
    failure prompt is not told to do it."""
    entry = shlex.quote(text)
    return f"a person can allow this exact command with `{hint} {entry}` in a terminal"


@dataclass(frozen=True)
class Check:
    command: str
    argv: tuple[str, ...] | None
    """None: the person allowed this exact command to run as `sh -c` (`sh: <command>`)."""


def check(
    command: str,
    extra_allow: Iterable[str] = (),
    *,
    cwd: Path | None = None,
    base: Iterable[str] | None = None,
    hint: str = "loopdeck run --verify-allow",
) -> Check:
    """Refuse a verification command that is dangerous, needs a shell nobody allowed, is not
    allowlisted, or uses an option that runs code or leaves the workspace (unless `extra_allow`
    names this exact command), with the reason. `cwd` (the workspace; the current directory
    when None) resolves `./script` and bounds paths. `base`: the allowlist before
    `extra_allow` (default `DEFAULT_ALLOW`; a Temporal worker's: `on_worker`), `hint` the
    command a person allows more with."""
    extra = [str(a) for a in extra_allow]
    first = DEFAULT_ALLOW if base is None else tuple(str(a) for a in base)
    allow = (*first, *extra)
    text = command.strip()
    if not text:
        raise CommandRefused("verification command is empty")
    reason = _danger(["sh"], text)  # the whole-text dangers (curl | sh, fork bombs) first
    if reason:
        raise CommandRefused(f"verification command {command!r} refused: it {reason}")
    syntax = shell_syntax(text)
    if syntax is not None:
        if _shell_allowed(text, extra):
            return Check(text, None)
        entry = shlex.quote(f"{SHELL_PREFIX} {text}")
        raise CommandRefused(
            f"verification command {command!r} refused: it contains {syntax}, which needs a shell; "
            "loopdeck runs commands without one. A person can let this exact command run through "
            f"/bin/sh with `{hint} {entry}` in a terminal"
        )
    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise CommandRefused(f"verification command {command!r} cannot be parsed: {exc}") from None
    reason = _danger(argv, text)
    if reason:
        raise CommandRefused(f"verification command {command!r} refused: it {reason}")
    matched = _allowed(argv, allow, cwd)
    if matched is None:
        known = (
            "test, build and lint commands such as pytest, npm test, cargo test, make, ruff, mypy"
            if base is None
            else "this worker runs only " + ", ".join(dict.fromkeys(first))
        )
        raise CommandRefused(
            f"verification command {command!r} refused: {' '.join(argv[:2])!r} is not in the "
            f"allowlist ({known}; a program is matched by where it is, not by its name); "
            + _person_can_allow(text, hint)
        )
    if not _exactly_allowed(argv, extra, cwd):
        risky = verify_options.refusal(argv, matched, str(cwd) if cwd is not None else None)
        if risky:
            raise CommandRefused(
                f"verification command {command!r} refused: it {risky}. The allowlist keeps the "
                "commands a person types inside the workspace; " + _person_can_allow(text, hint)
            )
    return Check(text, tuple(argv))


# --- running -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    command: str
    exit_code: int
    duration_s: float
    tail: str
    """The last lines of stdout and stderr together, redacted."""
    timed_out: bool = False
    interrupted: bool = False
    """The runner was told to stop (SIGINT/SIGTERM) and ended the command early."""
    tests: TestCounts | None = None
    """What its test runner said (`loop.verify.results`); None when its output could not be
    read as a test run: it then counts by its exit status."""
    kind: str = "check"
    """"tests" (a test reader read it, or its program runs tests), "build" (a build or lint
    tool: only these say whether the build succeeds) or "check" (anything else: `test -f x`,
    a design's criterion, a script)."""
    errors: int | None = None
    """A build or lint command's errors, when it said how many."""
    warnings: int | None = None

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.interrupted


def run(
    item: Check,
    cwd: Path,
    timeout: float = 600.0,
    last_lines: int = 50,
    *,
    interrupted: Callable[[], bool] | None = None,
    poll: float = 0.2,
    preexec: Callable[[], None] | None = None,
    register: Callable[[int], None] | None = None,
    env: Mapping[str, str] | None = None,
    sandbox: tuple[Spec, Status] | None = None,
) -> Outcome:
    """Run one checked command in its own process group, which dies with the runner (as the
    agent does) and is killed whole on a timeout or when `interrupted()` turns true. `env`:
    its environment (default this process's; the runner marks it, see `loop.processes.sweep`).
    `sandbox`: it runs in the agent's sandbox, since it runs code the agent may have written
    (a `conftest.py`, a Makefile) and must not reach what the agent cannot."""
    if item.argv is not None and resolve(item.argv[0], cwd) is None:
        said = f"cannot start: {item.argv[0]!r} not found on PATH"
        return Outcome(item.command, 127, 0.0, said, kind=_kind(item))
    report = _report_folder(item)
    try:
        outcome = _run(
            item, cwd, timeout, last_lines, report, interrupted, poll, preexec, register, env, sandbox
        )
    finally:
        if report is not None:
            shutil.rmtree(report, ignore_errors=True)
    if report is not None and outcome.exit_code == 4 and "unrecognized arguments: --junitxml" in outcome.tail:
        # the workspace's configuration turned pytest's report plugin off: run it as the person wrote it
        return _run(item, cwd, timeout, last_lines, None, interrupted, poll, preexec, register, env, sandbox)
    return outcome


def _kind(item: Check) -> str:
    """The command's kind from its program alone (`results.kind_of`: "tests", "build" or
    "check"), for an outcome with no output to read."""
    return results.kind_of(item.command, item.argv)


def _report_folder(item: Check) -> Path | None:
    """A private folder, outside the workspace, for the report loopdeck asks a test runner
    for (pytest's JUnit XML); None when the command is not one that writes such a report."""
    if item.argv is None or results.junit_argv(item.argv, "x") is None:
        return None
    try:
        return Path(tempfile.mkdtemp(prefix="loopdeck-verify-"))
    except OSError:
        return None


def _run(
    item: Check,
    cwd: Path,
    timeout: float,
    last_lines: int,
    report: Path | None,
    interrupted: Callable[[], bool] | None,
    poll: float,
    preexec: Callable[[], None] | None,
    register: Callable[[int], None] | None,
    env: Mapping[str, str] | None,
    sandbox: tuple[Spec, Status] | None,
) -> Outcome:
    start = time.monotonic()
    junit = report / "junit.xml" if report is not None else None
    if item.argv is None:
        argv: list[str] = ["/bin/sh", "-c", item.command]
        executable: str | None = "/bin/sh"
    else:
        argv = list(item.argv)
        executable = resolve(argv[0], cwd)
        if junit is not None:  # added here, after `check`: the person's command is what is checked
            argv = results.junit_argv(argv, str(junit)) or argv
    if sandbox is not None and sandbox[1].on:
        spec = sandbox[0] if report is None else replace(sandbox[0], scratch=(*sandbox[0].scratch, report))
        argv, boxed_env = wrap([executable or argv[0], *argv[1:]], spec, env or os.environ, sandbox[1])
        env, executable = boxed_env, None
    try:
        proc = subprocess.Popen(
            argv,
            executable=executable,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=None if env is None else dict(env),
            preexec_fn=child_preexec(preexec, register),  # the runner's supervisor registers it
        )
        if register is not None:
            register(proc.pid)
    except OSError as exc:
        return Outcome(
            item.command, 127, time.monotonic() - start, f"cannot start: {exc.strerror}", kind=_kind(item)
        )
    lines: deque[bytes] = deque(maxlen=max(1, last_lines))
    whole = bytearray()  # the last MAX_OUTPUT bytes, for the test readers
    ours = str(report).encode() if report is not None else None

    def keep(line: bytes) -> None:
        if ours is None or ours not in line or b"generated xml file" not in line:  # a varying path
            lines.append(line[-64 * 1024 :])

    def pump() -> None:
        assert proc.stdout is not None
        pending = b""
        while chunk := os.read(proc.stdout.fileno(), 65536):
            whole.extend(chunk)
            if len(whole) > 2 * results.MAX_OUTPUT:
                del whole[: -results.MAX_OUTPUT]
            pending += chunk
            *done, pending = pending.split(b"\n")
            for line in done:
                keep(line)
            pending = pending[-64 * 1024 :]
        if pending:
            keep(pending)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    timed_out = stopped = False
    while proc.poll() is None:
        if time.monotonic() - start > timeout:
            timed_out = True
            break
        if interrupted is not None and interrupted():
            stopped = True
            break
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(poll)
    kill_group(proc.pid)  # whatever it left running in its group goes with it
    proc.wait()
    reader.join(timeout=5)
    with contextlib.suppress(OSError):
        if proc.stdout is not None:
            proc.stdout.close()
    tail = redact(b"\n".join(lines).decode("utf-8", "replace"))
    if timed_out:
        tail += f"\n(timed out after {timeout:g} s)"
    if stopped:
        tail += "\n(interrupted: the runner was told to stop)"
    duration = round(time.monotonic() - start, 3)
    text = whole[-results.MAX_OUTPUT :].decode("utf-8", "replace")
    if ours is not None and "generated xml file" in text:
        text = "\n".join(ln for ln in text.split("\n") if str(report) not in ln or "generated xml" not in ln)
    found = results.examine(
        item.command,
        item.argv,
        text,
        junit=results.read_report(junit) if junit is not None else None,
        root=cwd,
    )
    return Outcome(
        item.command,
        proc.returncode,
        duration,
        tail,
        timed_out,
        stopped,
        tests=found.tests,
        kind=found.kind,
        errors=found.errors,
        warnings=found.warnings,
    )
