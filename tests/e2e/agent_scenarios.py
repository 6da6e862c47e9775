"""The scenarios every agent CLI's end-to-end suite runs, with the real CLI against the mock.

Each suite (test_codex_cli.py, test_gemini_cli.py, test_opencode_cli.py) runs the same five, lean
on purpose (one to three tasks; the whole suite shares two cores with everything else):

1. a loop of three tasks completed by the runner, with the agent's tokens and cost per
   iteration in the journal and the summary, and the iteration log read as live lines;
2. a parallel run of two workers over a task graph;
3. a usage limit waited out (a reset a few seconds away, read from what the CLI said);
4. a refused tool escalated with how to allow it;
5. a fallback to another CLI while the first is held by a limit, and back after the reset.

Assertions are on loopdeck's behaviour (files, journal, summary, exit status) and on the
adapter's reading, never on the CLI's own wording.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from loop import agents
from tests.conftest import iteration_logs
from tests.e2e.agents_harness import CLIProject, cli_binary
from tests.e2e.mockclis import Call, MockCLIs, Reply, Script, limit, say, shell, tick_script

FALLBACK = {"codex": "gemini", "gemini": "opencode", "opencode": "codex"}
"""Each suite's fallback CLI (a different one, so both adapters take part)."""
REFUSING = {
    "codex": "codex exec --json --skip-git-repo-check -- {prompt}",
    "gemini": "gemini --output-format stream-json --skip-trust --prompt={prompt}",
    "opencode": "opencode",
}
"""Each CLI in a mode that refuses the shell: Codex's default read-only sandbox, Gemini's default
approval mode (no shell tool offered), OpenCode with a rule that asks (`configure_opencode`)."""
ALLOW_HINTS = {"codex": "--sandbox workspace-write", "gemini": "--approval-mode yolo", "opencode": "--auto"}
ESTIMATED = {"codex": True, "gemini": True, "opencode": False}
"""Codex and Gemini report tokens only (loopdeck estimates the cost); OpenCode reports its cost."""


def cli_project(tmp_path: Path) -> Iterator[CLIProject]:
    """The `cli_project` fixture (tests/e2e/conftest.py): every installed CLI wired to one mock."""
    installed = {name: path for name in FALLBACK if (path := cli_binary(name)[0]) is not None}
    with MockCLIs(log_file=tmp_path / "requests.jsonl") as api:
        yield CLIProject(tmp_path, api, installed)
        assert api.errors == [], api.errors


def run_loop(project: CLIProject, agent: str, *args: str) -> str:
    done = project.loopdeck(
        "run",
        "Work through TODO.md",
        "--agent",
        agent,
        "--task-file",
        "TODO.md",
        "--no-github",
        "--no-tasks",
        "--headless",
        *args,
    )
    return f"exit {done.returncode}\n{done.stdout}\n{done.stderr}\n{project.logs()}"


def summary(output: str) -> str:
    return output.split("== loopdeck summary ==", 1)[-1]


# --- 1. three tasks, with tokens and cost -------------------------------------------------------


def loop_of_three_tasks(project: CLIProject, cli: str) -> None:
    todo = project.write("TODO.md", "# Tasks\n\n- [ ] one\n- [ ] two\n- [ ] three\n")
    project.commit()
    project.api.script = tick_script(project.root)
    out = run_loop(project, cli)
    assert out.startswith("exit 0"), out
    assert todo.read_text().count("- [x]") == 3 and "- [ ]" not in todo.read_text()
    assert "completed" in project.kinds() and len(project.archives()) == 1, out
    done = project.of_kind("iteration-completed")
    assert len(done) >= 3 and all(e["data"]["agent"] == cli for e in done), done
    ticking = done[0]["data"]
    assert sum(ticking["tokens"].values()) > 0, ticking
    assert isinstance(ticking["cost_usd"], float) and ticking["cost_usd"] > 0, ticking
    assert bool(ticking.get("estimated")) is ESTIMATED[cli], ticking
    tail = summary(out)
    assert "Per iteration:" in tail and f"  #1 {cli}" in tail, tail
    cost = next(line for line in tail.splitlines() if line.startswith("Cost:"))
    assert ("(estimated)" in cost) is ESTIMATED[cli] and "tokens" in cost, cost
    # the monitor's output panel reads the iteration log through the adapter
    first = iteration_logs(project.root)[0].read_text()
    shown = [agents.live_line(line, cli) for line in first.splitlines()]
    lines = [line for item in shown if item for line in item.splitlines()]
    assert any(line.startswith("▸ ") and "sed -i" in line for line in lines), lines
    assert "Ticked one task." in lines, lines


# --- 2. two workers over a task graph -------------------------------------------------------------


def worker_script(call: Call) -> Reply:
    if call.tool_result is not None:
        return say("Wrote the file.")
    found = re.search(r"Your task \((\d+)\)", json.dumps(call.body))
    if found is None:
        return say("Nothing to do.")
    return shell(f"echo done > task-{found.group(1)}.txt", "Writing the file.")


def parallel_workers(project: CLIProject, cli: str) -> None:
    tasks: list[dict[str, object]] = [
        {
            "id": n,
            "subject": f"Write task-{n}.txt",
            "description": f"Create task-{n}.txt.",
            "status": "pending",
            "blockedBy": [],
            "metadata": {"target_files": [f"task-{n}.txt"]},
        }
        for n in ("1", "2")
    ]
    graph = project.write("tasks.json", json.dumps({"tasks": tasks}, indent=1))
    project.commit()
    project.api.script = worker_script
    done = project.loopdeck(
        "run",
        "Write the files",
        "--workers",
        "2",
        "--graph",
        "tasks.json",
        "--agent",
        cli,
        "--no-github",
        "--no-tasks",
        "--headless",
    )
    out = f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    assert done.returncode == 0, out
    assert (project.root / "task-1.txt").exists() and (project.root / "task-2.txt").exists(), out
    statuses = [t["status"] for t in json.loads(graph.read_text())["tasks"]]
    assert statuses == ["completed", "completed"], statuses
    workers = {e["data"].get("worker") for e in project.of_kind("worker-started")}
    assert len(workers) == 2, workers
    assert len(project.api.main_calls(cli)) >= 4  # each worker's command and its report
    for ended in project.of_kind("worker-ended"):  # each worker's turn says what it cost
        spent = ended["data"]
        assert sum(spent["tokens"].values()) > 0 and spent["cost_usd"] > 0, spent
        assert spent.get("estimated", False) is ESTIMATED[cli], spent


# --- 3. a usage limit, waited out -----------------------------------------------------------------


def limited_until(cli: str, root: Path, seconds: float) -> Script:
    """`cli`'s requests are refused with a usage limit until `seconds` after the first one; then
    (and any other CLI's requests, not answered before the reset) tick the checklist."""
    inner = tick_script(root)
    until: list[float] = []
    lock = threading.Lock()

    def script(call: Call) -> Reply:
        with lock:
            if call.cli == cli and not until:
                until.append(float(math.ceil(time.time() + seconds)))  # a whole second, as APIs say it
        if call.cli == cli and time.time() < until[0]:
            return limit(cli, until[0])
        reply = inner(call)
        if call.cli != cli and until:
            # the fallback's turn ends after the reset, as the loop reckons it (the CLI may say
            # "in N seconds" late), however fast its CLI starts: the next turn is then the first
            # one's again, on any machine
            reply.delay = max(0.0, max(until[0], switched_until(root)) + 0.2 - time.time())
        return reply

    script.until = until  # type: ignore[attr-defined]
    return script


def switched_until(root: Path) -> float:
    """The epoch until which the loop holds the first agent, from its last switch to the fallback."""
    journal = root / ".claude" / "orchestrator-loop.events.jsonl"
    lines = journal.read_text(encoding="utf-8").splitlines() if journal.exists() else []
    ends = [json.loads(line)["data"].get("until") for line in lines if '"agent-switched"' in line]
    return datetime.fromisoformat(ends[-1]).timestamp() if ends and ends[-1] else 0.0


def usage_limit_waited_out(project: CLIProject, cli: str) -> None:
    todo = project.write("TODO.md", "- [ ] the one task\n")
    project.commit()
    project.api.script = limited_until(cli, project.root, 3.0)
    out = run_loop(project, cli)
    assert out.startswith("exit 0"), out
    assert "- [x] the one task" in todo.read_text()
    kinds = project.kinds()
    assert kinds.count("usage-limit") == 1 and "limit-lifted" in kinds, kinds
    assert "agent-failed" not in kinds and "retry" not in kinds, kinds
    (event,) = project.of_kind("usage-limit")
    waited = (
        datetime.fromisoformat(event["data"]["until"]) - datetime.fromisoformat(event["ts"])
    ).total_seconds()
    assert 0 < waited < 30, event  # the CLI's own reset time, not a default back-off of a minute


# --- 4. a refused tool ------------------------------------------------------------------------------


def refused_tool_escalated(project: CLIProject, cli: str) -> None:
    todo = project.write("TODO.md", "- [ ] the one task\n")
    project.commit()
    if cli == "opencode":
        project.configure_opencode(permission={"bash": "ask"})
    project.api.script = tick_script(project.root)
    out = run_loop(project, REFUSING[cli])
    assert out.startswith("exit 1"), out  # headless: the escalation ends the run
    assert "- [ ] the one task" in todo.read_text()
    (denied,) = project.of_kind("permission-denied")
    assert denied["data"]["tools"], denied
    escalation = next(
        e for e in project.of_kind("escalation") if e["data"].get("kind") == "permission-denied"
    )
    assert ALLOW_HINTS[cli] in escalation["data"]["reason"], escalation
    status = project.loopdeck("status").stdout
    assert f"agent        {cli} (" in status and f"last turns   #1 {cli}" in status, status


# --- 5. a fallback while the first CLI is limited --------------------------------------------------


def fallback_on_a_limit(project: CLIProject, cli: str) -> None:
    other = FALLBACK[cli]
    found, why = cli_binary(other)
    if found is None:
        pytest.skip(why)
    todo = project.write("TODO.md", "- [ ] one\n- [ ] two\n")
    project.commit()
    project.api.script = limited_until(cli, project.root, 1.5)
    out = run_loop(project, cli, "--fallback-agent", other)
    assert out.startswith("exit 0"), out
    assert todo.read_text().count("- [x]") == 2
    switches = [(e["data"]["from"], e["data"]["to"]) for e in project.of_kind("agent-switched")]
    assert switches[:2] == [(cli, other), (other, cli)], switches
    done = [e["data"]["agent"] for e in project.of_kind("iteration-completed")]
    assert done[0] == other and cli in done[1:], done
    kinds = project.kinds()
    assert "usage-limit" not in kinds and "agent-failed" not in kinds, kinds
    assert f"Agent switched: {cli} → {other}" in out
