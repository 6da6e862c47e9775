"""What a person met in the first hour, third part: a note said just before a skip still reaches
a turn that runs; workers finishing together past the cost limit are all accounted; a Temporal
loop answers `status` and the steering verbs from its workspace; current models are priced.
The engine's rules on a fixed clock, the rest through the real drivers."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from loop.core.engine import decide
from loop.core.model import Aggregate, LoopState, Result, StopInput, Turn
from loop.store.journal import Journal
from loop.store.paths import Workspace
from tests.test_engine import NOW, cmd, sources, state
from tests.test_hook_process import launcher, project, stop
from tests.test_parallel import repo
from tests.test_runner import demo, start_runner, wait_for

__all__ = ["demo", "launcher", "project", "repo"]

NOTE = "Use SQLite, not Postgres"
SAID = "A PERSON WATCHING THE LOOP SAYS:\n- Use SQLite, not Postgres"


# --- a note reaches a turn that runs (the engine, a fixed clock) --------------------------------


def _runner(s: LoopState, srcs: Aggregate, turn: Turn | None, *kinds: str) -> Result:
    commands = [cmd(k, reason=NOTE if k == "say" else None) for k in kinds]
    return decide(s, StopInput("worked", driver="runner", turn=turn), commands, srcs, NOW)


def test_a_note_before_a_skip_reaches_the_turn_after_it() -> None:
    """Regression: `say` then `skip` a second later: the note went into the turn the skip ended
    and no later prompt carried it."""
    srcs = sources(task_file=3)
    said = _runner(state(iteration=1, driver="runner"), srcs, Turn(changed=True), "say")
    assert said.blocked and (said.reason or "").startswith(SAID)
    assert said.state is not None
    skipped = _runner(said.state, srcs, Turn(interrupted="skip"), "skip")
    assert skipped.blocked and (skipped.reason or "").startswith(SAID)
    assert skipped.state is not None
    heard = _runner(skipped.state, srcs, Turn(changed=True))
    assert heard.blocked and "A PERSON WATCHING" not in (heard.reason or "")
    assert heard.state is not None and "notes" not in heard.state.extra


def test_a_note_outlives_failed_and_cut_short_turns_and_is_spent_once_heard() -> None:
    srcs = sources(task_file=3)
    result = _runner(state(iteration=1, driver="runner"), srcs, Turn(changed=True), "say")
    for unheard in (Turn(failure="exit 1"), Turn(interrupted="signal SIGINT")):
        assert result.state is not None
        result = _runner(result.state, srcs, unheard)
        assert result.blocked and (result.reason or "").startswith(SAID), unheard
    assert result.state is not None
    result = _runner(result.state, srcs, Turn(changed=True))
    assert "A PERSON WATCHING" not in (result.reason or "")


def test_a_note_said_during_a_turn_that_hears_an_earlier_one_is_kept() -> None:
    """The turn that got note 1 ends as note 2 arrives: only note 1 is spent."""
    srcs = sources(task_file=3)
    first = _runner(state(iteration=1, driver="runner"), srcs, Turn(changed=True), "say")
    assert first.state is not None
    second = decide(
        first.state,
        StopInput("worked", driver="runner", turn=Turn(changed=True)),
        [cmd("say", reason="Keep the API small")],
        srcs,
        NOW,
    )
    assert (second.reason or "").startswith("A PERSON WATCHING THE LOOP SAYS:\n- Keep the API small\n\n")


def test_the_hook_spends_a_note_in_the_block_that_carries_it() -> None:
    srcs = sources(task_file=2)
    said = decide(state(), StopInput("x"), [cmd("say", reason=NOTE)], srcs, NOW)
    assert said.state is not None and (said.reason or "").startswith(SAID)
    after = decide(said.state, StopInput("x"), [], srcs, NOW)
    assert "A PERSON WATCHING" not in (after.reason or "")


# --- the same, end to end with the runner --------------------------------------------------------

GATED_AGENT = """\
import pathlib, sys, time
root = pathlib.Path.cwd()
box = root / ".demo"
box.mkdir(exist_ok=True)
prompt = sys.stdin.read()
n = len(list(box.glob("prompt-*.txt"))) + 1
(box / f"prompt-{n}.txt").write_text(prompt)
gate = box / f"go-{n}"
while not gate.exists():
    time.sleep(0.02)
print(f"Turn {n} done.")
"""


def _loopdeck(ws: Workspace, *args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "loop.cli", "-C", str(ws.root), *args],
        cwd=ws.root,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr + done.stdout


def test_a_note_then_a_skip_reaches_the_next_turn_with_the_runner(demo: Workspace, tmp_path: Path) -> None:
    script = tmp_path / "gated_agent.py"
    script.write_text(GATED_AGENT)
    box = demo.root / ".demo"
    agent_cmd = shlex.join([sys.executable, "-I", str(script)])
    runner = start_runner(
        demo,
        "run",
        "Build the demo",
        "--agent",
        agent_cmd,
        "--task-file",
        "TODO.md",
        "--no-github",
        "--headless",
    )
    try:
        wait_for(lambda: (box / "prompt-1.txt").exists())
        _loopdeck(demo, "say", NOTE)
        (box / "go-1").touch()
        wait_for(lambda: (box / "prompt-2.txt").exists())
        assert SAID in (box / "prompt-2.txt").read_text()
        _loopdeck(demo, "skip")  # ends turn 2, which carried the note
        wait_for(lambda: (box / "prompt-3.txt").exists())
        assert SAID in (box / "prompt-3.txt").read_text()
        (box / "go-3").touch()
        wait_for(lambda: (box / "prompt-4.txt").exists())
        assert "A PERSON WATCHING" not in (box / "prompt-4.txt").read_text()
        _loopdeck(demo, "stop")
        (box / "go-4").touch()
        runner.wait(timeout=60)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()


# --- workers finishing together past the cost limit --------------------------------------------

PRICED_WORKER = """\
import contextlib, io, json, pathlib, sys, time
from loop.demo import worker

meet = pathlib.Path(sys.argv[1])
prompt = sys.stdin.read()
sys.stdin = io.StringIO(prompt)
with contextlib.redirect_stdout(io.StringIO()) as said:
    worker.main([])
meet.mkdir(exist_ok=True)
(meet / str(len(list(meet.iterdir())))).touch()
deadline = time.monotonic() + 30
while len(list(meet.iterdir())) < 2 and time.monotonic() < deadline:
    time.sleep(0.01)
print(json.dumps({"type": "result", "subtype": "success", "result": said.getvalue().strip(),
                  "total_cost_usd": 0.84}))
"""


def test_a_worker_done_as_another_crosses_the_cost_limit_is_accounted(
    repo: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: two workers end together and the first one read crosses `--max-cost`: the
    other, already finished, was dropped (its cost not counted, its task pending again). Here
    the driver reads their ends one poll apart, every time: no timing luck."""
    from loop import cli
    from loop.demo import graph as demo_graph
    from loop.processes import workers
    from loop.sources import taskgraph as graph_source

    ws = repo
    tasks = (("1", "Model", (), ("src/model.py",)), ("2", "Store", (), ("src/store.py",)))
    folder = demo_graph.create(ws.root / "graph", tasks)
    script = tmp_path / "priced_worker.py"
    script.write_text(PRICED_WORKER)
    meet = tmp_path / "meet"

    real_poll = workers.Pool.poll
    held: list[workers.Ended] = []

    def one_at_a_time(self: workers.Pool, timeout: float | None = None) -> list[workers.Ended]:
        """Both workers' ends are seen before either is told, then one per poll."""
        held.extend(real_poll(self, timeout))
        if len([e for e in held if e.role == "worker"]) < 2 and self.running():
            return []
        return [held.pop(0)] if held else []

    monkeypatch.setattr(workers.Pool, "poll", one_at_a_time)
    monkeypatch.chdir(ws.root)
    code = cli.main(
        [
            "-C",
            str(ws.root),
            "run",
            "Build it",
            "--workers",
            "2",
            "--graph",
            str(folder),
            "--agent",
            shlex.join([sys.executable, "-I", str(script), str(meet)]),
            "--max-cost",
            "0.50",
            "--headless",
        ]
    )
    out = capsys.readouterr().out
    assert code == 1, out
    assert "Cost:        $1.68 of a $0.50 budget" in out, out
    ended = [e.data["worker"] for e in Journal(ws.journal).read_from(0).events if e.kind == "worker-ended"]
    assert sorted(ended) == ["worker-1", "worker-2"]
    statuses = {t.id: t.status for t in graph_source.read(folder)}
    assert statuses == {"1": "completed", "2": "completed"}


# --- current models priced, a person's prices first ----------------------------------------------

MILLION = {"input_tokens": 1_000_000, "output_tokens": 1_000_000}


def test_the_current_codex_and_gemini_models_have_an_estimated_cost(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Regression: `gpt-5.5` and `gemini-3.x` were not in a hand-written table: cost unknown."""
    from loop.agents import gemini, prices
    from loop.views.summary import money

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    for model in ("gpt-5.5", "gpt-5-codex", "gemini-2.5-pro", "gemini-3-pro-preview", "openai/GPT-5.5"):
        cost = prices.estimate(model, MILLION)
        assert cost is not None and cost > 0, model
    assert prices.estimate("gpt-5-codex", MILLION) == pytest.approx(11.25)  # 1.25 in, 10 out
    assert prices.estimate("my-own-model", MILLION) is None  # never a made-up cost
    stats = {
        "models": {"gemini-3-pro-preview": {"tokens": {"prompt": 1200, "candidates": 300, "cached": 200}}}
    }
    tokens, cost, main = gemini._usage(stats)
    assert main == "gemini-3-pro-preview" and tokens and cost is not None and cost > 0
    assert money(cost, estimated=True).endswith("(estimated)")


def test_a_persons_price_wins_over_the_library(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import json

    from loop.agents import prices

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "loopdeck").mkdir()
    (tmp_path / "loopdeck" / "prices.json").write_text(json.dumps({"gpt-5.5": {"input": 1, "output": 2}}))
    assert prices.estimate("gpt-5.5", MILLION) == pytest.approx(3.0)


def test_the_price_list_is_never_loaded_on_the_stop_hooks_path(launcher: Path, project: Workspace) -> None:
    """`genai_prices` takes a quarter of a second to import: only an estimate loads it."""
    done = stop(launcher, project, ("-X", "importtime"))
    assert "| loop.drivers.hook\n" in done.stderr
    assert "genai_prices" not in done.stderr
    code = "import sys, loop.agents, loop.agents.codex, loop.agents.gemini, loop.drivers.hook\n"
    code += "print('genai_prices' in sys.modules)"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "False"


# --- a Temporal loop's record and the workspace's own loop -----------------------------------------


def test_the_later_of_a_temporal_record_and_the_workspaces_own_loop_is_the_one_steered(
    tmp_path: Path,
) -> None:
    """A hook loop left from earlier no longer hides the Temporal loop started after it; a
    loop started here after the Temporal one is the workspace's again."""
    import argparse
    import json

    from loop.cli import temporal
    from loop.store.state import LoopState, StateStore

    ws = Workspace(tmp_path / "project")
    ws.private_dir.mkdir(parents=True)
    args = argparse.Namespace(temporal=None)
    assert not temporal.wanted(args, ws)
    record = ws.private_dir / "temporal.json"
    record.write_text(
        json.dumps(
            {"address": "127.0.0.1:7233", "workflow_id": "wf", "started_at": "2026-11-28T10:00:00+00:00"}
        )
    )
    assert temporal.wanted(args, ws)
    StateStore(ws).write(LoopState.new("earlier", started_at="2026-11-28T09:00:00+00:00"))
    assert temporal.wanted(args, ws)
    StateStore(ws).write(LoopState.new("later", started_at="2026-11-28T11:00:00+00:00"))
    assert not temporal.wanted(args, ws)
