"""Which commands run tests (pytest, `go test`, `npm test`, `node --test`, `make test`…) and
which build or lint (tsc, `cargo build`, make, mypy, ruff…), by their words alone: a test
command whose output no reader reads still counts as tests, and only a build or lint command
says whether the build succeeds (anything else, `test -f x` or a script, is a check)."""

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


_BUILDERS = {
    "tsc", "make", "gmake", "cmake", "ninja", "meson", "bazel", "bazelisk", "just", "gradle",
    "gradlew", "mvn", "mvnw", "ant", "msbuild", "javac", "rustc", "gcc", "g++", "cc", "c++",
    "clang", "clang++", "mypy", "pyright", "ruff", "eslint", "flake8", "pylint", "black",
    "isort", "prettier", "clippy-driver", "golangci-lint", "gofmt", "shellcheck", "stylelint",
}  # fmt: skip
_SUBCOMMAND_BUILDERS = {
    "cargo": {"build", "check", "clippy", "fmt", "doc", "b", "c"},
    "go": {"build", "vet", "fmt", "install"},
    "dotnet": {"build", "format", "publish"},
    "swift": {"build"},
    "zig": {"build"},
}
_SCRIPT_BUILDERS = ("build", "lint", "typecheck", "type-check", "types", "compile", "tsc", "format", "fmt")
"""A package script whose name starts with one of these builds or lints (`npm run build:prod`)."""


def is_build_tool(argv: Sequence[str]) -> bool:
    """Does `argv` build or lint (tsc, `cargo build`, make, `go vet`, `npm run build`, mypy,
    ruff, eslint…)? A test runner is not one (`is_test_runner` is asked first)."""
    from loop.verify.options import program

    if not argv:
        return False
    name, args = program(argv)
    name = os.path.basename(name)
    if name in _BUILDERS:
        return True
    words = [a for a in args if not a.startswith("-")]
    if name in ("npm", "pnpm", "yarn", "bun"):
        script = words[1:2] if words[:1] == ["run"] else words[:1]
        return bool(script) and script[0].startswith(_SCRIPT_BUILDERS)
    return bool(words) and words[0] in _SUBCOMMAND_BUILDERS.get(name, set())
