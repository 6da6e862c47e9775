"""`loop` never imports Textual (the backend works without the monitor), and nothing of git's libraries is on the hook's path."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import loop
from tests.conftest import REPO


def _modules() -> list[str]:
    return sorted(
        m.name
        for m in pkgutil.walk_packages(loop.__path__, prefix="loop.")
        if not m.name.startswith("loop.demo.agent") and not m.name.endswith(".__main__")
    )


def _loaded_after_import(modules: list[str]) -> set[str]:
    code = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout))


def test_loop_never_imports_textual() -> None:
    modules = _modules()
    assert "loop.store.state" in modules and "loop.cli" in modules
    loaded = _loaded_after_import(modules)
    assert not {m for m in loaded if m == "textual" or m.startswith("textual.")}


def test_cli_startup_imports_neither_textual_nor_git() -> None:
    loaded = _loaded_after_import(["loop.cli"])
    assert "textual" not in loaded and "git" not in loaded
