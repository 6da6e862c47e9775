from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loop.core.errors import LockTimeout
from loop.store.paths import Workspace
from loop.store.state import LoopState, StateError, StateStore, parse, render
from tests.conftest import REPO, SEED_STATE


def test_seed_example_round_trips_byte_for_byte(ws: Workspace) -> None:
    ws.state.write_text(SEED_STATE)
    store = StateStore(ws)
    state = store.read()
    assert state is not None
    assert state.iteration == 5
    assert state.max_iterations == 100
    assert state.promise is None and state.task_path is None
    assert state.started_at == "2026-01-09T10:30:00+00:00"
    assert state.prompt == "Initial task prompt goes here..."
    assert render(state) == SEED_STATE
    store.write(state)
    assert ws.state.read_text() == SEED_STATE


def test_change_keeps_unknown_keys_order_comments_and_body(ws: Workspace) -> None:
    text = textwrap.dedent("""\
        ---
        # written by hand
        custom_flag: yes   # a comment
        iteration: 2
        nested:
          a: 1
          b: [x, y]
        max_iterations: 10
        started_at: 2026-01-09T10:30:00+00:00
        ---

        Do the thing.

          indented line, trailing spaces   \n\n""")
    ws.state.write_text(text)
    store = StateStore(ws)
    state = store.read()
    assert state is not None
    assert state.extra == {"custom_flag": True, "nested": {"a": 1, "b": ["x", "y"]}}
    state.iteration = 3
    state.status = "paused"
    store.write(state)
    out = ws.state.read_text()
    assert out == text.replace("iteration: 2", "iteration: 3").replace(
        "---\n\nDo", 'status: "paused"\n---\n\nDo'
    )
    again = store.read()
    assert again is not None and again.iteration == 3 and again.status == "paused"
    assert again.body == state.body


def test_strings_survive_any_content(ws: Workspace) -> None:
    store = StateStore(ws)
    weird = 'a "quoted" \\ back: slash\ttab\u2028sep 😀 # not a comment\nnewline'
    state = LoopState.new("prompt", completion_promise=weird, current_task="- [ ] x: y")
    state.verify = ["pytest -q", "echo 'a: b'"]
    store.write(state)
    back = store.read()
    assert back is not None
    assert back.completion_promise == weird
    assert back.current_task == "- [ ] x: y"
    assert back.verify == ["pytest -q", "echo 'a: b'"]


def test_crlf_file_round_trips(ws: Workspace) -> None:
    data = SEED_STATE.replace("\n", "\r\n").encode()
    ws.state.write_bytes(data)
    store = StateStore(ws)
    state = store.read()
    assert state is not None
    store.write(state)
    assert ws.state.read_bytes() == data


CORRUPT = {
    "empty": (b"", 1, "empty file"),
    "no front matter": (b"iteration: 5\nmax_iterations: 3\n", 1, "first line must be '---'"),
    "unclosed": (b"---\niteration: 5\nmax_iterations: 3\n", 3, "never closed"),
    "bad yaml": (b"---\niteration: 5\nmax_iterations: [1, 2\nx: 1\n---\nbody\n", None, "not valid YAML"),
    "truncated yaml": (b'---\niteration: 5\ncompletion_promise: "DO\n', None, "never closed"),
    "binary": (bytes(range(256)) * 4, 1, "binary data"),
    "not utf-8": (b"---\niteration: 5\nmax_iterations: 3\ntask_file: \xff\xfe\n---\n", 4, "not UTF-8"),
    "wrong type": (
        b'---\niteration: "five"\nmax_iterations: 3\n---\n',
        2,
        "iteration: expected a whole number",
    ),
    "bool for int": (b"---\niteration: 1\nmax_iterations: true\n---\n", 3, "max_iterations: expected"),
    "negative": (b"---\niteration: -1\nmax_iterations: 3\n---\n", 2, "expected a whole number >= 0"),
    "bad status": (
        b"---\niteration: 1\nmax_iterations: 3\nstatus: dancing\n---\n",
        4,
        "status: expected one of",
    ),
    "list front matter": (b"---\n- a\n- b\n---\n", 2, "expected key: value pairs"),
    "missing key": (b"---\nmax_iterations: 3\n---\nbody\n", 3, "missing key 'iteration'"),
    "verify not list": (
        b"---\niteration: 1\nmax_iterations: 3\nverify: {a: 1}\n---\n",
        4,
        "verify: expected a list",
    ),
    "huge line": (
        b"---\niteration: 1\nmax_iterations: 3\nx: " + b"a" * 5_000_000 + b"\n---\n",
        None,
        "too large",
    ),
}


@pytest.mark.parametrize("name", list(CORRUPT))
def test_corrupt_state_is_reported_and_never_overwritten(ws: Workspace, name: str) -> None:
    data, line, problem = CORRUPT[name]
    ws.state.write_bytes(data)
    store = StateStore(ws)
    with pytest.raises(StateError) as info:
        store.read()
    err = info.value
    assert str(ws.state) in str(err)
    assert problem in err.problem
    if line is not None:
        assert err.line == line, str(err)
        assert f":{line}:" in str(err)
    # A write over it is refused and the bytes stay exactly as they were.
    with pytest.raises(StateError, match="refusing to overwrite"):
        store.write(LoopState.new("new"))
    assert ws.state.read_bytes() == data


def test_yaml_error_names_the_file_line(ws: Workspace) -> None:
    ws.state.write_text("---\niteration: 1\nmax_iterations: 3\nbad: [unclosed\nother: 2\n---\n")
    with pytest.raises(StateError) as info:
        StateStore(ws).read()
    assert info.value.line is not None and info.value.line >= 4


def test_replace_corrupt_moves_it_aside(ws: Workspace) -> None:
    ws.state.write_bytes(b"garbage")
    StateStore(ws).write(LoopState.new("fresh"), replace_corrupt=True)
    aside = list(ws.claude_dir.glob("orchestrator-loop.local.md.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == b"garbage"


def test_backup_keeps_previous_good_file_and_restores(ws: Workspace) -> None:
    store = StateStore(ws)
    state = LoopState.new("p")
    store.write(state)
    first = ws.state.read_bytes()
    state.iteration = 7
    store.write(state)
    assert ws.backup.read_bytes() == first
    ws.state.write_bytes(b"\x00broken")
    restored = store.restore_backup()
    assert restored.iteration == 0
    assert ws.state.read_bytes() == first
    assert list(ws.claude_dir.glob("*.corrupt-*"))


def test_a_write_costs_one_fsync_and_the_backup_is_the_old_file_renamed(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A decision is one fsync (the new data, before its rename); the previous file becomes the
    backup by a hard link renamed over it, never copied, and a file this store wrote is not
    read again to get there."""
    store = StateStore(ws)
    state = LoopState.new("p")
    store.write(state)
    old = os.stat(ws.state).st_ino
    synced: list[int] = []
    read: list[Path] = []
    real_fsync, real_read = os.fsync, Path.read_bytes

    def fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    def read_bytes(self: Path) -> bytes:
        read.append(self)
        return real_read(self)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    for n in range(1, 4):
        state.iteration = n
        store.write(state)
        assert (
            os.stat(ws.backup).st_ino == old
        )  # the file it replaced, renamed (a freed number may come back)
        old = os.stat(ws.state).st_ino
    assert len(synced) == 3
    assert ws.state not in read
    assert StateStore(ws).read_backup() is not None and StateStore(ws).read_backup().iteration == 2  # type: ignore[union-attr]


def test_a_file_changed_behind_the_store_is_checked_before_it_becomes_the_backup(ws: Workspace) -> None:
    store = StateStore(ws)
    state = LoopState.new("p")
    store.write(state)
    ws.state.write_bytes(b"\x00garbage written by someone else")
    with pytest.raises(StateError, match="refusing to overwrite a corrupt state"):
        store.write(state)
    assert ws.state.read_bytes() == b"\x00garbage written by someone else"


def test_lock_times_out_with_a_clear_error(ws: Workspace) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import sys, time
            from loop.store.paths import Workspace
            from loop.store.state import StateStore
            from pathlib import Path
            store = StateStore(Workspace(Path({str(ws.root)!r})))
            with store.locked():
                print("held", flush=True)
                time.sleep(30)
        """),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        store = StateStore(ws, lock_timeout=0.2)
        with pytest.raises(LockTimeout, match="loop lock"):
            store.write(LoopState.new("p"))
    finally:
        holder.kill()
        holder.wait()
    # The kernel drops a dead holder's lock: no stale lock after a crash.
    StateStore(ws, lock_timeout=2).write(LoopState.new("p"))


def test_lock_is_reentrant(ws: Workspace) -> None:
    store = StateStore(ws, lock_timeout=0.5)
    with store.locked(), store.locked():
        store.write(LoopState.new("p"))


WRITER = """
import sys
from pathlib import Path
from loop.store.paths import Workspace
from loop.store.state import LoopState, StateStore
store = StateStore(Workspace(Path(sys.argv[1])))
state = store.read() or LoopState.new("prompt " * 200)
print("ready", flush=True)
for i in range(200):
    state.iteration = i
    state.current_task = "task %d " % i * (i % 17)
    store.write(state)
print("done", flush=True)
"""


def test_sigkill_during_writes_never_leaves_an_unreadable_file(ws: Workspace) -> None:
    import random

    rng = random.Random(1234)
    StateStore(ws).write(LoopState.new("prompt"))
    kills = 0
    for _ in range(12):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(ws.root)], cwd=REPO, stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0, 0.15))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += proc.returncode == -signal.SIGKILL
        state = StateStore(ws).read()  # must never raise
        assert state is not None and 0 <= state.iteration < 200
        StateStore(ws).read_backup()  # the backup must never be torn either
    assert kills >= 6  # most kills landed mid-run, not after it finished
    StateStore(ws).write(LoopState.new("after"))
    assert not [p for p in ws.claude_dir.iterdir() if p.name.endswith(".tmp")]


def test_parse_never_crashes_on_random_bytes() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=300, deadline=None)
    @given(st.binary(max_size=400) | st.text(max_size=400).map(lambda t: ("---\n" + t).encode()))
    def check(data: bytes) -> None:
        try:
            parse(data, Path("x.md"))
        except StateError as exc:
            assert str(exc).startswith("x.md")

    check()


def test_iteration_as_string_names_line(ws: Workspace) -> None:
    ws.state.write_text(SEED_STATE.replace("iteration: 5", 'iteration: "five"'))
    with pytest.raises(StateError) as info:
        StateStore(ws).read()
    assert str(info.value) == (
        f"{ws.state}:2: iteration: expected a whole number >= 0, got the string 'five'"
    )
    assert os.path.getsize(ws.state) > 0


def _yaml_reference(text: str) -> object:
    from loop.store import frontmatter

    yaml = frontmatter.yaml_module()
    return yaml.load(text, Loader=frontmatter._YAML["loader"])


scalar_text = st.one_of(
    st.text(max_size=30),
    st.text(alphabet="abcXYZ019-_.:/+T ", max_size=25),
    st.sampled_from(
        [
            "yes",
            "no",
            "on",
            "NULL",
            "~",
            ".inf",
            "0x1F",
            "012",
            "1_000",
            "1.5",
            "1e3",
            "-0",
            "+1",
            "2026-01-09T10:30:00+00:00",
            "2026-01-09",
            "12:30",
            '"a\\x41"',
            '"\\u00e9"',
            '"\\ud83d\\ude00"',
            "[]",
            '["a", 1]',
            "'single'",
            "a #c",
            "[a, b]",
            '{"timeout": 1800.0, "retries": 2}',
            '{"a": -0.25}',
            '{"a": 1e5}',
            '{"a": 1.5E3}',
            '{"a": NaN}',
            '{"a": Infinity}',
            '{"a": 1.}',
        ]
    ),
    st.integers(-(10**6), 10**6).map(str),
)


@settings(max_examples=500, deadline=None)
@given(st.lists(scalar_text, min_size=1, max_size=4))
def test_fast_front_matter_agrees_with_yaml(values: list[str]) -> None:
    from loop.store.frontmatter import fast_front_matter as _fast_front_matter

    lines = [f"k{i}: {v}\n" for i, v in enumerate(values)]
    fast = _fast_front_matter(lines)
    if fast is None:
        return
    assert fast == _yaml_reference("".join(lines))


flat_maps = st.dictionaries(
    st.sampled_from(["a", "b_c", "iteration_timeout"]),
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(10**6), 10**6),
        st.floats(allow_nan=False),
        st.text(max_size=8),
    ),
    max_size=4,
)


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.text(max_size=40), st.lists(st.text(max_size=10), max_size=4), flat_maps))
def test_written_scalars_read_back_through_yaml(value: object) -> None:
    from loop.store.frontmatter import fast_front_matter as _fast_front_matter
    from loop.store.frontmatter import scalar as _scalar

    line = f"k: {_scalar(value)}\n"
    assert _yaml_reference(line) == {"k": value}
    fast = _fast_front_matter([line])
    assert fast is None or fast == {"k": value}


def test_hook_state_files_take_the_fast_path(ws: Workspace) -> None:
    from loop.store.frontmatter import fast_front_matter as _fast_front_matter

    store = StateStore(ws)
    state = LoopState.new("prompt", verify=["pytest -q"], session_id="abc-123", pid=42)
    store.write(state)
    text = ws.state.read_text().split("---\n")[1]
    assert _fast_front_matter(text.splitlines(keepends=True)) is not None
    assert _fast_front_matter(SEED_STATE.split("---\n")[1].splitlines(keepends=True)) is not None


def test_a_runners_state_takes_the_fast_path(ws: Workspace) -> None:
    """The monitor reads the state on every change: its runner settings (a timeout in seconds)
    must not send every read through PyYAML."""
    from loop.store.frontmatter import fast_front_matter as _fast_front_matter
    from loop.store.frontmatter import scalar as _scalar

    settings = {"agent": "claude -p", "commit": False, "iteration_timeout": 1800.0, "retries": 2}
    line = f"runner: {_scalar(settings)}\n"
    assert _fast_front_matter([line]) == {"runner": settings} == _yaml_reference(line)
