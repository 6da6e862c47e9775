#!/usr/bin/env python3
"""Install the pinned Claude Code CLI for the end-to-end suite, once, outside the clone.

The suite drives the real `claude` binary, so the version is pinned (the CLI changes every few
days and the suite must not change under us) and the install lives in the user's cache
(`${XDG_CACHE_HOME:-~/.cache}/loopdeck/claude-code-<version>`), reused by every clone and every
run. The npm package ships the native binary as an optional dependency; its postinstall copies
it over `bin/claude.exe`, and when npm did not run that script we fall back to the platform
package's own binary. Prints the binary's path; exit 1 with one line when it cannot.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

VERSION = "2.1.332"
"""`npm view @anthropic-ai/claude-code version` on 2026-11-26; bump it deliberately."""
PACKAGE = "@anthropic-ai/claude-code"
OFFLINE_ENV = {
    "DISABLE_AUTOUPDATER": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
}


def cache_dir(version: str = VERSION) -> Path:
    """Where this version lives: outside the clone, shared by every checkout."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "loopdeck" / f"claude-code-{version}"


def _candidates(root: Path) -> list[Path]:
    modules = root / "node_modules" / "@anthropic-ai"
    found = [modules / "claude-code" / "bin" / "claude.exe"]
    found += sorted(modules.glob("claude-code-*/claude"))
    return found


def _works(binary: Path, version: str) -> bool:
    """The binary runs here and is the version we pinned (the placeholder stub is not)."""
    if not binary.is_file() or not os.access(binary, os.X_OK):
        return False
    try:
        out = subprocess.run(
            [str(binary), "--version"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, **OFFLINE_ENV},
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and out.stdout.startswith(version)


def find(version: str = VERSION) -> Path | None:
    """The installed binary of `version`, or None (nothing is downloaded)."""
    marker = cache_dir(version) / "claude-path"
    with contextlib.suppress(OSError):
        recorded = Path(marker.read_text(encoding="utf-8").strip())
        if recorded.is_file() and os.access(recorded, os.X_OK):
            return recorded
    return None


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    """One installer at a time (two test workers, two clones)."""
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f".{root.name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def install(version: str = VERSION) -> Path:
    """Install `version` unless it is there already; the path of a binary that runs."""
    root = cache_dir(version)
    with _locked(root):
        present = find(version)
        if present is not None:
            return present
        npm = shutil.which("npm")
        if npm is None:
            raise RuntimeError("npm not found on PATH: cannot install Claude Code")
        root.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                npm,
                "install",
                "--no-save",
                "--no-audit",
                "--no-fund",
                "--prefix",
                str(root),
                f"{PACKAGE}@{version}",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        for binary in _candidates(root):
            if _works(binary, version):
                (root / "claude-path").write_text(f"{binary}\n", encoding="utf-8")
                return binary
        raise RuntimeError(f"{PACKAGE}@{version} installed in {root} but no binary of it runs here")


def main() -> int:
    try:
        print(install())
    except (RuntimeError, subprocess.CalledProcessError, OSError) as exc:
        print(f"install_cli: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
