"""A loop started from a design, driven by the runner with a scripted agent: it does not run
before a person confirms the design's commands, a claim does not complete while a criterion's
command fails, and the design stays as it was (a checksum escalates, a sandbox refuses)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from loop.store.paths import Workspace
from tests.conftest import run_loopdeck

CHECK = f"{sys.executable} -I check.py"
DESIGN = f"""\
# DESIGN: the greeting
Type: feature

## Acceptance Criteria
- [ ] The check passes: `{CHECK}`
- [ ] The greeting is friendly

## Validation
- `{CHECK}`
"""
CHECK_PY = "import pathlib, sys\nsys.exit(0 if pathlib.Path('fixed.txt').exists() else 1)\n"
AGENT = r"""
import pathlib, sys
ws = pathlib.Path.cwd()
prompt = sys.stdin.read()
turn = len(list(ws.glob("prompt-*.txt"))) + 1
(ws / f"prompt-{turn}.txt").write_text(prompt)
mode = sys.argv[1]
if mode == "edit" and turn == 1:
    try:
        with open(ws / "DESIGN-20260119-143022.md", "a") as f:
            f.write("- [x] everything is done\n")
        print("edited the design")
    except OSError as exc:
        print(f"refused: {exc}")
if turn > 1 or mode == "edit":
    (ws / "fixed.txt").write_text("fixed\n")
print("All done.")
print("<promise>FEATURE_COMPLETE</promise>")
"""


def project(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / ".git").mkdir()
    (root / "DESIGN-20260119-143022.md").write_text(DESIGN)
    (root / "check.py").write_text(CHECK_PY)
    (root / "agent.py").write_text(AGENT)
    return root


def start(root: Path) -> None:
    done = run_loopdeck(
        "-C", str(root), "start", "--no-github", "--no-tasks", "--verify-allow", CHECK, cwd=root
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def run(root: Path, mode: str, *extra: str) -> tuple[int, str]:
    agent = f"{sys.executable} -I {root / 'agent.py'} {mode}"
    done = run_loopdeck(
        "-C", str(root), "run", "--agent", agent, "--agent-format", "text", "--headless",
        "--max-iterations", "5", *extra, cwd=root, timeout=120,
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr


def events(root: Path) -> list[dict[str, Any]]:
    lines = Workspace(root).journal.read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_the_loop_does_not_run_until_a_person_confirms_the_designs_commands(tmp_path: Path) -> None:
    root = project(tmp_path)
    start(root)
    code, out = run(root, "honest")
    assert code != 0 and "nobody on this machine confirmed" in out and CHECK in out
    assert not (root / "prompt-1.txt").exists()  # no agent ran, no check ran


def test_a_claim_does_not_complete_while_a_criterions_command_fails(tmp_path: Path) -> None:
    root = project(tmp_path)
    start(root)
    assert run_loopdeck("-C", str(root), "trust", "--yes", cwd=root).returncode == 0
    code, out = run(root, "honest")
    assert code == 0, out
    first = (root / "prompt-1.txt").read_text()
    assert first.startswith("Implement the design in DESIGN-20260119-143022.md.")
    assert "- The greeting is friendly" in first  # a criterion for the agent's judgement
    second = (root / "prompt-2.txt").read_text()
    assert second.startswith("VERIFICATION FAILED") and "check.py" in second
    kinds = [e["kind"] for e in events(root)]
    assert "verification-failed" in kinds and kinds.index("verification-failed") < kinds.index("completed")
    assert not (root / "prompt-3.txt").exists()  # the honest second claim completed
    criteria = "Criteria:  1 of 1 checked by a command met; 1 left to the agent's judgement"
    assert f"{criteria} (DESIGN-20260119-143022.md)" in out  # the summary's final validation


def test_a_failing_criterion_is_named_in_the_next_prompt_and_is_not_the_build(tmp_path: Path) -> None:
    """The criterion's command is neither a test runner nor a build tool: its failure is said as
    the criterion that names it, and the agent is not told to fix a build."""
    root = project(tmp_path)
    start(root)
    assert run_loopdeck("-C", str(root), "trust", "--yes", cwd=root).returncode == 0
    code, out = run(root, "honest")
    assert code == 0, out
    second = (root / "prompt-2.txt").read_text()
    assert f"Criterion not met: The check passes: `{CHECK}` (`{CHECK}` exited 1)" in second
    assert "Make the design's failing criteria hold" in second
    assert "Build: fails" not in second and "Fix the build" not in second
    failed = [e["data"] for e in events(root) if e["kind"] == "verification-failed"]
    assert failed and failed[0]["kind"] == "check"
    assert "Build:" not in out  # the summary's final validation names no build


def test_the_agent_editing_the_design_escalates(tmp_path: Path) -> None:
    root = project(tmp_path)
    start(root)
    assert run_loopdeck("-C", str(root), "trust", "--yes", cwd=root).returncode == 0
    _code, out = run(root, "edit", "--sandbox", "off")
    escalations = [e["data"] for e in events(root) if e["kind"] == "escalation"]
    assert escalations and escalations[0]["kind"] == "design-changed", out
    assert "DESIGN-20260119-143022.md changed while the loop ran" in str(escalations[0]["reason"])
    assert "completed" not in [e["kind"] for e in events(root)]


def test_a_sandboxed_agent_cannot_write_the_design(tmp_path: Path) -> None:
    from tests.test_sandbox import real_bwrap

    real_bwrap()
    root = project(tmp_path)
    start(root)
    assert run_loopdeck("-C", str(root), "trust", "--yes", cwd=root).returncode == 0
    code, out = run(root, "edit", "--sandbox", "on")
    assert code == 0, out
    assert (root / "DESIGN-20260119-143022.md").read_text() == DESIGN
    kinds = [e["kind"] for e in events(root)]
    assert "completed" in kinds and "escalation" not in kinds
    refused = [e["data"] for e in events(root) if e["kind"] == "sandbox-refused"]
    assert refused and "Read-only file system" in json.dumps(refused)
