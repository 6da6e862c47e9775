"""The Stop hook under any input: thousands of generated hook payloads (wrong types, lone
surrogates, huge numbers, odd paths, garbage bytes), run in process. Whatever comes in, the
hook exits 0, prints at most one JSON object, leaves a state file that reads back, and journals
every refusal as a clear line: a traceback in the journal is a bug the input found."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from pathlib import Path
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loop.core.model import LoopState
from loop.drivers import hook
from loop.store.journal import Journal
from loop.store.paths import Workspace
from loop.store.state import StateStore

TEXTS = st.one_of(
    st.text(max_size=60),
    st.sampled_from(
        [
            "ALL_TASKS_COMPLETE",
            "done\nALL_TASKS_COMPLETE",
            "<question>Which one?</question>",
            "<promise>DONE</promise>",
            "\ud800 lone surrogate",
            "x" * 5000,
            "",
        ]
    ),
)
ANY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False),
    TEXTS,
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)


PATHS = st.sampled_from(
    [
        "/tmp/a\x00b.jsonl",
        "\x00",
        "/tmp/a\ud800b.jsonl",
        "\udfff",
        "~no-such-user-here/t.jsonl",
        "~no-such-user-here",
        "~",
        "~/t.jsonl",
        "/dev/null",
        "/",
        "relative/t.jsonl",
    ]
)


def payloads(root: str) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {},
        optional={
            "session_id": st.one_of(st.just("s1"), st.just("other"), ANY),
            "transcript_path": st.one_of(st.just(f"{root}/missing.jsonl"), st.just(root), PATHS, ANY),
            "cwd": st.one_of(st.just(root), PATHS, ANY),
            "stop_hook_active": ANY,
            "last_assistant_message": st.one_of(TEXTS, ANY),
            "hook_event_name": st.one_of(st.just("Stop"), ANY),
            "permission_mode": ANY,
            "background_tasks": ANY,
        },
    )


def run_hook(raw: bytes, root: Path) -> tuple[int, str]:
    out = io.StringIO()
    env = {
        "CLAUDE_PROJECT_DIR": str(root),
        "LOOPDECK_QUESTION_WAIT": "0",
        "CLAUDE_CODE_STOP_HOOK_BLOCK_CAP": "0",
    }
    with contextlib.redirect_stdout(out), mock.patch.dict(os.environ, env):
        code = hook.main(stdin=io.BytesIO(raw), env={**os.environ, **env})
    return code, out.getvalue()


def check(code: int, printed: str, ws: Workspace) -> None:
    assert code == 0
    lines = printed.splitlines()
    assert len(lines) <= 1, printed
    if lines:
        assert isinstance(json.loads(lines[0]), dict)
    if ws.state.exists():
        StateStore(ws).read()  # reads back (raises if not)
    for event in Journal(ws.journal).tail(100).events:
        assert "traceback" not in event.data, event.data  # a refusal is one line, not a bug


class Loop:
    """One workspace with a loop, put back as it was before every example."""

    def __init__(self, root: Path) -> None:
        self.ws = Workspace(root)
        (root / ".claude").mkdir(parents=True, exist_ok=True)
        (root / "TODO.md").write_text("- [ ] one\n- [ ] two\n")
        state = LoopState.new(
            "fuzz",
            task_file="TODO.md",
            check_github=False,
            check_tasks=False,
            session_id="s1",
            max_iterations=0,
        )
        StateStore(self.ws).write(state)
        self.pristine = self.ws.state.read_bytes()

    def reset(self) -> None:
        if self.ws.archive_dir.exists():
            shutil.rmtree(self.ws.archive_dir)
        self.ws.state.write_bytes(self.pristine)
        for name in ("orchestrator-loop.events.jsonl", "orchestrator-loop.control.jsonl"):
            with contextlib.suppress(FileNotFoundError):
                (self.ws.claude_dir / name).unlink()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_hook_input(tmp_path_factory: Any, data: st.DataObject) -> None:
    root = _loop_root(tmp_path_factory)
    loop = _LOOPS.setdefault(str(root), Loop(root))
    loop.reset()
    payload = data.draw(payloads(str(root)))
    raw = json.dumps(payload, ensure_ascii=data.draw(st.booleans())).encode("utf-8", "surrogatepass")
    code, printed = run_hook(raw, root)
    check(code, printed, loop.ws)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=300))
def test_any_bytes(tmp_path_factory: Any, raw: bytes) -> None:
    root = _loop_root(tmp_path_factory)
    loop = _LOOPS.setdefault(str(root), Loop(root))
    loop.reset()
    code, printed = run_hook(raw, root)
    check(code, printed, loop.ws)


_LOOPS: dict[str, Loop] = {}
_ROOTS: list[Path] = []


def _loop_root(factory: Any) -> Path:
    if not _ROOTS:
        _ROOTS.append(factory.mktemp("fuzz") / "project")
    return _ROOTS[0]
