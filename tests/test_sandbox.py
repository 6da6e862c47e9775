"""The agent's sandbox: its argv, profile and environment, and real bubblewrap turns that try
everything an agent must not do (steer the loop, plant git config or hooks, write outside the
workspace, read the trust records, leave a process behind)."""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from loop.core.errors import LoopdeckError
from loop.processes import agent, refusal, sandbox
from loop.processes.sandbox import Spec, Status
from loop.store.paths import Workspace
from loop.views.snapshot import read as read_snapshot
from tests.conftest import alive_with, loopdeck_cmd
from tui.widgets.status_bar import bar_line

BWRAP = Status("bwrap", "bubblewrap 0.8.0")


@pytest.fixture(autouse=True)
def own_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sandbox makes the agent CLIs' folders in HOME: never in the home of whoever runs the suite."""
    home = tmp_path / "own-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))


def real_bwrap() -> Status:
    status = sandbox.detect("auto")
    if status.kind != "bwrap":
        pytest.skip(f"bubblewrap cannot start here: {status.why}")
    return status


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


# --- choosing one ------------------------------------------------------------------------------


def test_the_mode_comes_from_the_command_line_then_the_environment_then_the_saved_default() -> None:
    assert sandbox.choose("on", "off", {"LOOPDECK_SANDBOX": "off"}) == "on"
    assert sandbox.choose(None, "on", {"LOOPDECK_SANDBOX": "off"}) == "off"
    assert sandbox.choose(None, "on", {}) == "on"
    assert sandbox.choose(None, None, {}) == "auto"
    with pytest.raises(LoopdeckError, match="expected one of auto, on, off"):
        sandbox.choose("maybe", None, {})
    assert sandbox.detect("off") == Status("off", "off: turned off")
    assert not sandbox.detect("off").on


def test_on_refuses_to_start_where_no_sandbox_can_and_auto_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    missing = sandbox._probe_bwrap(None)
    assert missing.why == "off: bwrap is not installed (apt-get install bubblewrap)"
    monkeypatch.setattr(sandbox, "_available", lambda: missing)
    assert sandbox.detect("auto") == missing
    with pytest.raises(LoopdeckError, match="the sandbox cannot start: bwrap is not installed"):
        sandbox.detect("on")
    assert sandbox.describe(missing, True) == missing.why
    assert sandbox.describe(BWRAP, False) == "bwrap (bubblewrap 0.8.0), network off"


# --- the argv, the profile, the environment ------------------------------------------------------


def test_the_bwrap_argv_binds_the_workspace_after_tmp_and_covers_loopdeck_files_read_only(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ws"
    (root / ".claude").mkdir(parents=True)
    (root / ".claude" / "orchestrator-loop.local.md").write_text("---\n---\n")
    (root / ".claude" / "settings.json").write_text("{}")
    home = tmp_path / "home"
    (home / ".config" / "loopdeck").mkdir(parents=True)
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "PATH": "/usr/bin"}
    argv = sandbox.bwrap_argv(["agent", "--flag"], Spec(root, root, network=False), env)
    assert argv[-3:] == ["--", "agent", "--flag"]
    assert argv.index("/tmp") < argv.index(str(root))  # a workspace under /tmp is bound after it
    assert "--unshare-net" in argv and "--unshare-pid" in argv and "--die-with-parent" in argv
    bound = argv.index("--bind")
    claude = root / ".claude"
    for name in (
        "orchestrator-loop.control.jsonl",
        "orchestrator-loop.events.jsonl",
        "orchestrator-loop.lock",
    ):
        assert (claude / name).is_file()  # made, so a read-only mount can cover it
    for path in (
        claude / "orchestrator-loop.local.md",
        claude / "orchestrator-loop.control.jsonl",
        claude / "loopdeck",
        claude / "loops",
        claude / "settings.json",
    ):
        at = argv.index(str(path))
        assert argv[at - 1] == "--ro-bind" and at > bound
    assert argv[argv.index(str(home / ".config" / "loopdeck")) - 1] == "--tmpfs"
    assert argv[argv.index(str(home / ".claude")) - 1] == "--bind"  # made, and writable
    assert "--unshare-net" not in sandbox.bwrap_argv(["a"], Spec(root, root), env)


def test_a_worktree_gets_its_repository_writable_and_the_main_repository_config_and_hooks_read_only(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "commit", "-q", "--allow-empty", "-m", "start")
    tree = repo / ".loopdeck" / "worktrees" / "loop" / "t1"
    git(repo, "worktree", "add", "-q", "-b", "t1", str(tree))
    gitdir, common = sandbox.git_dirs(tree) or (None, None)
    assert common == (repo / ".git").resolve() and gitdir == common / "worktrees" / "t1"
    spec = Spec(tree, repo)
    assert sandbox.writable_git(spec) == [common]
    shielded = sandbox.protected(spec)
    assert common / "config" in shielded and common / "hooks" in shielded
    assert not (tree / ".claude").exists()  # a worktree's files are the task's: nothing made there
    argv = sandbox.bwrap_argv(["a"], spec, {})
    assert argv.index(str(common)) < argv.index(str(common / "config"))


def test_the_agent_gets_only_what_it_needs_of_the_environment(tmp_path: Path) -> None:
    base = {
        "PATH": "/bin",
        "HOME": "/home/me",
        "LC_ALL": "C.UTF-8",
        "ANTHROPIC_API_KEY": "k",
        "CLAUDE_CODE_ENABLE_TODO_TOOLS": "1",
        "CODEX_HOME": "/c",
        "GOOGLE_GEMINI_BASE_URL": "http://x",
        "DISABLE_AUTOUPDATER": "1",
        "IS_SANDBOX": "1",
        "https_proxy": "http://proxy",
        "LOOPDECK_RUN": "abc.1",
        "LOOPDECK_DRIVER": "runner",
        "LOOPDECK_WORKER": "w1",
        "GITHUB_TOKEN": "secret",
        "SSH_AUTH_SOCK": "/run/agent",
        "LOOPDECK_TRUST_HOME": "/trust",
        "MY_TOOL": "yes",
        "OPENROUTER_API_KEY": "k",
        "MOCK_BASE_URL": "http://mock",
        "TMPDIR": "/var/folders/x",
    }
    env = sandbox.env_for(base, Spec(Path("/w"), Path("/w"), env_names=("MY_TOOL",)))
    assert env["TMPDIR"] == "/tmp"
    for name in ("GITHUB_TOKEN", "SSH_AUTH_SOCK", "LOOPDECK_TRUST_HOME"):
        assert name not in env
    kept = set(base) - {"GITHUB_TOKEN", "SSH_AUTH_SOCK", "LOOPDECK_TRUST_HOME", "TMPDIR"}
    assert kept <= set(env)
    argv, same = sandbox.wrap(["a"], Spec(Path("/w"), Path("/w")), base, Status("off", "off"))
    assert argv == ["a"] and same == base  # off: as they were
    spec = Spec(tmp_path, tmp_path)
    _argv, inner = sandbox.wrap(["a"], spec, {**base, "ODD": "1"}, BWRAP, {"ODD": "1"})
    assert inner["ODD"] == "1" and "GITHUB_TOKEN" not in inner  # the adapter's own variables pass


def test_the_macos_profile_allows_writing_the_workspace_only_and_quotes_its_paths(tmp_path: Path) -> None:
    root = tmp_path / 'we"ird\\ws'
    (root / ".claude").mkdir(parents=True)
    home = tmp_path / "home"
    (home / ".config" / "loopdeck").mkdir(parents=True)
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    text = sandbox.macos_profile(Spec(root, root, network=False), env)
    quoted = str(root).replace("\\", "\\\\").replace('"', '\\"')
    assert text.startswith("(version 1)\n(allow default)\n(deny file-write*)\n(allow file-write*\n")
    assert f'(subpath "{quoted}")' in text
    assert f'(literal "{quoted}/.claude/orchestrator-loop.control.jsonl")' in text
    assert f'(subpath "{quoted}/.claude/loopdeck")' in text
    assert f'(subpath "{home}/.config/loopdeck")' in text.split("(deny file-read* file-write*")[1]
    assert '(deny network-outbound (remote ip "*:*"))' in text
    assert text.index("(allow file-write*") < text.index("(deny file-write*\n")  # the last rule wins
    assert "network-outbound" not in sandbox.macos_profile(Spec(root, root), env)


def test_refusals_are_the_lines_that_show_the_sandbox_refusing_at_most_five() -> None:
    out = b"\n".join(
        [
            b"ok",
            b"sh: cannot create .claude/orchestrator-loop.control.jsonl: Read-only file system",
            b"rm: cannot remove 'x': Permission denied",  # the project's own business
            b"error: could not lock config file .git/config: Permission denied",
            b"The sandbox refused: Read-only file system (this is expected)",  # our own note, echoed
            *[f"EROFS {i} {'x' * 300}".encode() for i in range(10)],
        ]
    )
    found = refusal.lines(out)
    assert len(found) == 5
    assert found[0].endswith("Read-only file system")
    assert "lock config file" in found[1]
    assert all(len(line) <= 200 for line in found)
    assert not any("The sandbox refused" in line for line in found)
    assert found[2].startswith("EROFS 0")
    busy = b"error: could not write config file /w/.git/config: Device or resource busy\nx: Device or resource busy"
    assert refusal.lines(busy) == [busy.decode().splitlines()[0]]
    long = b'{"type": "tool_result", "content": "' + b"y" * 500 + b' Read-only file system: x"}'
    assert "Read-only file system" in refusal.lines(long)[0]
    assert refusal.lines(b"all fine\n") == []
    assert refusal.note(found).startswith("The sandbox refused: sh: cannot create")


# --- real turns --------------------------------------------------------------------------------


def _wait_gone(token: str, seconds: float = 10.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = alive_with(token)
        if not left:
            return []
        time.sleep(0.02)
    return alive_with(token)


TRYING_AGENT = r"""
import json, os, subprocess, sys
from pathlib import Path

ws, trust, config, outside, token = (Path(a) for a in sys.argv[1:6])
prompt = sys.stdin.read()
report = ws / "report.json"
done = json.loads(report.read_text()) if report.exists() else {}
if done:  # the second turn: what it was told, and done
    (ws / "prompt2.txt").write_text(prompt)
    print("<promise>DONE</promise>")
    sys.exit(0)
claude = ws / ".claude"

def attempt(name, action):
    try:
        action()
        done[name] = "written"
    except Exception as exc:
        done[name] = f"refused: {exc}"
        print(f"{name}: {exc}", flush=True)

def append(path, text="PWNED\n"):
    return lambda: open(path, "a").write(text)

attempt("control", append(claude / "orchestrator-loop.control.jsonl", '{"kind": "complete"}\n'))
attempt("state", lambda: (claude / "orchestrator-loop.local.md").write_text("PWNED"))
attempt("journal", append(claude / "orchestrator-loop.events.jsonl"))
attempt("logs", lambda: (claude / "loopdeck" / "PWNED").write_text("x"))
attempt("rename-claude", lambda: os.rename(claude, ws / ".claude-old"))  # then a queue of its own
attempt("rename-git", lambda: os.rename(ws / ".git", ws / ".git-old"))  # then a config of its own
attempt("remove-state", lambda: os.unlink(claude / "orchestrator-loop.local.md"))
attempt("trust", lambda: (trust / "PWNED").write_text("x"))
attempt("config", lambda: (config / "config.toml").write_text('sandbox = "off"\n'))
attempt("hooks", lambda: (ws / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\ntouch PWNED\n"))
fsmonitor = subprocess.run(["git", "config", "core.fsmonitor", "touch PWNED"], cwd=ws, capture_output=True, text=True)
done["fsmonitor"] = fsmonitor.returncode
print(fsmonitor.stderr.strip(), flush=True)
attempt("outside", lambda: outside.write_text("x"))
attempt("home", lambda: (Path(os.environ["HOME"]) / "PWNED").write_text("x"))
attempt("var", lambda: Path("/var/tmp/loopdeck-PWNED-" + token.name).write_text("x"))
attempt("commondir", lambda: (ws / ".git" / "commondir").write_text("../evil\n"))  # git's config elsewhere
attempt("settings", lambda: (claude / "settings.json").write_text('{"hooks": {}}'))
attempt("workspace", lambda: (ws / "work.txt").write_text("done"))
attempt("package", lambda: ((ws / "loop").mkdir(exist_ok=True), (ws / "loop" / "__init__.py").write_text("raise SystemExit(9)\n")))
done["env"] = sorted(os.environ)
subprocess.Popen(["setsid", sys.executable, "-c", "import time; time.sleep(300)", token.name],
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
report.write_text(json.dumps(done))
print("turn one over", flush=True)
"""


def test_a_sandboxed_run_keeps_loopdeck_git_and_everything_outside_the_workspace_from_its_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_bwrap()
    root = tmp_path / "ws"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    hooks_before = sorted(p.name for p in (root / ".git" / "hooks").iterdir())
    config_before = (root / ".git" / "config").read_text()
    trust = Path(os.environ["LOOPDECK_TRUST_HOME"])
    xdg = tmp_path / "config"
    (xdg / "loopdeck").mkdir(parents=True)
    home = tmp_path / "home"
    home.mkdir()
    outside = tmp_path / "outside.txt"
    token = f"loopdeck-sandbox-{secrets.token_hex(6)}"
    script = root / "agent.py"
    script.write_text(TRYING_AGENT)
    command = f"{sys.executable} {script} {root} {trust} {xdg / 'loopdeck'} {outside} /{token}"
    env = {**os.environ, "XDG_CONFIG_HOME": str(xdg), "HOME": str(home), "GITHUB_TOKEN": "ghp_secret"}
    args = ["run", "Try everything", "--agent", command, "--completion-promise", "DONE", "--headless"]
    args += ["--yes", "--no-tasks", "--no-github", "--sandbox", "on", "--max-iterations", "3"]
    try:
        done = subprocess.run(
            [*loopdeck_cmd(), "-C", str(root), *args], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "sandbox: bwrap (bubblewrap" in done.stdout
        assert _wait_gone(token) == []  # the setsid child died with the turn's PID namespace
    finally:
        for pid in alive_with(token):
            os.kill(pid, 9)
    report = json.loads((root / "report.json").read_text())
    for name in ("control", "state", "journal", "logs", "hooks", "var"):
        assert report[name].startswith("refused:") and "Read-only file system" in report[name], name
    for name in ("rename-claude", "rename-git", "remove-state"):
        assert "Device or resource busy" in report[name], report[name]
    assert not (root / ".claude-old").exists() and not (root / ".git-old").exists()
    assert report["fsmonitor"] != 0
    assert (root / ".git" / "config").read_text() == config_before
    assert sorted(p.name for p in (root / ".git" / "hooks").iterdir()) == hooks_before
    assert not (trust / "PWNED").exists() and not (xdg / "loopdeck" / "config.toml").exists()
    assert not outside.exists() and not (home / "PWNED").exists()
    assert not Path(f"/var/tmp/loopdeck-PWNED-{token}").exists()
    assert report["workspace"] == "written" and (root / "work.txt").read_text() == "done"
    # created where no read-only mount could cover them: taken back after the turn, kept aside
    assert not (root / ".git" / "commondir").exists() and not (root / ".claude" / "settings.json").exists()
    kept = sorted(p.name.split("-", 2)[-1] for p in (root / ".claude" / "loopdeck" / "refused").iterdir())
    assert kept == ["commondir", "settings.json"]
    assert report["package"] == "written" and (root / "loop" / "__init__.py").exists()
    assert "GITHUB_TOKEN" not in report["env"] and "LOOPDECK_TRUST_HOME" not in report["env"]
    assert "LOOPDECK_RUN" in report["env"]
    claude = root / ".claude"
    for name in ("orchestrator-loop.events.jsonl", "orchestrator-loop.control.jsonl"):
        lines = (claude / name).read_text().splitlines()
        assert "PWNED" not in lines and '{"kind": "complete"}' not in lines
    events = [
        json.loads(line) for line in (claude / "orchestrator-loop.events.jsonl").read_text().splitlines()
    ]
    refused = [e for e in events if e["kind"] == "sandbox-refused"]
    assert refused and len(refused[0]["data"]["lines"]) <= 5
    second = (root / "prompt2.txt").read_text()
    assert second.count("The sandbox refused: ") == 1 and "this is expected" in second
    status = subprocess.run(
        [*loopdeck_cmd(), "-C", str(root), "status", "--json"], capture_output=True, text=True, env=env
    )
    assert status.returncode == 0, status.stderr


def _agent_script(tmp: Path, code: str) -> str:
    script = tmp / "agent.py"
    script.write_text(code)
    return f"{sys.executable} {script}"


def test_a_setsid_child_dies_with_the_turn_in_the_sandbox_even_without_a_sweep(tmp_path: Path) -> None:
    status = real_bwrap()
    root = tmp_path / "ws"
    root.mkdir()
    token = f"loopdeck-setsid-{secrets.token_hex(6)}"
    code = (
        "import subprocess, sys\n"
        f"subprocess.Popen(['setsid', sys.executable, '-c', 'import time; time.sleep(300)', {token!r}],"
        " stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "print('left one behind')\n"
    )
    command = _agent_script(root, code)
    try:
        ran = agent.run(
            command, "go", root, root / "turn.log", 30, lambda: None, sandbox=(Spec(root, root), status)
        )
        assert ran.exit_code == 0, ran.tail
        assert _wait_gone(token, 5) == []
    finally:
        for pid in alive_with(token):
            os.kill(pid, 9)


def test_without_the_network_the_agent_cannot_reach_a_listener_on_the_host(tmp_path: Path) -> None:
    status = real_bwrap()
    root = tmp_path / "ws"
    root.mkdir()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]
    code = (
        "import socket\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=5).close()\n"
        "    print('CONNECTED')\n"
        "except OSError as exc:\n"
        "    print('BLOCKED', exc)\n"
    )
    command = _agent_script(root, code)
    try:
        for network, said in ((False, b"BLOCKED"), (True, b"CONNECTED")):
            spec = Spec(root, root, network=network)
            ran = agent.run(command, "go", root, root / "turn.log", 30, lambda: None, sandbox=(spec, status))
            assert said in ran.tail, ran.tail
    finally:
        listener.close()


@pytest.mark.parametrize("ending", ["completed", "SIGTERM"])
def test_without_the_sandbox_the_last_turn_leaves_no_setsid_child_behind(ws: Workspace, ending: str) -> None:
    """The sweep's part: with the sandbox off, the runner's end (a completed loop, a SIGTERM in
    the middle of a turn) kills the marked `setsid` children of its last turn."""
    root = ws.root
    token = f"loopdeck-left-{secrets.token_hex(6)}"
    wait = "import time; time.sleep(60)\n" if ending == "SIGTERM" else "print('<promise>DONE</promise>')\n"
    code = (
        "import subprocess, sys\n"
        f"p = subprocess.Popen(['setsid', sys.executable, '-c', 'import time; time.sleep(300)', {token!r}],"
        " stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        f"open({str(root / 'left.pid')!r}, 'w').write(str(p.pid))\n"
        "print('left', flush=True)\n" + wait
    )
    command = _agent_script(root, code)
    args = ["run", "Go", "--agent", command, "--completion-promise", "DONE", "--headless", "--yes"]
    args += ["--no-tasks", "--no-github", "--sandbox", "off"]
    runner = subprocess.Popen(
        [*loopdeck_cmd(), "-C", str(root), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        if ending == "SIGTERM":
            deadline = time.monotonic() + 30
            while not alive_with(token) and time.monotonic() < deadline:
                time.sleep(0.02)
            assert alive_with(token), "the agent never started its child"
            runner.terminate()
        out, _ = runner.communicate(timeout=60)
        assert runner.returncode == (143 if ending == "SIGTERM" else 0), out
        assert b"sandbox: off: turned off" in out
        with pytest.raises(ProcessLookupError):  # gone, not even a zombie left to the system's init
            os.kill(int((root / "left.pid").read_text()), 0)
        assert _wait_gone(token, 0.5) == []
    finally:
        if runner.poll() is None:
            runner.kill()
        for pid in alive_with(token):
            os.kill(pid, 9)


def test_a_process_the_sweep_sees_die_between_its_two_looks_is_reaped_not_left_a_zombie(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A killed orphan that died between `gone`'s `waitpid` and its look at the status was
    taken for gone and left a zombie, which outlived the runner (to `kill -0`, it survived)."""
    import signal

    from loop.processes import sweep

    child = subprocess.Popen(["sleep", "300"])
    os.kill(child.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    real = os.waitpid
    looks = []

    def first_look_too_early(pid: int, options: int) -> tuple[int, int]:
        looks.append(pid)
        return (0, 0) if len(looks) == 1 else real(pid, options)

    monkeypatch.setattr(os, "waitpid", first_look_too_early)
    assert sweep.gone(child.pid)
    monkeypatch.setattr(os, "waitpid", real)
    with pytest.raises(ProcessLookupError):
        os.kill(child.pid, 0)
    child.returncode = -9  # reaped by the sweep: Popen must not wait for it again


def test_status_shows_the_sandbox_the_runner_chose_from_its_options_or_the_saved_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--sandbox on --sandbox-net off` on the command line; `sandbox = "off"` in the user's
    file when the command line and LOOPDECK_SANDBOX say nothing."""
    real_bwrap()
    monkeypatch.delenv("LOOPDECK_SANDBOX")
    xdg = tmp_path / "config"
    (xdg / "loopdeck").mkdir(parents=True)
    (xdg / "loopdeck" / "config.toml").write_text('sandbox = "off"\n')
    env = {**os.environ, "XDG_CONFIG_HOME": str(xdg)}
    for given, expected in (
        (["--sandbox", "on", "--sandbox-net", "off", "--sandbox-env", "MY_TOOL"], "bwrap (bubblewrap"),
        ([], "off: turned off"),
    ):
        root = tmp_path / f"ws{len(given)}"
        root.mkdir()
        (root / "TODO.md").write_text("- [ ] one\n")  # left open: the loop waits for a person
        args = ["run", "Go", "--agent", "true", "--headless", "--yes", "--no-tasks", "--no-github"]
        args += ["--task-file", "TODO.md", "--max-iterations", "1", *given]
        ran = subprocess.run(
            [*loopdeck_cmd(), "-C", str(root), *args], env=env, capture_output=True, text=True
        )
        assert f"sandbox: {expected}" in ran.stdout, ran.stdout + ran.stderr
        shown = subprocess.run(
            [*loopdeck_cmd(), "-C", str(root), "status", "--json"], env=env, capture_output=True, text=True
        )
        boxed = json.loads(shown.stdout)["loop"]["sandbox"]
        assert boxed.startswith(expected) and (not given or boxed.endswith("network off")), boxed
        text = subprocess.run(
            [*loopdeck_cmd(), "-C", str(root), "status"], env=env, capture_output=True, text=True
        )
        assert any(line.startswith("sandbox") and expected in line for line in text.stdout.splitlines())
        _state, bar = bar_line(read_snapshot(Workspace(root)), datetime.now(UTC))  # the monitor's top line
        assert ("· sandboxed ·" in bar) == bool(given) and ("NO SANDBOX" in bar) == (not given), bar


def test_a_temporal_workers_turn_runs_in_the_sandbox_its_worktree_writable_its_git_config_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_bwrap()
    pytest.importorskip("temporalio", reason="the Temporal engine is not installed")
    from temporalio.testing import ActivityEnvironment

    from loop.temporal.activities import Activities, Settings
    from tests.temporal_support import project
    from tests.test_temporal import turn_for

    proj = project(tmp_path)
    command = (
        'sh -c \'cat > /dev/null; echo "task 5: done" >> README.md; '
        "git config core.fsmonitor pwned; echo > ../PWNED; env > seen.env; echo finished'"
    )
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_not_for_the_agent")
    acts = Activities(Settings(work_dir=tmp_path / "work", agents=(command,), heartbeat_s=0.05, sandbox="on"))
    assert acts.box.kind == "bwrap"
    out = ActivityEnvironment().run(acts.turn, turn_for(proj.remote, command))
    assert out.failure is None and out.changed is not None and "README.md" in out.changed
    repo = acts.cache.repo(str(proj.remote))
    assert "fsmonitor" not in (repo / "config").read_text()
    assert not list((tmp_path / "work").rglob("PWNED"))
    seen = subprocess.run(
        ["git", "show", f"{out.sha}:seen.env"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout
    assert "GITHUB_TOKEN" not in seen and "LOOPDECK_WORKER=worker-1" in seen


PLANTED_CHECK = r"""
import os, sys
from pathlib import Path
# a check the agent wrote (a conftest.py, a Makefile would do the same): it runs as loopdeck's
# verification, so it must not reach what the agent cannot
trust = Path(sys.argv[1])
for name, action in (
    ("control", lambda: open(".claude/orchestrator-loop.control.jsonl", "a").write('{"kind": "complete"}\n')),
    ("key", lambda: print(sorted(os.listdir(trust)))),
    ("trust", lambda: (trust / "PWNED").write_text("x")),
):
    try:
        action()
        print(name, "done")
    except Exception as exc:
        print(name, "refused:", exc)
"""


def test_verification_runs_in_the_sandbox_so_a_check_the_agent_wrote_cannot_steer_the_loop(
    tmp_path: Path,
) -> None:
    real_bwrap()
    root = tmp_path / "ws"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "check.py").write_text(PLANTED_CHECK)
    trust = Path(os.environ["LOOPDECK_TRUST_HOME"])
    (trust / "control.key").write_bytes(b"k" * 32)  # what a person's commands are signed with
    check = f"{sys.executable} check.py {trust}"
    agent_cmd = _agent_script(root, "print('<promise>DONE</promise>')")  # /tmp is private: in the workspace
    args = ["run", "Check it", "--agent", agent_cmd, "--completion-promise", "DONE", "--headless", "--yes"]
    args += ["--no-tasks", "--no-github", "--sandbox", "on", "--max-iterations", "2"]
    args += ["--verify", check, "--verify-allow", check]
    done = subprocess.run(
        [*loopdeck_cmd(), "-C", str(root), *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    control = (root / ".claude" / "orchestrator-loop.control.jsonl").read_text()
    assert '"complete"' not in control
    assert not (trust / "PWNED").exists()
    journal = (root / ".claude" / "orchestrator-loop.events.jsonl").read_text()
    # the queue read-only, the trust folder an empty one of its own (what it wrote there is gone)
    assert "control refused" in journal and "control.key" not in journal and "key done" in journal


def test_what_the_sandbox_refused_is_read_where_each_cli_keeps_its_tools_output(tmp_path: Path) -> None:
    """Claude Code's print mode keeps its Bash output in the session's transcript; Codex quotes
    it in its JSON lines: the refusals are read there, decoded, not from the final text."""
    from loop.agents.claude import Claude
    from loop.agents.codex import Codex

    home, cwd = tmp_path / "home", tmp_path / "ws"
    result = json.dumps({"type": "result", "subtype": "success", "result": "done", "session_id": "s1"})
    folder = home / ".claude" / "projects" / str(cwd).replace("/", "-").replace("_", "-")
    folder.mkdir(parents=True)
    said = "(eval):1: read-only file system: .claude/orchestrator-loop.control.jsonl"
    block = {"type": "tool_result", "tool_use_id": "t1", "content": said}
    (folder / "s1.jsonl").write_text(json.dumps({"type": "user", "message": {"content": [block]}}) + "\n")
    tools = Claude().tool_output(result, cwd, {"HOME": str(home)})
    assert tools is not None and refusal.lines(tools.encode()) == [said]
    quoted = {
        "type": "item.completed",
        "item": {"type": "command_execution", "aggregated_output": said + "\n"},
    }
    tools = Codex().tool_output(json.dumps(quoted), cwd, {})
    assert tools is not None and refusal.lines(tools.encode()) == [said]


BESIDE_AGENT = r"""
import os, sys
from pathlib import Path
common, home = Path(sys.argv[1]), Path(sys.argv[2])
tries = {
    # point loopdeck's git (merging another task meanwhile) at a config of the agent's own
    "commondir": lambda: (common / "commondir").write_text("x\n"),
    "attributes": lambda: (common / "info").mkdir(exist_ok=True) or (common / "info" / "attributes").write_text("* filter=pwn\n"),
    "ref": lambda: (common / "refs" / "heads" / "main").write_text("0" * 40 + "\n"),
    "objects": lambda: (common / "objects" / "pwn-probe").write_text("x"),  # content-addressed: allowed
    # the CLIs' own settings: hooks and notify programs that run unconfined next session
    "claude-settings": lambda: (home / ".claude" / "settings.json").write_text('{"hooks": {}}'),
    "codex-config": lambda: (home / ".codex" / "config.toml").write_text('notify = ["touch", "PWNED"]\n'),
}
for name, attempt in tries.items():
    try:
        attempt()
        print(name, "written")
    except OSError as exc:
        print(name, "refused:", exc.strerror)
"""


def test_a_worker_beside_others_cannot_touch_the_repositorys_git_nor_the_agent_clis_settings(
    tmp_path: Path,
) -> None:
    """Workers run while loopdeck merges: the repository's git folder is theirs to read only (its
    objects aside); and no agent writes the settings its CLI reads in the person's next session."""
    status = real_bwrap()
    root = tmp_path / "ws"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "start")
    tree = tmp_path / "ws" / ".loopdeck" / "worktrees" / "t1"
    git(root, "worktree", "add", "-q", "-b", "task", str(tree))
    home = Path(os.environ["HOME"])
    (home / ".codex").mkdir()
    (home / ".codex" / "config.toml").write_text("model = 'x'\n")
    command = _agent_script(tree, BESIDE_AGENT) + f" {root / '.git'} {home}"
    ran = agent.run(
        command,
        "go",
        tree,
        tmp_path / "turn.log",
        30,
        lambda: None,
        sandbox=(Spec(tree, root, beside=True), status),
    )
    said = dict(line.split(" ", 1) for line in ran.tail.decode().splitlines() if " " in line)
    for name in ("commondir", "attributes", "ref", "codex-config"):
        assert said[name].startswith("refused"), (name, said)
    assert said["objects"] == "written"
    assert not (root / ".git" / "commondir").exists() and not (root / ".git" / "info" / "attributes").exists()
    assert (home / ".codex" / "config.toml").read_text() == "model = 'x'\n"
    # made where nothing could be mounted over it: taken back after the turn, kept aside
    assert said["claude-settings"] == "written" and not (home / ".claude" / "settings.json").exists()
    assert b"the sandbox refused creating" in ran.tail and b"settings.json" in ran.tail


REFUSED_WORKER = r"""
import os, sys
from pathlib import Path
prompt = sys.stdin.read()
seen = Path(".demo-prompts")  # the worktree's own: a worker may write its worktree
first = not seen.exists()
seen.mkdir(exist_ok=True)
(seen / f"{len(os.listdir(seen))}.txt").write_text(prompt)
if first:
    try:
        with open(".git", "a") as f:  # the worktree's pointer to its git folder: to another's
            f.write("gitdir: /elsewhere\n")
    except OSError as exc:
        print(f"git: {exc}", flush=True)
    sys.exit(1)  # a failed turn: the worker is sent back to it
from loop.demo.worker import main
sys.stdin = __import__("io").StringIO(prompt)
sys.exit(main([]))
"""


def test_a_worker_is_told_in_one_line_what_the_sandbox_refused_its_last_turn(tmp_path: Path) -> None:
    """Parallel workers as the runner's agent: the refusal journaled with the worker's name, and
    its next prompt says it in one line."""
    from loop.demo import graph as demo_graph
    from loop.demo import workspace as demo_workspace

    real_bwrap()
    root = demo_workspace.create(tmp_path / "repo", tasks=1)
    (root / "worker.py").write_text(REFUSED_WORKER)
    git(root, "add", "worker.py")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "the worker")
    folder = demo_graph.create(root / "graph", (("1", "Model", (), ("m.py",)),))
    git(root, "add", "graph")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "the graph")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    env |= {
        "GIT_AUTHOR_NAME": "t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    args = [
        "run",
        "Build it",
        "--workers",
        "2",
        "--graph",
        str(folder),
        "--agent",
        f"{sys.executable} worker.py",
    ]
    args += [
        "--headless",
        "--sandbox",
        "on",
        "--sandbox-env",
        "PYTHONPATH",
    ]
    done = subprocess.run(
        [*loopdeck_cmd(), "-C", str(root), *args], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    journal = [
        json.loads(line)
        for line in (root / ".claude" / "orchestrator-loop.events.jsonl").read_text().splitlines()
    ]
    refused = [e["data"] for e in journal if e["kind"] == "sandbox-refused"]
    assert refused and refused[0]["worker"] and "Read-only file system" in refused[0]["lines"][0]
    prompts = sorted((root / ".demo-prompts").glob("*.txt"))  # merged with the task's work
    assert len(prompts) >= 2, prompts
    assert prompts[1].read_text().count("The sandbox refused: ") == 1
