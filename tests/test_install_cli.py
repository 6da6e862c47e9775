"""The e2e suite's CLI installer: where it caches, and that it finds only what it installed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e import install_cli


def test_cache_outside_the_clone(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert install_cli.cache_dir("9.9.9") == tmp_path / "cache" / "loopdeck" / "claude-code-9.9.9"
    assert install_cli.find("9.9.9") is None  # nothing is downloaded by looking
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert install_cli.cache_dir("1.0.0") == tmp_path / "home" / ".cache" / "loopdeck" / "claude-code-1.0.0"


def test_find_uses_the_recorded_binary(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    root = install_cli.cache_dir("1.2.3")
    root.mkdir(parents=True)
    binary = tmp_path / "claude"
    binary.write_text("#!/bin/sh\necho '1.2.3 (Claude Code)'\n")
    (root / "claude-path").write_text(f"{binary}\n")
    assert install_cli.find("1.2.3") is None  # not executable
    binary.chmod(0o755)
    assert install_cli.find("1.2.3") == binary
    assert install_cli._works(binary, "1.2.3") and not install_cli._works(binary, "2.0.0")
