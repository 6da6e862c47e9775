from __future__ import annotations

import json
from pathlib import Path

import pytest

from loop.sources import todos
from tests.conftest import SAMPLES

NOW = "2026-01-01T00:00:00.000Z"
SMALL = SAMPLES / "claude-code-viewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"
LARGE = SAMPLES / "claude-code-viewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"


def counts(path: Path, cache: Path | None = None) -> tuple[int, int, int]:
    r = todos.check(path, NOW, cache)
    assert r.available, r.error
    return r.pending, r.in_progress, r.done


def first_lines(src: Path, n: int, dest: Path) -> Path:
    dest.write_bytes(b"".join(src.read_bytes().splitlines(keepends=True)[:n]))
    return dest


# Counted by hand from the files (line numbers are 1-based):
# 1af7…: TodoWrite at lines 4 (4 pending, 1 in progress), 22 (4 completed, 1 in progress),
#        27 (1 completed). 5c03…: lines 4 (4 pending), 8 (3 pending, 1 in progress),
#        14 (1 pending, 2 in progress, 1 completed), 42 (3 completed, 1 in progress), 51 (4 completed).
@pytest.mark.parametrize(
    ("src", "lines", "expected"),
    [
        (SMALL, None, (0, 0, 1)),
        (SMALL, 26, (0, 1, 4)),
        (SMALL, 21, (4, 1, 0)),
        (SMALL, 3, (0, 0, 0)),
        (LARGE, None, (0, 0, 4)),
        (LARGE, 50, (0, 1, 3)),
        (LARGE, 41, (1, 2, 1)),
        (LARGE, 13, (3, 1, 0)),
        (LARGE, 7, (4, 0, 0)),
    ],
)
def test_real_transcripts_hand_counted(
    tmp_path: Path, src: Path, lines: int | None, expected: tuple[int, int, int]
) -> None:
    path = src if lines is None else first_lines(src, lines, tmp_path / "t.jsonl")
    assert counts(path) == expected


def test_items_carry_titles() -> None:
    report = todos.check(SMALL, NOW, None)
    assert report.items[0].title.startswith("Create CLAUDE.md")
    assert report.items[0].status == "done"


def _assistant_todo(statuses: list[str]) -> bytes:
    todos_ = [
        {"content": f"task {i}", "status": s, "activeForm": f"doing {i}"} for i, s in enumerate(statuses)
    ]
    line = {
        "type": "assistant",
        "message": {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "TodoWrite", "input": {"todos": todos_}}
            ],
        },
    }
    return json.dumps(line, separators=(",", ":")).encode() + b"\n"


def _user_result(text: str) -> bytes:
    line = {
        "type": "user",
        "message": {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": text}],
        },
    }
    return json.dumps(line, separators=(",", ":")).encode() + b"\n"


def test_last_line_a_tool_call_and_torn_lines(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(
        _assistant_todo(["pending", "completed"])
        + b'{"type":"assistant","message":{"content":[{"type":"tool_use","name":"TodoWrite","input":{"todos":[{"status":"pen'
    )
    assert counts(path) == (1, 0, 1)  # the torn call is not trusted until it is whole
    path.write_bytes(path.read_bytes() + b'ding"}]}}]}}\n')
    assert counts(path) == (1, 0, 0)


def test_quoted_todowrite_in_tool_results_and_text_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    quoted = _assistant_todo(["pending"] * 9).decode()
    text_line = {
        "type": "assistant",
        "message": {"content": [{"type": "text", "text": 'I will call "TodoWrite" now'}]},
    }
    path.write_bytes(
        _assistant_todo(["in_progress"])
        + _user_result(quoted)
        + json.dumps(text_line).encode()
        + b"\n"
        + b'not json at all "TodoWrite"\n'
        + b'{"name":"TodoWrite", "but": "not an assistant line"}\n'
    )
    assert counts(path) == (0, 1, 0)


def test_huge_lines_and_garbage(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    big = _user_result("x" * 8_000_000 + '"TodoWrite"')
    path.write_bytes(_assistant_todo(["pending", "pending"]) + big + b"\xff\xfe garbage\n" + big)
    assert counts(path) == (2, 0, 0)


def test_missing_transcript_and_folder(tmp_path: Path) -> None:
    missing = todos.check(tmp_path / "nope.jsonl", NOW, None)
    # A missing transcript only affects the TODO list: counted as none, with a warning.
    assert missing.available and missing.pending == 0
    assert any("no such transcript" in w for w in missing.warnings)
    assert not todos.check(tmp_path, NOW, None).available
    unknown = todos.check(None, NOW, None)
    assert unknown.available and unknown.pending == 0


def test_no_todowrite_is_zero(tmp_path: Path) -> None:
    path = first_lines(SMALL, 3, tmp_path / "t.jsonl")
    report = todos.check(path, NOW, None)
    assert report.available and report.open_count == 0 and "no TodoWrite" in (report.detail or "")


def test_cache_reads_only_what_was_appended(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    cache = tmp_path / "cache"
    filler = _user_result("y" * 100_000)
    path.write_bytes(_assistant_todo(["pending"]) + filler * 30)
    lookup = todos.Lookup(cache)
    assert lookup.latest(path).todos is not None
    first_read = lookup.bytes_read
    assert first_read > 1_000_000
    again = todos.Lookup(cache)
    assert again.latest(path).todos == lookup.latest(path).todos
    assert again.bytes_read == 0
    with path.open("ab") as f:
        f.write(filler)
    third = todos.Lookup(cache)
    assert [t["status"] for t in third.latest(path).todos or []] == ["pending"]
    assert third.bytes_read < 3 * len(filler)
    with path.open("ab") as f:
        f.write(_assistant_todo(["completed", "in_progress"]))
    assert counts(path, cache) == (0, 1, 1)
    # A new transcript at the same path (rotated) is read afresh, not from the cache.
    replacement = tmp_path / "new.jsonl"
    replacement.write_bytes(_assistant_todo(["pending"] * 3))
    replacement.replace(path)
    assert counts(path, cache) == (3, 0, 0)


def test_corrupt_cache_is_ignored(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "todos-cache.json").write_bytes(b"\x00garbage")
    path = tmp_path / "t.jsonl"
    path.write_bytes(_assistant_todo(["pending"]))
    assert counts(path, cache) == (1, 0, 0)


def test_transcript_for_finds_claude_layout(tmp_path: Path) -> None:
    home = tmp_path / "home"
    cwd = Path("/work/my.project")
    folder = home / "projects" / "-work-my-project"
    folder.mkdir(parents=True)
    (folder / "abc.jsonl").write_text("")
    assert todos.transcript_for(home, cwd, "abc") == folder / "abc.jsonl"
    assert todos.transcript_for(home, cwd, "zzz") is None


def _reference(data: bytes) -> list[dict[str, object]] | None:
    """Parse every complete line front to back; the last TodoWrite call wins."""
    latest = None
    for line in data.split(b"\n")[:-1]:
        found = todos._todos_of(line)
        if found is not None:
            latest = found
    return latest


def test_scan_matches_a_full_parse_at_any_block_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    pieces = st.sampled_from(
        [
            _assistant_todo(["pending"]),
            _assistant_todo(["completed", "in_progress"]),
            _user_result('"TodoWrite"' * 3),
            b'garbage "TodoWrite"\n',
            b"\n",
            b"{}\n",
            _user_result("z" * 300),
            b'{"type":"assistant","message":{"content":[{"name":"TodoWrite"',
        ]
    )
    path = tmp_path / "t.jsonl"

    @settings(max_examples=300, deadline=None)
    @given(st.lists(pieces, max_size=12), st.integers(min_value=12, max_value=400))
    def check(parts: list[bytes], block: int) -> None:
        data = b"".join(parts)
        path.write_bytes(data)
        monkeypatch.setattr(todos, "BLOCK", block)
        assert todos.scan(path).found.todos == _reference(data)

    check()


def test_torn_last_line_longer_than_a_block(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(_assistant_todo(["pending"]) + b'{"type":"user","message":"' + b"q" * 3_000_000)
    assert counts(path) == (1, 0, 0)
