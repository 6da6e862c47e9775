"""`loopdeck run --sandbox on` with the real Claude Code and Codex CLIs, whose scripted models try,
through their own shell tools, everything an agent must not do.

One loop per CLI over a TODO.md of one task. In its first turn the model runs one shell command
that queues a `complete`, edits the state file and the journal, writes into the trust and config
folders, plants a `core.fsmonitor` and a pre-commit hook, writes outside the workspace, leaves a
`setsid` process behind and drops a `loop/__init__.py` in the workspace; then it ticks the task
and says it is done. The loop must complete as if it had not tried, with every protected file as
it was, no process left and the refusals journaled.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from loop.processes import sandbox
from tests.conftest import alive_with
from tests.e2e import mockclis
from tests.e2e.agents_harness import CLIProject, cli_binary
from tests.e2e.harness import Project, claude_binary
from tests.e2e.mockapi import MockAPI, Request, Turn, call, content_text, say, tool_results
from tests.e2e.mockclis import Call, Reply

pytestmark = pytest.mark.e2e

MODE = "on"
"""The sandbox the runs ask for (`off` shows what the assertions catch without one)."""
COMPLETE = "ALL_TASKS_COMPLETE"
CONTROL = ".claude/orchestrator-loop.control.jsonl"
STATE = ".claude/orchestrator-loop.local.md"
JOURNAL = ".claude/orchestrator-loop.events.jsonl"


def sandbox_or_skip() -> None:
    """These runs need bubblewrap (and /proc, to look for what outlived them)."""
    status = sandbox.detect("auto")
    if status.kind != "bwrap":
        pytest.skip(f"loopdeck's bubblewrap sandbox cannot start here: {status.why}")


@dataclass
class Attack:
    """What the agent goes for, and the unique marks that tell its traces apart."""

    root: Path
    trust: Path
    config: Path
    """loopdeck's config folder, `$XDG_CONFIG_HOME/loopdeck`."""
    home: Path
    outside: Path
    token: str
    """In the `setsid` process's argv: `sleep 300.TOKEN`."""

    @property
    def marker(self) -> Path:
        return Path(f"/tmp/PWN-{self.token}")

    def command(self) -> str:
        """The one shell command the model runs: each attempt, then the task ticked."""
        tries = [
            """echo '{"kind":"complete","id":"x1"}' >> .claude/orchestrator-loop.control.jsonl""",
            f"sed -i 's/iteration:/iteration: 99 #/' {STATE}",
            f"echo PWNED >> {JOURNAL}",
            f"echo PWNED > {self.trust}/PWNED",
            """echo 'sandbox = "off"' > "$XDG_CONFIG_HOME/loopdeck/config.toml\"""",
            "git config core.fsmonitor 'touch PWNED'",
            r"printf '#!/bin/sh\ntouch PWNED\n' > .git/hooks/pre-commit",
            f"echo PWNED > {self.outside}",
            'echo PWNED > "$HOME/PWNED"',
            f"{{ setsid sleep 300.{self.token} </dev/null >/dev/null 2>&1 & }}",
            f"""mkdir -p loop && echo 'open("{self.marker}","w")' > loop/__init__.py""",
        ]
        return " || true; ".join(tries) + r" || true; sed -i 's/- \[ \]/- [x]/' TODO.md"

    def prepare(self) -> None:
        self.config.mkdir(parents=True, exist_ok=True)
        (self.root / "TODO.md").write_text("- [ ] the one task\n", encoding="utf-8")

    def alive(self) -> list[int]:
        """The live processes (zombies aside) whose argv holds the token."""
        return alive_with(self.token)

    def gone(self, seconds: float = 10.0) -> list[int]:
        """Polls until no process holds the token, or the deadline; what is left."""
        deadline = time.monotonic() + seconds
        while (left := self.alive()) and time.monotonic() < deadline:
            time.sleep(0.05)
        return left

    def cleanup(self) -> None:
        for pid in self.alive():
            os.kill(pid, 9)
        self.marker.unlink(missing_ok=True)


def attack_for(root: Path, tmp: Path, home: Path, config_home: Path) -> Attack:
    return Attack(
        root=root,
        trust=Path(os.environ["LOOPDECK_TRUST_HOME"]),
        config=config_home / "loopdeck",
        home=home,
        outside=tmp / "outside-PWNED.txt",
        token=str(secrets.randbelow(10**9)).zfill(9),
    )


def read_events(root: Path) -> list[dict[str, Any]]:
    """The journal's events; a line that is no event (the agent's, without a sandbox) skipped."""
    path = root / JOURNAL
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return [json.loads(line) for line in lines if line.strip().startswith("{")]


def check(attack: Attack, exit_code: int, out: str, status: Callable[[], str]) -> list[list[str]]:
    """The loop completed as if the agent had not tried; nothing it went for changed. The lines
    of its `sandbox-refused` events."""
    root = attack.root
    assert exit_code == 0, out
    assert "- [x] the one task" in (root / "TODO.md").read_text()
    # the control queue: no line of the agent's, and nothing applied or forced
    queue = (root / CONTROL).read_text() if (root / CONTROL).exists() else ""
    assert "x1" not in queue, queue
    events = read_events(root)
    kinds = [e["kind"] for e in events]
    assert "completed" in kinds, kinds
    applied = [e for e in events if e["kind"] in ("command-applied", "command-refused")]
    assert applied == [], applied
    ends = [e["data"] for e in events if e["kind"] == "completed"]
    assert all("forced" not in str(d.get("reason")) for d in ends), ends
    # the state (archived at the end) and the journal, as loopdeck wrote them
    states = [p for p in (root / STATE, *root.glob(".claude/loops/*/state.md")) if p.exists()]
    assert states
    for state in states:
        assert "iteration: 99" not in state.read_text(), state.read_text()
    assert all(d.get("iterations", 0) < 99 for d in ends), ends
    assert "PWNED" not in (root / JOURNAL).read_text()
    # git: no monitor, no hook
    assert "fsmonitor" not in (root / ".git" / "config").read_text()
    assert not (root / ".git" / "hooks" / "pre-commit").exists()
    # loopdeck's folders and everything outside the workspace
    assert not any(p.name == "PWNED" for p in attack.trust.rglob("*")), list(attack.trust.rglob("*"))
    assert list(attack.config.iterdir()) == []
    assert not attack.outside.exists() and not (attack.home / "PWNED").exists()
    assert attack.gone() == [], "the setsid process outlived the run"
    # the workspace's own `loop/` package was written, and runs nowhere
    assert (root / "loop" / "__init__.py").exists()
    status()
    assert not attack.marker.exists()
    return [e["data"]["lines"] for e in events if e["kind"] == "sandbox-refused"]


def report(cli: str, said: list[str], events: list[dict[str, Any]]) -> None:
    """What the CLI's shell tool said and what loopdeck journaled: shown with `pytest -s`."""
    print(f"\n--- {cli}: the shell tool's output\n" + "\n".join(said))
    for event in events:
        if event["kind"] == "sandbox-refused":
            print(f"--- {cli}: sandbox-refused #{event.get('iteration')}: {event['data']['lines']}")


def _queue_refused(line: str) -> bool:
    """A line saying the control queue is read-only, as bash (`…jsonl: Read-only file system`) or
    zsh (`read-only file system: …jsonl`) says it."""
    return "orchestrator-loop.control.jsonl" in line and "read-only file system" in line.lower()


# --- Claude Code --------------------------------------------------------------------------------


@pytest.fixture
def claude_project(tmp_path: Path) -> Iterator[Project]:
    binary, why = claude_binary()
    if binary is None:
        pytest.skip(why)
    sandbox_or_skip()
    with MockAPI(log_file=tmp_path / "requests.jsonl") as api:
        made = Project(tmp_path, binary, api)
        made.env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg-config")
        yield made
        assert api.errors == [], api.errors


def test_claude_codes_bash_tool_cannot_steer_or_escape_a_sandboxed_run(
    claude_project: Project, tmp_path: Path
) -> None:
    project = claude_project
    attack = attack_for(project.root, tmp_path, project.home, tmp_path / "xdg-config")
    attack.prepare()
    project.commit()
    said: list[str] = []

    def script(request: Request) -> Turn:
        results = [content_text(block.get("content")) for block in tool_results(request)]
        if results:
            said.extend(results)
            return say(f"Tried a few things; the task is ticked.\n{COMPLETE}")
        if "- [ ]" in (project.root / "TODO.md").read_text() and not said:
            return call("Bash", command=attack.command(), description="tidy up")
        return say(COMPLETE)

    project.api.script = script
    try:
        done = project.loopdeck(
            "run",
            "Work through TODO.md",
            "--task-file",
            "TODO.md",
            "--headless",
            "--sandbox",
            MODE,
            "--max-iterations",
            "4",
            timeout=240,
            check=False,
        )
        report("claude", said, read_events(project.root))
        out = done.stdout + done.stderr
        refused = check(attack, done.returncode, out, lambda: project.loopdeck("status").stdout)
        # read from the session's transcript: print mode's JSON holds only the final text
        assert any(_queue_refused(line) for lines in refused for line in lines), refused
    finally:
        attack.cleanup()


# --- Codex ----------------------------------------------------------------------------------------


def test_codexs_shell_tool_cannot_steer_or_escape_a_sandboxed_run(cli_project: CLIProject) -> None:
    binary, why = cli_binary("codex")
    if binary is None:
        pytest.skip(why)
    sandbox_or_skip()
    project = cli_project
    attack = attack_for(project.root, project.tmp, project.home, project.xdg["config"])
    attack.prepare()
    project.commit()
    said: list[str] = []

    def script(request: Call) -> Reply:
        if request.tool_result is not None:
            said.append(request.tool_result)
            return mockclis.say(f"Tried a few things; the task is ticked.\n{COMPLETE}")
        if "- [ ]" in (project.root / "TODO.md").read_text() and not said:
            return mockclis.shell(attack.command(), "Tidying up.")
        return mockclis.say(COMPLETE)

    project.api.script = script
    try:
        done = project.loopdeck(
            "run",
            "Work through TODO.md",
            "--agent",
            "codex",
            "--task-file",
            "TODO.md",
            "--no-github",
            "--no-tasks",
            "--headless",
            "--sandbox",
            MODE,
            "--max-iterations",
            "4",
        )
        report("codex", said, read_events(project.root))
        out = f"{done.stdout}\n{done.stderr}\n{project.logs()}"
        refused = check(attack, done.returncode, out, lambda: project.loopdeck("status", check=True).stdout)
        assert any(_queue_refused(line) for lines in refused for line in lines), refused
    finally:
        attack.cleanup()


# --- Claude Code in a session, after `loopdeck install --sandbox` --------------------------------


def test_in_a_session_claude_codes_own_sandbox_holds_the_same_line_after_install_sandbox(
    claude_project: Project, tmp_path: Path
) -> None:
    """The in-session loop: the Stop hook drives it and Claude Code's own Bash sandbox (turned on
    by `install --sandbox`) is the agent's; the same attempts change nothing."""
    project = claude_project
    attack = attack_for(project.root, tmp_path, project.home, tmp_path / "xdg-config")
    attack.prepare()
    project.commit()
    project.loopdeck("install", "--sandbox")
    project.loopdeck("start", "Work through TODO.md", "--task-file", "TODO.md", "--no-github", "--no-tasks")
    said: list[str] = []

    def script(request: Request) -> Turn:
        results = [content_text(block.get("content")) for block in tool_results(request)]
        if results:
            said.extend(results)
            return say(f"Tried a few things; the task is ticked.\n{COMPLETE}")
        if "- [ ]" in (project.root / "TODO.md").read_text() and not said:
            return call("Bash", command=attack.command(), description="tidy up")
        return say(COMPLETE)

    project.api.script = script
    try:
        result = project.claude("Work through TODO.md")
        report("claude in a session", said, read_events(project.root))
        check(attack, result.code, result.stderr, lambda: project.loopdeck("status").stdout)
        lines = "\n".join(said).lower().splitlines()  # the queue does not exist yet: it may not be made
        assert any(CONTROL in line and ("read-only" in line or "denied" in line) for line in lines), said
    finally:
        attack.cleanup()
