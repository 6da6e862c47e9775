#!/usr/bin/env python3
"""Install every pinned agent CLI the end-to-end suites drive, in parallel, once, outside the clone.

Claude Code (through `install_cli`), Codex CLI, Gemini CLI and OpenCode, each pinned (these
CLIs change every week; a suite must not change under us) and installed with npm into the
user's cache, `${XDG_CACHE_HOME:-~/.cache}/loopdeck/<cli>-<version>`, reused by every clone and
run. OpenCode installs `@opencode-ai/plugin` into each config folder at start (one lookup on
the npm registry); a copy of that package, of the same version, is installed here once as
`plugin-seed/` for the suite to put into each test's config folder, so the CLI finds it and
looks nothing up. Prints one line per CLI: its binary, or why it could not be installed; exits
1 when any could not.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a script: `python tests/e2e/install_clis.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.e2e import install_cli


@dataclass(frozen=True)
class CLI:
    name: str
    """The program, and the folder's prefix in the cache."""
    label: str
    package: str
    version: str
    seed: tuple[str, ...] = ()
    """Packages installed beside it into `plugin-seed/` (OpenCode's plugin)."""


CLIS = {
    "codex": CLI("codex", "Codex CLI", "@openai/codex", "0.171.0"),
    "gemini": CLI("gemini", "Gemini CLI", "@google/gemini-cli", "0.61.0"),
    "opencode": CLI("opencode", "OpenCode", "opencode-ai", "1.18.33", seed=("@opencode-ai/plugin@1.18.33",)),
}
"""`npm view PACKAGE version` on 2026-11-26; bump them deliberately (and re-check the mock)."""


def cache_dir(cli: CLI) -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "loopdeck" / f"{cli.name}-{cli.version}"


def seed_dir(cli: CLI) -> Path | None:
    """The pre-installed packages to copy into a config folder, when the CLI needs them."""
    return cache_dir(cli) / "plugin-seed" if cli.seed else None


def _works(binary: Path, version: str) -> bool:
    """The binary runs here, offline, in a scratch home, and is the version we pinned."""
    if not binary.is_file() or not os.access(binary, os.X_OK):
        return False
    with tempfile.TemporaryDirectory(prefix="loopdeck-cli-check-") as home:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": home,
            "TMPDIR": home,
            "XDG_CONFIG_HOME": home,
            "XDG_DATA_HOME": home,
            "XDG_CACHE_HOME": home,
            "XDG_STATE_HOME": home,
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
        }
        try:
            out = subprocess.run(
                [str(binary), "--version"],
                capture_output=True,
                text=True,
                timeout=120,
                env=env,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return False
    return out.returncode == 0 and version in out.stdout


def find(name: str) -> Path | None:
    """The installed binary of the pinned version, or None (nothing is downloaded)."""
    cli = CLIS[name]
    marker = cache_dir(cli) / f"{cli.name}-path"
    with contextlib.suppress(OSError):
        recorded = Path(marker.read_text(encoding="utf-8").strip())
        seed = seed_dir(cli)
        if (
            recorded.is_file()
            and os.access(recorded, os.X_OK)
            and (seed is None or (seed / "package-lock.json").is_file())
        ):
            return recorded
    return None


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f".{root.name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _npm(prefix: Path, *packages: str) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm not found on PATH")
    prefix.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix), *packages],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=900,
    )


def install(name: str) -> Path:
    """Install the pinned CLI unless it is there; the path of a binary that runs."""
    cli = CLIS[name]
    root = cache_dir(cli)
    with _locked(root):
        present = find(name)
        if present is not None:
            return present
        binary = root / "node_modules" / ".bin" / cli.name
        if not _works(binary, cli.version):
            _npm(root, f"{cli.package}@{cli.version}")
        seed = seed_dir(cli)
        if seed is not None and not (seed / "package-lock.json").is_file():
            _npm(seed, *cli.seed)  # node_modules, package.json and the lock file, as OpenCode leaves them
        if not _works(binary, cli.version):
            raise RuntimeError(
                f"{cli.package}@{cli.version} installed in {root} but its binary does not run here"
            )
        (root / f"{cli.name}-path").write_text(f"{binary}\n", encoding="utf-8")
        return binary


def _one(name: str) -> tuple[str, Path | None, str]:
    try:
        path = install_cli.install() if name == "claude" else install(name)
    except subprocess.CalledProcessError as exc:
        why = (exc.stderr or b"").decode("utf-8", "replace").strip().splitlines()[-1:] or [str(exc)]
        return name, None, why[0]
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        return name, None, str(exc)
    return name, path, ""


def main(argv: list[str] | None = None) -> int:
    names = (argv if argv else None) or ["claude", *CLIS]
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        results = list(pool.map(_one, names))
    failed = 0
    for name, path, why in results:
        label = "Claude Code" if name == "claude" else CLIS[name].label
        if path is None:
            failed += 1
            print(
                f"install_clis: {label} could not be installed ({why}); its end-to-end tests will be skipped",
                file=sys.stderr,
            )
        else:
            print(f"{name}: {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
