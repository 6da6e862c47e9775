"""Secrets never leave through any writer: every file under the workspace and everything sent.

One property over all of them: texts holding a secret of every form (in random surroundings:
unicode, newlines, a secret split across an agent's writes) go through every writer loopdeck
has (the state with its prompt and fields, its backup and archives, the journal, the control
queue, notifications of every kind and their failure lines, the iteration and worker logs and
prompt files, the printed summaries), and no secret's core is found in any byte of any file
under the workspace, nor in anything sent. Then the writers one by one, each with the case
that leaked before."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from loop.core.engine import decide
from loop.core.model import LoopState, StopInput, Turn
from loop.core.redact import redact
from loop.drivers import notify, writer
from loop.drivers.runner import Options, Runner
from loop.processes import agent
from loop.processes.workers import Ended, Pool
from loop.store import control
from loop.store.journal import Journal
from loop.store.paths import Workspace
from loop.store.state import StateStore, render
from loop.views.summary import Tally, archived_lines, summary_lines
from tests.test_control import person
from tests.test_engine import NOW, cmd, sources

ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
B64 = ALNUM + "+/"


def body(alphabet: str, lo: int, hi: int | None = None) -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, min_size=lo, max_size=hi or lo + 12)


Secret = tuple[str, list[str]]
"""A secret as it appears in a text, and its cores: what must never be found anywhere."""

FORMS: list[st.SearchStrategy[Secret]] = [
    body(ALNUM, 36, 36).map(lambda b: (f"ghp_{b}", [b])),
    body(ALNUM, 36, 36).map(lambda b: (f"npm_{b}", [b])),
    body(ALNUM + "_-", 20).map(lambda b: (f"sk-ant-api03-{b}", [b])),
    body(UPPER, 16, 16).map(lambda b: (f"AKIA{b}", [b])),
    st.tuples(body(UPPER, 9), body(UPPER, 9), body(ALNUM, 24, 24)).map(
        lambda p: (f"https://hooks.slack.com/services/T{p[0]}/B{p[1]}/{p[2]}", [p[2], f"T{p[0]}/B{p[1]}"])
    ),
    st.tuples(body("0123456789", 18), body(ALNUM + "_-", 64)).map(
        lambda p: (f"https://discord.com/api/webhooks/{p[0]}/{p[1]}", [p[1]])
    ),
    body(ALNUM, 14).map(lambda pw: (f"redis://:{pw}@cache.internal:6379/0", [pw])),
    st.tuples(body(ALNUM, 6), body(ALNUM, 12)).map(
        lambda p: (f"amqp://loop:{p[0]}@{p[1]}@mq.internal/vhost", [f"{p[0]}@{p[1]}", p[1]])
    ),
    st.tuples(
        st.sampled_from(["--password ", "--password=", "--db-password ", "--api-key=", "--token "]),
        body(ALNUM, 14),
    ).map(lambda p: (f"mysql {p[0]}{p[1]} --host db", [p[1]])),
    st.tuples(st.sampled_from(["DB_PASSWORD=", "OPENAI_API_KEY: ", 'secret="']), body(ALNUM, 14)).map(
        lambda p: (f"{p[0]}{p[1]}", [p[1]])
    ),
    body(ALNUM + "._-", 24).map(lambda t: (f"Authorization: Bearer {t}", [t])),
    st.lists(body(B64, 24, 40), min_size=2, max_size=3).map(
        lambda lines: (
            "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END RSA PRIVATE KEY-----",
            lines,
        )
    ),
]

AROUND = st.text(
    st.one_of(
        st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")),  # unicode, no control characters
        st.sampled_from("\n\t "),
    ),
    max_size=24,
)

SECRETS = st.tuples(*FORMS).flatmap(lambda secrets: st.permutations(list(secrets)))


class Receiver:
    """A webhook on 127.0.0.1 keeping every body it is sent; paths under /fail answer 500."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                outer.bodies.append(self.rfile.read(length))
                self.send_response(500 if self.path.startswith("/fail") else 200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.server.shutdown()


CHUNKS_CODE = (
    "import json, os, sys\n"
    "for chunk in json.load(open(os.environ['CHUNKS'], encoding='utf-8')):\n"
    "    sys.stdout.buffer.write(chunk.encode('utf-8')); sys.stdout.flush()\n"
)
"""A stand-in agent: prints the chunks it is given, one write (and flush) each."""


def new_workspace(tmp: Path) -> Workspace:
    root = Path(tempfile.mkdtemp(dir=tmp)) / "project"
    (root / ".claude").mkdir(parents=True)
    return Workspace(root)


def write_the_state_everywhere(ws: Workspace, text: str) -> LoopState:
    """The state: a file an older loopdeck wrote (the prompt raw), replaced by a new loop with
    the text in its prompt and every free-text field, written again (the backup), then
    archived as an ending and as a completion."""
    ws.state.write_text(
        f"---\niteration: 1\nmax_iterations: 5\nstatus: running\n---\n\n{text}\n", encoding="utf-8"
    )
    store = StateStore(ws)
    journal = Journal(ws.journal)
    state = LoopState.new(text, current_task=text, completion_promise=text)
    state.waiting_for = {
        "kind": "question",
        "reason": f"the agent asks: {text}",
        "since": "2026-01-09T10:00:00Z",
    }
    state.stuck = {"error": text, "task": text}
    board = {"graph": "graph", "workers": [{"name": "worker-1", "question": text, "feedback": text}]}
    state.extra.update(
        answer=text,
        notes=[text, "ok"],
        last_question=text,
        parallel=json.dumps(board, ensure_ascii=False, separators=(",", ":")),
        someone_elses={"note": text},
    )
    with store.locked():
        writer.start(ws, store, journal, state, force=True)
        again = store.read()
        assert again is not None
        again.iteration += 1
        again.current_task = text + " (again)"
        store.write(again)
        writer.archive_ending(ws, again, "stopped", {"reason": text, "agent_failures": [text]})
        # the backup goes with the archived loop: a copy of it is looked at with the rest
        (ws.claude_dir / "the-backup-before-archiving").write_bytes(ws.backup.read_bytes())
        writer.archive_completed(ws, again, {"reason": text})
    return again


def notify_everywhere(ws: Workspace, text: str, receiver: Receiver, cores: list[str]) -> list[object]:
    """Every kind of notification through the detached sender's own entry point (`main`):
    a webhook, a failing webhook whose path holds a secret, desktop, commands (one failing),
    Apprise (one failing with its URL in the error). Returns what the targets were given."""
    sent: list[object] = []

    def fake_run(argv: list[str], **_kw: Any) -> subprocess.CompletedProcess[bytes]:
        sent.append(list(argv))
        if argv[0] == "failing-notifier":
            raise subprocess.CalledProcessError(3, argv)
        return subprocess.CompletedProcess(argv, 0)

    class FakeApprise:
        def __init__(self) -> None:
            self.url = ""

        def add(self, url: str) -> bool:
            self.url = url
            return True

        def notify(self, body: str, title: str) -> bool:
            sent.append(body)
            if "fail" in self.url:
                raise RuntimeError(f"could not reach {self.url}")
            return True

    fake_apprise = types.ModuleType("apprise")
    fake_apprise.Apprise = FakeApprise  # type: ignore[attr-defined]
    events = [(kind, {"reason": text, "question": text, "until": text}) for kind in notify.NOTIFY_KINDS]
    due = notify.messages(events, text, 3)
    sent.extend(m["text"] for m in due)
    targets = [
        receiver.url + "/hook",
        f"{receiver.url}/fail/{cores[0]}",
        "desktop",
        "cmd:notifier --loud",
        "cmd:failing-notifier",
        f"apprise:tgram://{cores[0]}/1234",
        f"apprise:json://fail.example/{cores[0]}",
    ]
    job = json.dumps({"root": str(ws.root), "targets": targets, "messages": due}).encode()
    before = len(receiver.bodies)
    stdin = types.SimpleNamespace(buffer=io.BytesIO(job))
    with (
        mock.patch("subprocess.run", fake_run),
        mock.patch("shutil.which", lambda _name: "/usr/bin/notify-send"),
        mock.patch.dict(sys.modules, {"apprise": fake_apprise}),
        mock.patch("sys.stdin", stdin),
    ):
        assert notify.main() == 0
    sent.extend(receiver.bodies[before:])
    assert len(receiver.bodies) - before == 2 * len(due)
    return sent


def run_the_agent_and_a_worker(ws: Workspace, text: str, split: int) -> bytes:
    """The agent's output (a secret split across two writes) into the iteration log and a
    worker's log, the prompt into their prompt files. Returns the worker's raw tail."""
    chunks = [text[:split], text[split:], "\ndone\n"]
    feed = ws.root.parent / "chunks.json"  # outside the workspace: the test's, not loopdeck's
    feed.write_text(json.dumps(chunks), encoding="utf-8")
    env = {**os.environ, "CHUNKS": str(feed)}
    command = f"{shlex.quote(sys.executable)} -c {shlex.quote(CHUNKS_CODE)} {{prompt_file}}"
    log = ws.private_dir / "iterations" / "0001.log"
    run = agent.run(command, text, ws.root, log, timeout=60, interrupt=lambda: None, env=env)
    assert run.exit_code == 0, run
    pool = Pool()
    worker_log = ws.private_dir / "workers" / "worker-1.01.log"
    pool.start("worker-1", "worker", [sys.executable, "-c", CHUNKS_CODE], text, ws.root, worker_log, env)
    ended = wait_for_end(pool)
    assert ended.exit_code == 0, ended
    return ended.tail


def wait_for_end(pool: Pool, timeout: float = 60) -> Ended:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ended = pool.poll()
        if ended:
            return ended[0]
        time.sleep(0.01)
    raise AssertionError("the worker did not end")


def printed_summaries(ws: Workspace, text: str, state: LoopState) -> list[str]:
    """The summaries a person reads, as printed into runner.log by a detached runner."""
    tally = Tally(agent_failures=[text])
    lines = summary_lines("failed", text, tally, None, None, state)
    lines += archived_lines({"outcome": "stopped", "reason": text, "tasks": {"done": [text]}})
    runner_log = ws.private_dir / "runner.log"
    with runner_log.open("w", encoding="utf-8") as out, contextlib.redirect_stdout(out):
        runner = Runner(ws, Options())
        for line in [*lines, text]:
            runner.out(line)
    return lines


@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(SECRETS, st.lists(AROUND, min_size=13, max_size=13), st.integers(min_value=0, max_value=10_000))
def test_no_writer_lets_a_secret_out(
    tmp_path: Path, receiver: Receiver, secrets: list[Secret], around: list[str], split_at: int
) -> None:
    text = around[0] + "".join(
        f" {secret}\n{filler} " for (secret, _), filler in zip(secrets, around[1:], strict=False)
    )
    cores = [core for _, parts in secrets for core in parts]
    plain = "".join(around)
    assume(not any(core in plain for core in cores))
    ws = new_workspace(tmp_path)

    state = write_the_state_everywhere(ws, text)
    Journal(ws.journal).append("warning", 2, {"message": text, "nested": [{"why": text}]})
    control.send(ws, "say", reason=text, key=person(ws))
    control.send(ws, "answer", reason=text, key=person(ws))
    sent = notify_everywhere(ws, text, receiver, [secrets[0][1][0]])
    tail = run_the_agent_and_a_worker(ws, text, split_at % (len(text) + 1))
    printed = printed_summaries(ws, text, state)

    files = [p for p in ws.root.rglob("*") if p.is_file()]
    names = {p.relative_to(ws.root).as_posix() for p in files}
    for expected in (
        ".claude/the-backup-before-archiving",  # the live state and its backup went to the archive
        ".claude/orchestrator-loop.events.jsonl",
        ".claude/orchestrator-loop.control.jsonl",
        ".claude/loopdeck/iterations/0001.log",
        ".claude/loopdeck/iterations/0001.prompt.md",
        ".claude/loopdeck/workers/worker-1.01.log",
        ".claude/loopdeck/workers/worker-1.01.stdin",
        ".claude/loopdeck/runner.log",
    ):
        assert expected in names, sorted(names)
    assert sum(1 for name in names if name.startswith(".claude/loops/")) >= 4  # 2 archives, state + summary
    for path in files:
        data = path.read_bytes()
        for core in cores:
            assert core.encode() not in data, (core, path.relative_to(ws.root), data[:2000])
    for thing in [*sent, *printed]:
        shown = thing if isinstance(thing, bytes) else json.dumps(thing, ensure_ascii=False).encode()
        for core in cores:
            assert core.encode() not in shown and core.encode("unicode_escape") not in shown, (core, thing)
    assert any(core.encode() in tail for core in cores)  # the driver still reads what the worker said
    warnings = [e.data["message"] for e in Journal(ws.journal).tail(500).events if e.kind == "warning"]
    failed = [w for w in warnings if w.startswith("notification to")]
    assert len(failed) == 3 * len(notify.NOTIFY_KINDS), failed  # each failing target, each message


# --- each writer, with the case that leaked --------------------------------------------------------

GHP = "ghp_" + "Ab1" * 12
REDIS = "redis://:r3disPassw0rdXyz@cache:6379"


def test_the_state_keeps_the_prompt_and_every_field_redacted(ws: Workspace) -> None:
    prompt = f"Deploy it: use token {GHP} and {REDIS}"
    state = LoopState.new(prompt, current_task=f"rotate {GHP}", completion_promise="DONE")
    state.waiting_for = {"kind": "question", "reason": f"the agent asks: is {REDIS} right?", "since": "x"}
    state.extra["answer"] = f"use --password hunter2hunter2 for {GHP}"
    store = StateStore(ws)
    writer.start(ws, store, Journal(ws.journal), state)
    raw = ws.state.read_text()
    assert GHP not in raw and "r3disPassw0rd" not in raw and "hunter2" not in raw
    back = store.read()
    assert back is not None
    assert back.prompt == "Deploy it: use token [REDACTED] and redis://:[REDACTED]@cache:6379"
    assert back.current_task == "rotate [REDACTED]"
    assert back.extra["answer"] == "use --password [REDACTED] for [REDACTED]"
    assert store.checked(back) == ws.state.read_bytes()  # read back and written again: unchanged


def test_commands_paths_and_targets_stay_as_given_in_the_live_state_and_go_in_the_archive(
    ws: Workspace,
) -> None:
    """A token inside a command the loop runs, or a webhook it posts to, is what makes it work:
    the live state keeps them; its archive (nothing runs from it) does not."""
    hook = "https://hooks.slack.com/services/T0AAAAAAA/B0BBBBBBB/cccccccccccccccccccccccc"
    check = "make check TOKEN_FILE=/run/tok API_KEY=abcdefghijklmnop"
    state = LoopState.new("x", verify=[check], notify=[hook, "apprise:tgram://111:222/333"])
    state.extra["runner"] = {"agent": "claude -p --api-key sk-ant-abcdefghijklmn"}
    store = StateStore(ws)
    writer.start(ws, store, Journal(ws.journal), state)
    back = store.read()
    assert back is not None
    assert (
        back.verify == [check]
        and back.notify == state.notify
        and back.extra["runner"] == state.extra["runner"]
    )
    folder = writer.archive_completed(ws, back, {"reason": "done"})
    archived = (folder / "state.md").read_text()
    assert not ws.state.exists()
    for secret in ("cccccccc", "T0AAAAAAA", "abcdefghijklmnop", "sk-ant-abcdefghijklmn", "111:222"):
        assert secret not in archived, (secret, archived)
    assert "https://hooks.slack.com/\u2026" in archived and "apprise:tgram://\u2026" in archived


def test_a_backup_of_a_state_written_before_redaction_is_redacted(ws: Workspace) -> None:
    ws.state.write_text(f"---\niteration: 3\nmax_iterations: 9  # {GHP}\n---\n\nuse {GHP}\n")
    store = StateStore(ws)
    state = store.read()
    assert state is not None
    state.iteration = 4
    store.write(state)
    for path in (ws.state, ws.backup):
        assert GHP not in path.read_text(), path
    backup = store.read_backup()
    assert backup is not None and backup.iteration == 3 and backup.prompt == "use [REDACTED]"


def test_an_unchanged_clean_state_is_written_back_byte_for_byte(ws: Workspace) -> None:
    text = (
        "---\n# notes\niteration: 2\nmax_iterations: 5\nnotify: [https://hooks.slack.com/services/T1/B2/c3]\n"
        'current_task: "rotate the API key"\n---\n\nThe key and the token are in the vault.\n'
    )
    ws.state.write_text(text)
    store = StateStore(ws)
    state = store.read()
    assert state is not None
    assert render(state) == text  # nothing to redact (the target stays as given): not one byte moves


def test_a_parallel_board_stays_json_when_it_holds_a_secret(ws: Workspace) -> None:
    from loop.core import scheduler

    board = scheduler.Board(
        graph="/g",
        audit="make audit --token abcdefghijklmnop",
        workers=(scheduler.Worker("worker-1", "1", ("a.py",), "t", question=f"may I use {GHP}?"),),
    )
    state = scheduler.keep(LoopState.new("x"), board)
    store = StateStore(ws)
    writer.start(ws, store, Journal(ws.journal), state)
    back = store.read()
    assert back is not None and GHP not in ws.state.read_text()
    again = scheduler.board_of(back)
    assert again.audit == board.audit and again.graph == "/g"  # what runs stays as given
    assert again.workers[0].question == "may I use [REDACTED]?"


def test_the_same_error_is_counted_across_a_state_read_back_from_its_file(ws: Workspace) -> None:
    """The state keeps an error signature redacted; the next turn's error arrives raw: they
    are still the same error."""
    store = StateStore(ws)
    state = LoopState.new("x", driver="runner", iteration=1)
    store.write(state)
    error = f"fatal: could not read from {REDIS}: auth failed (token {GHP})"
    for _ in range(3):
        current = store.read()
        assert current is not None
        turn = Turn(error=error, changed=True)
        stop = StopInput(last_text="x", driver="runner", turn=turn, verification_failure=error)
        result = decide(current, stop, [], sources(task_file=2), NOW)
        assert result.state is not None
        store.write(result.state)
    final = store.read()
    assert final is not None and final.waiting_for is not None
    assert final.waiting_for["reason"] == "the same error 3 times in a row"


def test_a_question_holding_a_secret_is_not_asked_twice(ws: Workspace) -> None:
    store = StateStore(ws)
    store.write(LoopState.new("x", session_id="s1"))
    stop = StopInput(f"<question>Is {GHP} the right token?</question>", session_id="s1")
    first = store.read()
    assert first is not None
    asked = decide(first, stop, [], sources(task_file=1), NOW)
    assert asked.state is not None and asked.state.waiting_kind == "question"
    assert ("question", {"question": "Is [REDACTED] the right token?"}) in asked.events
    store.write(asked.state)
    second = store.read()
    assert second is not None
    answered = decide(second, stop, [cmd("answer", reason="yes")], sources(task_file=1), NOW)
    assert answered.blocked and "question" not in [kind for kind, _ in answered.events]


def test_the_control_queue_keeps_no_secret(ws: Workspace) -> None:
    command = control.send(ws, "say", reason=f"the db is {REDIS}, the token {GHP}", key=person(ws))
    raw = ws.control.read_text()
    assert GHP not in raw and "r3disPassw0rd" not in raw
    assert command.reason == "the db is redis://:[REDACTED]@cache:6379, the token [REDACTED]"
    (read,), _bad, _end = control.read_since(ws.control, 0)
    assert read.reason == command.reason


def test_notification_texts_and_webhook_bodies_are_redacted(receiver: Receiver, tmp_path: Path) -> None:
    due = notify.messages([("question", {"question": f"use {GHP} with {REDIS}?"})], "proj", 2)
    assert (
        due[0]["text"]
        == "loopdeck: the agent asks: use [REDACTED] with redis://:[REDACTED]@cache:6379? [proj, iteration 2]"
    )
    before = len(receiver.bodies)
    notify.send(receiver.url + "/hook", {"kind": "question", "text": f"raw {GHP}", "iteration": 2}, tmp_path)
    body = json.loads(receiver.bodies[before])
    assert body["text"] == "raw [REDACTED]"


def test_a_failed_notification_names_the_target_by_scheme_and_host(ws: Workspace) -> None:
    slack = "https://hooks.slack.com/services/T0AAAAAAA/B0BBBBBBB/cccccccccccccccccccccccc"
    line = notify.failure_line(slack, ValueError(f"unknown url type: {slack!r}"))
    assert (
        line
        == "notification to https://hooks.slack.com/\u2026 failed: ValueError: unknown url type: 'https://hooks.slack.com/\u2026'"
    )
    failed = notify.failure_line(
        "cmd:notify-me", subprocess.CalledProcessError(2, ["notify-me", f"text {GHP}"])
    )
    assert failed == "notification to cmd:notify-me failed: CalledProcessError: exit status 2"
    discord = "apprise:discord://123456/tokentokentoken"
    line = notify.failure_line(discord, RuntimeError("discord://123456/tokentokentoken refused"))
    assert "tokentoken" not in line and line.startswith("notification to apprise:discord://\u2026 failed")


def test_a_worker_log_is_redacted_and_its_tail_is_not(ws: Workspace) -> None:
    """A worker's output goes to its log redacted, a line at a time; the driver still gets the
    raw tail it reads the worker's last words from."""
    code = (
        "import sys, time\n"
        "w = sys.stdout.write\n"
        f"w('token {GHP[:10]}'); sys.stdout.flush(); time.sleep(0.05)\n"
        f"w('{GHP[10:]}\\n-----BEGIN RSA PRIVATE KEY-----\\nMIIEcGFydG9uZQ\\n'); sys.stdout.flush(); time.sleep(0.05)\n"
        "w('cGFydHR3bw\\n-----END RSA PRIVATE KEY-----\\nDB_PASSWORD=hunter2hunter2\\ndone\\n')\n"
    )
    pool = Pool()
    log = ws.private_dir / "workers" / "worker-1.01.log"
    pool.start("worker-1", "worker", [sys.executable, "-c", code], f"prompt with {GHP}", ws.root, log)
    ended = wait_for_end(pool)
    text = log.read_text()
    assert (
        GHP not in text
        and "MIIEcGFydG9uZQ" not in text
        and "cGFydHR3bw" not in text
        and "hunter2" not in text
    )
    assert text.endswith("DB_PASSWORD=[REDACTED]\ndone\n")
    assert GHP.encode() in ended.tail and ended.tail.endswith(b"done\n")
    assert GHP not in log.with_suffix(".stdin").read_text()


def test_a_worker_that_cannot_start_is_reported(ws: Workspace) -> None:
    pool = Pool()
    log = ws.private_dir / "workers" / "worker-1.01.log"
    pool.start("worker-1", "worker", [str(ws.root / "no-such-program")], None, ws.root, log)
    (ended,) = pool.poll()
    assert ended.exit_code is None and ended.error and "cannot start" in ended.error


def test_a_worker_whose_child_holds_its_output_open_still_ends(ws: Workspace) -> None:
    """Something the worker started outside its process group keeps the pipe open: the pool
    stops waiting for the output and reports the end."""
    code = (
        "import subprocess, sys\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'], start_new_session=True)\n"
        "print(child.pid, flush=True)\n"
    )
    pool = Pool()
    log = ws.private_dir / "workers" / "worker-1.01.log"
    with mock.patch("loop.processes.workers.DRAIN_S", 0.3):
        pool.start("worker-1", "worker", [sys.executable, "-c", code], None, ws.root, log)
        ended = wait_for_end(pool)
    child = int(ended.tail)
    with contextlib.suppress(ProcessLookupError):
        os.kill(child, 9)  # the one this test started
    assert ended.exit_code == 0 and log.read_text() == f"{child}\n"


def test_the_agent_is_given_its_prompt_redacted_in_every_form(ws: Workspace) -> None:
    argv, uses_stdin = agent.argv_for(
        "my-agent --prompt {prompt} --file {prompt_file}", f"use {GHP}", ws.root / "p.md"
    )
    assert (
        not uses_stdin and argv[2] == "use [REDACTED]" and (ws.root / "p.md").read_text() == "use [REDACTED]"
    )


def test_what_the_runner_prints_is_redacted(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    Runner(ws, Options()).out(f"agent failed: {REDIS}")
    assert capsys.readouterr().out == "agent failed: redis://:[REDACTED]@cache:6379\n"


def test_an_error_line_is_redacted(ws: Workspace, cli: Any) -> None:
    done = cli("start", "x", "--task-file", f"TODO-{GHP}.md", "--no-github")
    assert done.code == 1 and GHP not in done.err and "TODO-[REDACTED].md" in done.err


def test_a_state_read_back_renders_as_it_was_written(ws: Workspace) -> None:
    """Redacting is idempotent, so a state written redacted and read back renders the same
    bytes again: nothing is redacted twice into something else."""
    text = f"{GHP} {REDIS} --password=x1y2z3w4 Authorization: Bearer abcdefghijklmnopqrstu"
    once = redact(text)
    assert redact(once) == once
    store = StateStore(ws)
    store.write(LoopState.new(text, current_task=text))
    written = ws.state.read_bytes()
    back = store.read()
    assert back is not None and render(back).encode() == written
