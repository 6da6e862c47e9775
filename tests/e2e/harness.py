"""The end-to-end suite's workbench: a project in tmp_path, the real `claude` pointed at the mock.

Everything a test runs is bounded: every process has a timeout, waits are on processes, never
on a clock. The environment is built from scratch (HOME in tmp_path, no ambient CLAUDE_* or
ANTHROPIC_* variable leaks in), so the suite never reads or writes the user's own Claude Code
configuration and never talks to anything but the mock.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loop.core.prompts import OPENINGS
from tests.e2e import install_cli
from tests.e2e.mockapi import MockAPI

CLAUDE_TIMEOUT = 90.0
HOOK_PROMPTS = tuple(re.escape(opening) for opening in OPENINGS)
"""The openings of the prompts loopdeck's Stop hook sends (loop/prompts.py)."""
BIN = Path(sys.executable).parent
"""The virtual environment's bin: `loopdeck`, `python` (with pytest) for the project's hooks."""


def claude_binary() -> tuple[Path | None, str]:
    """The pinned CLI, or None and the one-line reason the suite is skipped."""
    override = os.environ.get("LOOPDECK_E2E_CLAUDE")
    if override:
        return Path(override), ""
    found = install_cli.find()
    if found is not None:
        return found, ""
    if shutil.which("npm") is None or shutil.which("node") is None:
        return (
            None,
            "end-to-end suite skipped: node/npm not found, so the real Claude Code CLI cannot be installed",
        )
    return None, (
        f"end-to-end suite skipped: Claude Code {install_cli.VERSION} is not installed; "
        "run `python tests/e2e/install_cli.py` (as .ci/run does)"
    )


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str
    data: dict[str, Any] = field(default_factory=dict)


class Project:
    """A git repository in tmp_path, its HOME, and the CLI wired to a mock API."""

    def __init__(self, tmp_path: Path, claude: Path, api: MockAPI) -> None:
        self.root = tmp_path / "project"
        self.root.mkdir()
        self.home = tmp_path / "home"
        self.home.mkdir()
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        (self.bin / "claude").symlink_to(claude)
        self.api = api
        self.env = {
            "PATH": os.pathsep.join([str(self.bin), str(BIN), "/usr/local/bin", "/usr/bin", "/bin"]),
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "TMPDIR": str(tmp_path),
            "ANTHROPIC_BASE_URL": api.url,
            "ANTHROPIC_API_KEY": "test",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            # this test's own record of what a person confirmed (never the home folder's)
            "LOOPDECK_TRUST_HOME": os.environ["LOOPDECK_TRUST_HOME"],
        }
        if os.geteuid() == 0:
            self.env["IS_SANDBOX"] = "1"  # --dangerously-skip-permissions is refused as root otherwise
        self.git("init", "-q")
        self.git("config", "user.email", "e2e@example.com")
        self.git("config", "user.name", "e2e")

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
        self, *args: str, timeout: float = 120, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """`loopdeck ARGS` as a user would run it: the installed script, in the project."""
        done = subprocess.run(
            [str(BIN / "loopdeck"), *args],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"loopdeck {args} exit {done.returncode}\n{done.stdout}\n{done.stderr}")
        return done

    def claude(
        self, prompt: str, *args: str, skip_permissions: bool = True, timeout: float = CLAUDE_TIMEOUT
    ) -> Result:
        argv = [str(self.bin / "claude"), "-p", prompt, "--output-format", "json", *args]
        if skip_permissions:
            argv.append("--dangerously-skip-permissions")
        done = subprocess.run(
            argv, cwd=self.root, env=self.env, capture_output=True, text=True, timeout=timeout
        )
        data: dict[str, Any] = {}
        try:
            parsed = json.loads(done.stdout)
            if isinstance(parsed, dict):
                data = parsed
        except ValueError:
            pass
        return Result(done.returncode, done.stdout, done.stderr, data)

    # --- what loopdeck left behind ------------------------------------------------------------

    def events(self) -> list[dict[str, Any]]:
        path = self.root / ".claude" / "orchestrator-loop.events.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]

    def kinds(self) -> list[str]:
        return [str(e.get("kind")) for e in self.events()]

    def state_text(self) -> str | None:
        path = self.root / ".claude" / "orchestrator-loop.local.md"
        return path.read_text(encoding="utf-8") if path.exists() else None

    def archives(self) -> list[Path]:
        folder = self.root / ".claude" / "loops"
        return sorted(p for p in folder.iterdir() if p.is_dir()) if folder.exists() else []

    def status(self) -> dict[str, Any]:
        """`loopdeck status --json`'s loop object; {} when there is no loop."""
        out = self.loopdeck("status", "--json")
        data = json.loads(out.stdout)
        loop = data.get("loop") if isinstance(data, dict) else None
        return loop if isinstance(loop, dict) else {}

    def feedback(self) -> list[str]:
        """The Stop hook's block reasons as the model received them, in order: the main requests
        whose last user message holds one of loopdeck's prompts (found by loopdeck's own opening
        lines, not by how Claude Code wraps them). A request before the model's first answer holds
        the prompt the conversation started with (the runner's prompts open the same way): it
        never counts."""
        texts = [
            r.last_user_text()
            for r in self.api.main_requests()
            if any(m.get("role") == "assistant" for m in r.messages)
        ]
        return [t for t in texts if any(re.search(rf"(?m)^{h}", t) for h in HOOK_PROMPTS)]
