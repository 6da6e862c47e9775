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


def test_every_cli_is_cached_outside_the_clone_and_found_only_when_installed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from tests.e2e import install_clis

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    codex = install_clis.CLIS["codex"]
    assert install_clis.cache_dir(codex) == tmp_path / "cache" / "loopdeck" / f"codex-{codex.version}"
    assert all(install_clis.find(name) is None for name in install_clis.CLIS)  # nothing downloaded
    opencode = install_clis.CLIS["opencode"]
    seed = install_clis.seed_dir(opencode)
    assert seed is not None and opencode.seed == (f"@opencode-ai/plugin@{opencode.version}",)
    root = install_clis.cache_dir(opencode)
    root.mkdir(parents=True)
    binary = tmp_path / "opencode"
    binary.write_text("#!/bin/sh\necho 1.18.33\n")
    binary.chmod(0o755)
    (root / "opencode-path").write_text(f"{binary}\n")
    assert install_clis.find("opencode") is None  # the plugin seed is part of the install
    seed.mkdir()
    (seed / "package-lock.json").write_text("{}")
    assert install_clis.find("opencode") == binary
    assert install_clis._works(binary, "1.18.33") and not install_clis._works(binary, "9.9.9")


def test_one_line_per_cli_that_could_not_be_installed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.e2e import install_clis

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))  # no npm
    assert install_clis.main(["codex", "gemini"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all("could not be installed" in line and "skipped" in line for line in err)
