"""Which commands run tests (pytest, `go test`, `npm test`, `node --test`, `make test`…), by
their words alone: a test command whose output no reader reads still counts as tests."""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence

_RUNNERS = {
    "pytest", "py.test", "tox", "nox", "jest", "vitest", "mocha", "ava", "rspec", "phpunit",
    "ctest", "unittest", "nose2", "trial", "karma", "playwright",
}  # fmt: skip
_SUBCOMMAND_RUNNERS = {
    "go": {"test"},
    "cargo": {"test", "nextest"},
    "npm": {"test", "t", "tst"},
    "pnpm": {"test", "t"},
    "yarn": {"test"},
    "bun": {"test"},
    "deno": {"test"},
    "gradle": {"test", "check"},
    "mvn": {"test", "verify"},
    "dotnet": {"test"},
    "make": {"test", "check"},
    "just": {"test"},
    "swift": {"test"},
    "mix": {"test"},
}


def is_test_runner(argv: Sequence[str]) -> bool:
    """Does `argv` run tests (pytest, `go test`, `npm test`, `node --test`, `make test`…)?"""
    from loop.verify.options import program

    if not argv:
        return False
    name, args = program(argv)
    name = os.path.basename(name)
    if name in _RUNNERS or name.startswith("pytest"):
        return True
    if name.startswith("node") and "--test" in args:
        return True
    words = [a for a in args if not a.startswith("-")]
    if name in ("npm", "pnpm", "yarn") and words[:1] == ["run"]:
        words = words[1:]
    subcommands = _SUBCOMMAND_RUNNERS.get(name, set())
    return bool(words) and (words[0] in subcommands or words[0].startswith("test"))


def words_of(command: str, argv: Sequence[str] | None) -> list[str]:
    """A command's words: its argv, or a shell command's first words (best effort)."""
    if argv is not None:
        return list(argv)
    try:
        return shlex.split(command.split("&&")[0].split("|")[0].split(";")[0])
    except ValueError:
        return command.split()
