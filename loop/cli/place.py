"""Where this loopdeck runs from: the launcher the hooks name, and whether the package is a tool
install or a development clone (`--version`, `doctor` and `install` say which)."""

from __future__ import annotations

import sysconfig
from pathlib import Path

LAUNCHER = Path(__file__).resolve().parent.parent / "launcher.py"


def where_installed() -> tuple[str, Path]:
    """How this loopdeck is installed: `tool` (a package in an environment's site folder: a
    `pipx` or `uv tool` install, a wheel) or `clone` (a development checkout, an editable
    install), and the folder that holds the `loop` package."""
    folder = LAUNCHER.parent.parent
    sites = {sysconfig.get_paths()[key] for key in ("purelib", "platlib")}
    for site in sites:
        try:
            folder.relative_to(Path(site).resolve())
        except ValueError:
            continue
        return "tool", folder
    return "clone", folder
