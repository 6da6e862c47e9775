"""The workbench of the agent CLIs' end-to-end suites: a project, the real CLIs pointed at the mock.

Each test gets its own git project, HOME, TMPDIR and XDG folders in tmp_path, and every CLI is
configured there to talk to `mockclis.MockCLIs` on 127.0.0.1 and to nothing else:

* Codex CLI: `$CODEX_HOME/config.toml` with a custom provider (`base_url` the mock; a custom
  provider speaks plain HTTP, the built-in one tries a websocket first), `[analytics]` and
  `[features] plugins` off (else it looks up ab.chatgpt.com and github.com), no retries.
* Gemini CLI: `~/.gemini/settings.json` with the API-key auth type, usage statistics off (else
  play.googleapis.com) and a fixed model (no router request); `GOOGLE_GEMINI_BASE_URL`.
* OpenCode: `$XDG_CONFIG_HOME/opencode/opencode.json` with an `@ai-sdk/openai-compatible`
  provider at the mock, priced 3/15 USD per million tokens; `OPENCODE_DISABLE_MODELS_FETCH` and
  `OPENCODE_DISABLE_AUTOUPDATE`; its plugin package pre-seeded (hard links to the installer's
  copy) so its background `npm install` finds it and looks nothing up.

No variable of the person running the suite leaks in: the environment is built from scratch.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.e2e import install_clis
from tests.e2e.mockclis import MockCLIs

BIN = Path(sys.executable).parent
CODEX_MODEL = "gpt-5"
GEMINI_MODEL = "gemini-2.5-pro"
OPENCODE_PRICE = {"input": 3, "output": 15}
"""USD per million tokens, as OpenCode's config names it; OpenCode reports the cost itself."""


def cli_binary(name: str) -> tuple[Path | None, str]:
    """The pinned CLI, or None and the one-line reason its tests are skipped."""
    cli = install_clis.CLIS[name]
    override = os.environ.get(f"LOOPDECK_E2E_{name.upper()}")
    if override:
        return Path(override), ""
    found = install_clis.find(name)
    if found is not None:
        return found, ""
    if shutil.which("npm") is None or shutil.which("node") is None:
        return (
            None,
            f"{cli.label} end-to-end tests skipped: node/npm not found, so the CLI cannot be installed",
        )
    return None, (
        f"{cli.label} end-to-end tests skipped: {cli.label} {cli.version} is not installed; "
        "run `python tests/e2e/install_clis.py` (as .ci/run does)"
    )


def _hardlink_tree(source: Path, target: Path) -> None:
    """A copy of `source` whose files are hard links (instant, no space), copies where links fail."""

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, target, symlinks=True, copy_function=link, dirs_exist_ok=True)


class CLIProject:
    """A git repository in tmp_path with the CLIs installed on its PATH and wired to the mock."""

    def __init__(self, tmp_path: Path, api: MockCLIs, clis: dict[str, Path]) -> None:
        self.tmp = tmp_path
        self.root = tmp_path / "project"
        self.root.mkdir()
        self.home = tmp_path / "home"
        self.bin = tmp_path / "bin"
        self.xdg = {name: tmp_path / "xdg" / name for name in ("config", "data", "cache", "state")}
        for folder in (self.home, self.bin, *self.xdg.values()):
            folder.mkdir(parents=True)
        self.api = api
        for name, binary in clis.items():
            (self.bin / name).symlink_to(binary)
        self.env = {
            "PATH": os.pathsep.join([str(self.bin), str(BIN), "/usr/local/bin", "/usr/bin", "/bin"]),
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "TMPDIR": str(tmp_path),
            "XDG_CONFIG_HOME": str(self.xdg["config"]),
            "XDG_DATA_HOME": str(self.xdg["data"]),
            "XDG_CACHE_HOME": str(self.xdg["cache"]),
            "XDG_STATE_HOME": str(self.xdg["state"]),
            "PYTHONDONTWRITEBYTECODE": "1",
            "LOOPDECK_TRUST_HOME": os.environ["LOOPDECK_TRUST_HOME"],
            # Codex
            "CODEX_HOME": str(self.home / ".codex"),
            "MOCK_API_KEY": "test",
            # Gemini
            "GEMINI_API_KEY": "test",
            "GOOGLE_GEMINI_BASE_URL": api.url,
            # OpenCode
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
        }
        self.configure_codex()
        self.configure_gemini()
        self.configure_opencode()
        self.git("init", "-q")
        self.git("config", "user.email", "e2e@example.com")
        self.git("config", "user.name", "e2e")

    # --- each CLI's offline configuration -------------------------------------------------------

    def configure_codex(self) -> None:
        folder = self.home / ".codex"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.toml").write_text(
            f'model = "{CODEX_MODEL}"\n'
            'model_provider = "mock"\n'
            "[model_providers.mock]\n"
            'name = "Mock"\n'
            f'base_url = "{self.api.url}/v1"\n'
            'env_key = "MOCK_API_KEY"\n'
            'wire_api = "responses"\n'
            "request_max_retries = 0\n"
            "stream_max_retries = 0\n"
            "[analytics]\n"
            "enabled = false\n"
            "[features]\n"
            "plugins = false\n",
            encoding="utf-8",
        )

    def configure_gemini(self) -> None:
        folder = self.home / ".gemini"
        folder.mkdir(parents=True, exist_ok=True)
        settings = {
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": False},
            "model": {"name": GEMINI_MODEL},
        }
        (folder / "settings.json").write_text(json.dumps(settings), encoding="utf-8")

    def configure_opencode(self, permission: dict[str, str] | None = None) -> None:
        folder = self.xdg["config"] / "opencode"
        seed = install_clis.seed_dir(install_clis.CLIS["opencode"])
        if seed is not None and seed.is_dir() and not (folder / "node_modules").exists():
            _hardlink_tree(seed, folder)
        folder.mkdir(parents=True, exist_ok=True)
        config: dict[str, Any] = {
            "provider": {
                "mock": {
                    "npm": "@ai-sdk/openai-compatible",
                    "options": {"baseURL": f"{self.api.url}/v1", "apiKey": "sk-test"},
                    "models": {"mock-model": {"cost": OPENCODE_PRICE}},
                }
            },
            "model": "mock/mock-model",
            "autoupdate": False,
            "share": "disabled",
        }
        if permission:
            config["permission"] = permission
        (folder / "opencode.json").write_text(json.dumps(config), encoding="utf-8")

    # --- the project ------------------------------------------------------------------------------

    def git(self, *args: str) -> None:
        subprocess.run(["git", *args], cwd=self.root, check=True, capture_output=True, timeout=30)

    def write(self, name: str, text: str) -> Path:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def commit(self) -> None:
        self.git("add", "-A")
        self.git("commit", "-qm", "setup", "--allow-empty")

    def loopdeck(
        self, *args: str, timeout: float = 240, check: bool = False
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(BIN / "loopdeck"), *args],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"loopdeck {args} exit {done.returncode}\n{done.stdout}\n{done.stderr}")
        return done

    def events(self) -> list[dict[str, Any]]:
        path = self.root / ".claude" / "orchestrator-loop.events.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events() if e.get("kind") == kind]

    def kinds(self) -> list[str]:
        return [str(e.get("kind")) for e in self.events()]

    def archives(self) -> list[Path]:
        folder = self.root / ".claude" / "loops"
        return sorted(p for p in folder.iterdir() if p.is_dir()) if folder.exists() else []

    def logs(self) -> str:
        """Every iteration log, for a failing test's message."""
        from tests.conftest import iteration_logs

        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in iteration_logs(self.root)
        )
