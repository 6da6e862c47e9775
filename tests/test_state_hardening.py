"""A state loopdeck cannot read is never written, and one it should not read is refused fast."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loop.store.paths import Workspace
from loop.store.state import (
    FIELD_CAPS,
    KNOWN_KEYS,
    MAX_STATE_BYTES,
    LoopState,
    StateError,
    StateStore,
    parse,
    storable,
)
from tests.conftest import SEED_STATE


def test_lone_surrogates_are_replaced_not_fatal(ws: Workspace) -> None:
    store = StateStore(ws)
    store.write(LoopState.new("fix \ud800 it", current_task="task \udfff", extra={"note\ud83d": "a\ud800"}))
    back = store.read()
    assert back is not None
    assert back.current_task == "task \ufffd" and back.prompt == "fix \ufffd it"
    assert back.extra == {"note\ufffd": "a\ufffd"}


def test_huge_fields_are_capped_so_the_state_stays_readable(ws: Workspace) -> None:
    store = StateStore(ws)
    store.write(LoopState.new("p", session_id="s" * 5_000_000, current_task="t" * 100_000))
    assert ws.state.stat().st_size < MAX_STATE_BYTES
    back = store.read()
    assert back is not None and back.session_id == "s" * FIELD_CAPS["session_id"]
    assert back.current_task == "t" * FIELD_CAPS["current_task"]


def test_a_state_too_large_to_read_back_is_refused_and_the_old_one_kept(ws: Workspace) -> None:
    store = StateStore(ws)
    store.write(LoopState.new("p"))
    before = ws.state.read_bytes()
    with pytest.raises(StateError, match=r"would not read back.*too large"):
        store.write(LoopState.new("p", extra={"notes": "x" * (MAX_STATE_BYTES + 1)}))
    assert ws.state.read_bytes() == before


@pytest.mark.parametrize(
    "values",
    [{"iteration": 2**64}, {"pid": 10**5000}, {"extra": {"n": [1, -(2**70)]}}, {"max_iterations": 2**63}],
)
def test_numbers_beyond_2_63_are_refused_with_a_clear_error(ws: Workspace, values: dict[str, Any]) -> None:
    store = StateStore(ws)
    store.write(LoopState.new("p"))
    before = ws.state.read_bytes()
    with pytest.raises(StateError, match="larger than 2\\*\\*63-1"):
        store.write(LoopState.new("p", **values))
    assert ws.state.read_bytes() == before


@pytest.mark.parametrize("digits", [20, 5000, 100_000])
@pytest.mark.parametrize("key", ["iteration", "max_iterations", "pid", "session_id", "extra_key"])
def test_huge_numbers_in_the_file_are_a_state_error(digits: int, key: str) -> None:
    number = "9" * digits
    if key in ("iteration", "max_iterations"):
        text = SEED_STATE.replace(f"{key}: {getattr(LoopState(), key) if key == 'max_iterations' else 5}", "")
        text = text.replace("---\n", f"---\n{key}: {number}\n", 1)
    else:
        text = SEED_STATE.replace("verification_mode: false", f"verification_mode: false\n{key}: {number}")
    assert f"{key}: {number}" in text
    with pytest.raises(StateError):
        parse(text.encode(), "s.md")


def test_huge_number_without_a_traceback_in_the_cli(ws: Workspace) -> None:
    ws.state.write_text(SEED_STATE.replace("iteration: 5", "iteration: " + "7" * 5000))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    done = subprocess.run(
        [sys.executable, "-m", "loop.cli", "-C", str(ws.root), "status"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert str(ws.state) in done.stderr


BOMB = """\
---
iteration: 1
max_iterations: 3
a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]
verify: *i
---
"""


def test_an_alias_bomb_fails_fast() -> None:
    start = time.monotonic()
    with pytest.raises(StateError, match="anchors and aliases") as info:
        parse(BOMB.encode(), "s.md")
    assert info.value.line == 4
    assert time.monotonic() - start < 5


def test_anchors_are_never_written(ws: Workspace) -> None:
    shared = ["a", "b"]
    store = StateStore(ws)
    store.write(LoopState.new("p", extra={"x": {"one": shared, "two": shared}}))
    assert "&" not in ws.state.read_text()
    back = store.read()
    assert back is not None and back.extra == {"x": {"one": ["a", "b"], "two": ["a", "b"]}}


def test_quoted_keys_are_read_and_written(ws: Workspace) -> None:
    text = SEED_STATE.replace("iteration: 5", '"iteration": 5').replace(
        "check_tasks: true", "'check_tasks': true"
    )
    ws.state.write_text(text)
    store = StateStore(ws)
    state = store.read()
    assert state is not None and state.iteration == 5 and state.check_tasks is True
    store.write(state)
    assert ws.state.read_text() == text  # untouched keys keep their exact text
    state.extra.update({"a: b": 1, "true": "t", "": 2, "#c": [3], "x\ny": None})
    store.write(state)
    back = store.read()
    assert back is not None and back.extra == {"a: b": 1, "true": "t", "": 2, "#c": [3], "x\ny": None}


# --- the property: written means readable -----------------------------------------------------

ANY_TEXT = st.text(alphabet=st.characters(exclude_categories=()), max_size=30)
BIG_INT = st.one_of(st.integers(0, 1000), st.integers(0, 2**70), st.just(2**63 - 1), st.just(2**63))
SCALAR = st.one_of(ANY_TEXT, BIG_INT, st.integers(-(2**70), 0), st.booleans(), st.none())
EXTRA_VALUE = st.recursive(
    SCALAR,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ANY_TEXT, inner, max_size=3),
    max_leaves=6,
)
EXTRA = st.dictionaries(ANY_TEXT.filter(lambda k: storable(k) not in KNOWN_KEYS), EXTRA_VALUE, max_size=4)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    prompt=ANY_TEXT,
    iteration=BIG_INT,
    max_iterations=BIG_INT,
    completion_promise=ANY_TEXT,
    task_file=ANY_TEXT,
    session_id=st.none() | ANY_TEXT | st.text(min_size=300, max_size=400),
    current_task=st.none() | ANY_TEXT,
    transcript_path=st.none() | ANY_TEXT,
    pid=st.none() | BIG_INT,
    verify=st.lists(ANY_TEXT, max_size=3),
    extra=EXTRA,
)
def test_a_written_state_always_reads_back(
    tmp_path: Path, prompt: str, extra: dict[str, Any], **values: Any
) -> None:
    root = tmp_path / f"w{os.urandom(6).hex()}"
    ws = Workspace(root)
    state = LoopState.new(prompt, extra=extra, **values)
    store = StateStore(ws)
    try:
        store.write(state)
    except StateError as exc:
        assert "larger than 2**63-1" in str(exc) or "would not read back" in str(exc)
        assert not ws.state.exists()
        return
    back = store.read()  # never a written file that fails to parse
    assert back is not None
    for key, value in values.items():
        expected = storable(value, FIELD_CAPS.get(key), key)
        got = getattr(back, key)
        if key in ("completion_promise", "task_file") and expected == "null":
            expected = "null"
        assert got == expected, key
    assert back.extra == storable(extra)
    assert back.body == storable(state.body)


# --- stray temp files -------------------------------------------------------------------------


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_orphaned_temp_and_backup_files_of_dead_writers_are_swept(ws: Workspace) -> None:
    dead, live = _dead_pid(), os.getppid()
    name = ws.state.name
    orphans = [
        f".{name}.{dead}.0a1b2c3d.tmp",
        f".{name}.bak.{dead}.0a1b2c3d",
        f".{name}.bak.{dead}.0a1b2c3d.tmp",
    ]
    kept = [
        f".{name}.{live}.0a1b2c3d.tmp",  # a writer still at work
        f".{name}.bak.{live}.0a1b2c3d",
        f".{name}.bak.notapid.tmp",
        "notes.tmp",
    ]
    for entry in orphans + kept:
        (ws.claude_dir / entry).write_text("x")
    store = StateStore(ws)
    store.write(LoopState.new("p"))
    store.write(LoopState.new("p"))  # the second write makes a backup, through a hard link
    left = {p.name for p in ws.claude_dir.iterdir()}
    assert not left & set(orphans)
    assert set(kept) <= left
    assert {ws.state.name, ws.backup.name} <= left


def test_a_store_reads_the_state_it_wrote_without_parsing_it_again(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A driver reads the state it wrote at every decision: the file it wrote is read as its
    write parsed it back, once; a file changed since is read as it is."""
    import loop.store.state as state_module

    parsed: list[str] = []
    real = state_module.parse

    def parse(data: bytes, path: Any) -> LoopState:
        parsed.append(str(path))
        return real(data, path)

    monkeypatch.setattr(state_module, "parse", parse)
    store = StateStore(ws)
    written = LoopState.new("the prompt")
    written.iteration = 7
    written.stuck = {"mark": "m", "no_progress": 1}
    store.write(written)
    assert len(parsed) == 1  # the write's check
    first = store.read()
    assert first is not None and first.values() == written.values() and len(parsed) == 1
    first.stuck["no_progress"] = 99  # what a reader does with it is its own
    second = store.read()  # taken once: read from the file again
    assert second is not None and second.stuck["no_progress"] == 1 and len(parsed) == 2
    store.write(written)
    text = ws.state.read_text().replace("iteration: 7", "iteration: 8")
    other = ws.state.with_name("edited")
    other.write_text(text)
    os.replace(other, ws.state)  # a person's edit, after the write
    edited = store.read()
    assert edited is not None and edited.iteration == 8 and len(parsed) == 4


def test_a_store_sweeps_the_folder_at_its_first_write_only(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A runner writes the state at every iteration: the folder is listed for orphans once."""
    listed: list[str] = []
    real = os.scandir

    def scandir(path: Any = ".") -> Any:
        listed.append(str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    store = StateStore(ws)
    for _ in range(4):
        store.write(LoopState.new("p"))
    assert listed.count(str(ws.claude_dir)) == 1
    StateStore(ws).write(LoopState.new("p"))  # the next process's store sweeps again
    assert listed.count(str(ws.claude_dir)) == 2


@pytest.mark.parametrize(
    ("front", "problem"),
    [
        ("x: " + "[" * 100_000, "front matter is not valid YAML"),  # never a RecursionError
        ("x: " + "[" * 100_000 + "]" * 100_000, "front matter is not valid YAML"),
        ("x: " + "[" * 60 + "]" * 60, "x: nests lists or maps more than 50 deep"),
    ],
)
def test_a_state_nested_too_deep_is_one_clear_error(ws: Workspace, front: str, problem: str) -> None:
    ws.state.write_text(f"---\niteration: 1\nmax_iterations: 0\n{front}\n---\nbody\n")
    with pytest.raises(StateError) as info:
        StateStore(ws).read()
    assert problem in str(info.value) and str(ws.state) in str(info.value)
