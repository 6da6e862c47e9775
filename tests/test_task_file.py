from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loop.sources import task_file
from loop.sources.base import MAX_ITEMS
from loop.sources.task_file import parse
from loop.store import safeopen

NOW = "2026-01-01T00:00:00.000Z"


def counts(text: str) -> tuple[int, int, int, int]:
    r = parse(text)
    return r.pending, r.in_progress, r.done, r.skipped


def test_marks_bullets_numbers_and_indentation() -> None:
    text = "\n".join(
        [
            "# Sprint",
            "- [ ] pending dash",
            "* [ ] pending star",
            "+ [~] in progress plus",
            "    - [x] done nested",
            "\t- [X] done tab",
            "1. [ ] numbered",
            "12) [-] skipped numbered",
            "- [-] skipped",
            "-[ ] no space: not an item",
            "- [ ]not followed by space: not an item",
            "- [y] unknown mark",
            "text - [ ] not at line start",
            "- [ ]",
        ]
    )
    assert counts(text) == (4, 1, 2, 2)
    items = parse(text).items
    assert [(i.line, i.status, i.title) for i in items[:3]] == [
        (2, "pending", "pending dash"),
        (3, "pending", "pending star"),
        (4, "in_progress", "in progress plus"),
    ]
    assert items[-1].line == 14 and items[-1].title == ""


def test_fences_and_comments_do_not_count() -> None:
    text = "\n".join(
        [
            "- [ ] real 1",
            "```markdown",
            "- [ ] example in backticks",
            "```",
            "~~~~",
            "- [ ] example in tildes",
            "~~~",  # shorter: does not close
            "- [ ] still inside",
            "~~~~~",
            "<!-- - [ ] commented -->",
            "<!--",
            "- [ ] in a long comment",
            "-->",
            "- [x] real 2 <!-- with a note -->",
            "<!-- a --> - [ ] after a comment",
            "  ```python",
            "- [ ] inside an indented fence",
            "  ```",
            "``` inline `code` ``` - not a fence",
            "- [~] real 3",
        ]
    )
    assert counts(text) == (2, 1, 1, 0)
    assert [i.line for i in parse(text).items] == [1, 14, 15, 20]


def test_unclosed_fence_hides_the_rest() -> None:
    assert counts("- [ ] a\n```\n- [ ] b\n") == (1, 0, 0, 0)


def test_crlf_lines() -> None:
    r = parse("- [ ] a\r\n- [x] b\r\n")
    assert (r.pending, r.done) == (1, 1) and r.items[0].title == "a"


def test_check_reports_and_refuses_escapes(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "TODO.md").write_text("- [ ] a\n- [x] b\n")
    ok = task_file.check(root, "TODO.md", NOW)
    assert ok.available and ok.pending == 1 and ok.done == 1 and ok.detail == str(root / "TODO.md")
    outside = tmp_path / "secret.md"
    outside.write_text("- [ ] no\n")
    escaped = task_file.check(root, "../secret.md", NOW)
    assert not escaped.available and "outside the workspace" in (escaped.error or "")
    (root / "link.md").symlink_to(outside)
    linked = task_file.check(root, "link.md", NOW)
    assert not linked.available and "outside the workspace" in (linked.error or "")
    assert not task_file.check(root, str(outside), NOW).available


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        (lambda p: None, "no such file"),
        (lambda p: p.mkdir(), "is a folder"),
        (lambda p: p.write_bytes(b"\x00\x01binary\xff" * 100), "binary data"),
    ],
)
def test_unreadable_task_file_is_unavailable(tmp_path: Path, setup, expected: str) -> None:
    setup(tmp_path / "TODO.md")
    report = task_file.check(tmp_path, "TODO.md", NOW)
    assert report.enabled and not report.available and expected in (report.error or "")
    assert report.uncertain


def test_unreadable_permissions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "TODO.md").write_text("- [ ] a\n")

    def denied(path: Path, limit: int | None = None) -> bytes:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(task_file, "read_regular", denied)  # CI runs as root, who reads anything
    assert "cannot be read (Permission denied)" in (task_file.check(tmp_path, "TODO.md", NOW).error or "")


def test_invalid_utf8_and_huge_line_still_count(tmp_path: Path) -> None:
    (tmp_path / "TODO.md").write_bytes(b"- [ ] caf\xe9\n" + b"x" * 5_000_000 + b"\n- [x] done\n")
    report = task_file.check(tmp_path, "TODO.md", NOW)
    assert report.available and (report.pending, report.done) == (1, 1)
    assert "not valid UTF-8" in report.warnings[0]


def test_disabled_without_a_path(tmp_path: Path) -> None:
    report = task_file.check(tmp_path, None, NOW)
    assert not report.enabled and not report.uncertain


def test_items_capped_counts_not(tmp_path: Path) -> None:
    r = parse("- [ ] t\n" * 1000)
    assert r.pending == 1000 and len(r.items) == 200


def test_mark_current_edits_one_character(tmp_path: Path) -> None:
    path = tmp_path / "TODO.md"
    path.write_text("```\n- [ ] example\n```\n- [x] done\n  - [ ] first real  \n- [~] doing\n")
    item = task_file.mark_current(path)
    assert item is not None and item.title == "doing" and item.line == 6
    item = task_file.mark_current(path)
    assert item is not None and item.title == "first real" and item.line == 5
    assert path.read_text() == "```\n- [ ] example\n```\n- [x] done\n  - [-] first real  \n- [-] doing\n"
    assert task_file.mark_current(path) is None


# --- properties ----------------------------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("- *+[]xX~ \t\n`<!->1.)abc\r")), max_size=300))
def test_random_markdown_never_crashes(text: str) -> None:
    r = parse(text)
    assert min(r.pending, r.in_progress, r.done, r.skipped) >= 0
    assert len(r.items) <= 200


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=500))
def test_any_unicode_never_crashes(text: str) -> None:
    parse(text)


MARKS = {"pending": " ", "in_progress": "~", "done": "x", "skipped": "-"}
item_st = st.tuples(
    st.sampled_from(["-", "*", "+", "1.", "23)"]),
    st.sampled_from(["", "  ", "    ", "\t"]),
    st.sampled_from(list(MARKS)),
    st.text(alphabet="abc xyz", max_size=12),
    st.sampled_from(["plain", "fenced", "commented", "prose"]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(item_st, max_size=40))
def test_generated_checklists_count_exactly(items) -> None:
    lines: list[str] = []
    expected = {"pending": 0, "in_progress": 0, "done": 0, "skipped": 0}
    for bullet, indent, status, title, where in items:
        box = f"{indent}{bullet} [{MARKS[status]}] {title}"
        if where == "plain":
            lines.append(box)
            expected[status] += 1
        elif where == "fenced":
            lines += ["```", box, "```"]
        elif where == "commented":
            lines += ["<!--", box, "-->"]
        else:
            lines.append(f"Some prose mentioning [{MARKS[status]}] {title}")
    r = parse("\n".join(lines))
    assert (r.pending, r.in_progress, r.done, r.skipped) == tuple(expected.values())


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(["- [ ] a", "- [x] b", "* [~] c", "1. [-] d", "text", "- [X] e"]), max_size=300)
)
def test_plain_and_line_parsers_agree(lines: list[str]) -> None:
    from loop.sources.task_file import _parse_lines, _parse_plain

    text = "\n".join(lines)
    fast, slow = _parse_plain(text), _parse_lines(text)
    assert (fast.pending, fast.in_progress, fast.done, fast.skipped) == (
        slow.pending,
        slow.in_progress,
        slow.done,
        slow.skipped,
    )
    assert fast.items == slow.items
    assert (fast.first_pending_line, fast.first_in_progress_line) == (
        slow.first_pending_line,
        slow.first_in_progress_line,
    )


# --- the fast path (no fences, no comments) ------------------------------------------------


class CountingBox:
    """Wraps `_BOX` and counts the boxes the parser walks one by one."""

    def __init__(self) -> None:
        self.real = task_file._BOX
        self.walked = 0

    def finditer(self, text: str):
        for match in self.real.finditer(text):
            self.walked += 1
            yield match

    def match(self, text: str):
        return self.real.match(text)


@pytest.mark.parametrize("marks", [" x", " xX-", "x-", " ~x"])
def test_fast_path_stops_once_the_report_is_known(monkeypatch: pytest.MonkeyPatch, marks: str) -> None:
    """An ordinary list (no `[~]`) must not be walked box by box past what the report lists."""
    box = CountingBox()
    monkeypatch.setattr(task_file, "_BOX", box)
    text = "".join(f"- [{marks[i % len(marks)]}] task {i}\n" for i in range(20_000))
    r = parse(text)
    assert len(r.items) == 200
    assert r.pending + r.in_progress + r.done + r.skipped == 20_000
    assert box.walked <= 2 * 200


def _parsed(r: task_file.Checklist) -> tuple[object, ...]:
    return (
        r.pending,
        r.in_progress,
        r.done,
        r.skipped,
        r.items,
        r.first_pending_line,
        r.first_in_progress_line,
    )


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(["- [ ] a", "* [x] b", "1. [X] c", "+ [-] d", "- [~] e", "prose", ""]), max_size=40
    ),
    st.integers(min_value=0, max_value=260),
    st.sampled_from(" xX-~"),
)
def test_fast_path_equals_line_parser(head: list[str], filler: int, mark: str) -> None:
    """Lists longer than the report's cap included, where the fast path stops early."""
    text = "\n".join([*head, *(f"- [{mark}] filler {i}" for i in range(filler)), *head])
    assert _parsed(task_file._parse_plain(text)) == _parsed(task_file._parse_lines(text))


# --- parsed once per change ----------------------------------------------------------------------


def _counting(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Parses (whole, or of the lines changed) and reads of task files, counted."""
    calls = {"parse": 0, "read": 0}
    real_parse, real_reparse, real_read = task_file.parse, task_file.reparse, safeopen.read_regular

    def parse(text: str) -> task_file.Checklist:
        calls["parse"] += 1
        return real_parse(text)

    def reparse(old: bytes, parsed: task_file.Checklist, new: bytes) -> task_file.Checklist | None:
        found = real_reparse(old, parsed, new)
        calls["parse"] += found is not None
        return found

    def read(path: Path, limit: int | None = None) -> bytes:
        calls["read"] += 1
        return real_read(path, limit)

    monkeypatch.setattr(task_file, "parse", parse)
    monkeypatch.setattr(task_file, "reparse", reparse)
    monkeypatch.setattr(task_file, "read_regular", read)
    return calls


def test_an_unchanged_task_file_is_parsed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    todo = tmp_path / "TODO.md"
    todo.write_text("- [ ] one\n- [ ] two\n")
    calls = _counting(monkeypatch)
    for _ in range(3):
        assert task_file.check(tmp_path, "TODO.md", NOW).pending == 2
    assert calls["parse"] == 1
    todo.touch()  # touched, same bytes: read again, not parsed again
    assert task_file.check(tmp_path, "TODO.md", NOW).pending == 2
    assert calls["parse"] == 1
    todo.write_text("- [x] one\n- [ ] two\n")  # the same size, changed within the same instant
    report = task_file.check(tmp_path, "TODO.md", NOW)
    assert (report.pending, report.done) == (1, 1)
    assert calls["parse"] == 2


def test_a_settled_task_file_is_not_even_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    todo = tmp_path / "TODO.md"
    todo.write_text("- [ ] one\n- [ ] two\n")
    calls = _counting(monkeypatch)
    task_file.check(tmp_path, "TODO.md", NOW)
    task_file.check(tmp_path, "TODO.md", NOW)
    assert calls == {"read": 2, "parse": 1}  # just written: read again to compare
    monkeypatch.setattr(task_file, "SETTLED_NS", -1)  # as if left alone for long
    task_file.check(tmp_path, "TODO.md", NOW)
    for _ in range(3):
        assert task_file.check(tmp_path, "TODO.md", NOW).pending == 2
    assert calls == {"read": 3, "parse": 1}  # its stat says it is the file parsed
    todo.write_text("- [x] one\n- [ ] two\n")
    assert task_file.check(tmp_path, "TODO.md", NOW).done == 1


def test_a_task_file_rewritten_to_the_same_size_and_mtime_is_read_again(tmp_path: Path) -> None:
    import os

    todo = tmp_path / "TODO.md"
    todo.write_text("- [ ] one\n- [ ] two\n")
    os.utime(todo, (1_000_000_000, 1_000_000_000))
    assert task_file.check(tmp_path, "TODO.md", NOW).pending == 2
    with open(todo, "r+b") as f:  # in place, same inode and size, its mtime put back
        f.write(b"- [x] one\n- [x] two\n")
    os.utime(todo, (1_000_000_000, 1_000_000_000))
    assert task_file.check(tmp_path, "TODO.md", NOW).done == 2


def test_the_files_remembered_are_bounded(tmp_path: Path) -> None:
    """A monitor of many loops (the fleet), or a long life of them, keeps a bounded memory of
    what it parsed: at most `KEEP_FILES` task files, the bytes of none larger than `KEEP_BYTES`."""
    for n in range(task_file.KEEP_FILES * 3):
        (tmp_path / f"T{n}.md").write_text(f"- [ ] task {n}\n")
        assert task_file.check(tmp_path, f"T{n}.md", NOW).pending == 1
        assert len(task_file._PARSED) <= task_file.KEEP_FILES
    big = tmp_path / "BIG.md"
    big.write_bytes(b"- [ ] big\n" + b"x" * (task_file.KEEP_BYTES + 1) + b"\n")
    assert task_file.check(tmp_path, "BIG.md", NOW).pending == 1
    (kept,) = (known for name, known in task_file._PARSED.items() if name.endswith("BIG.md"))
    assert kept.data is None


# --- parsed again from the lines that changed ------------------------------------------------------

LINES = [
    "- [ ] open",
    "- [x] done",
    "* [X] done too",
    "+ [~] under way",
    "1. [-] skipped",
    "12) [ ] numbered",
    "  - [ ] nested é",
    "\t- [~] tab",
    "- [y] not a mark",
    "-[ ] not a box",
    "- [ ]",
    "prose with - [ ] inside",
    "# heading",
    "",
    "١. [ ] other digits",
    "- [ ] crlf\r",
]
RARE = ["```", "~~~ x", "<!-- a - [ ] b -->", "<!--"]
"""Lines that make the parse depend on the lines before: the full parse is taken then."""


def _text(lines: list[str], final_newline: bool) -> bytes:
    return ("\n".join(lines) + ("\n" if final_newline else "")).encode("utf-8")


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from(LINES), max_size=30),
    st.booleans(),
    st.data(),
    st.sampled_from([2, 3, 5, 200]),
)
def test_a_parse_of_the_lines_changed_equals_a_full_parse(
    lines: list[str], final_newline: bool, data: st.DataObject, cap: int
) -> None:
    """Whatever the edit (a box ticked, lines added, removed, joined, split, cut in the middle
    of a character, a fence or a comment brought in), `reparse` gives what `parse` gives, or
    says it cannot (then the file is parsed whole)."""
    from unittest import mock

    old = _text(lines, final_newline)
    at = data.draw(st.integers(0, len(old)))
    cut = data.draw(st.integers(at, len(old)))
    inserted = data.draw(
        st.one_of(
            st.just(b""),
            st.sampled_from([b" ", b"x", b"~", b"-", b"\n", b"[ ]", b"- [ ] new\n", b"\n- [x] n", b"\xc3"]),
            st.lists(st.sampled_from(LINES + RARE), max_size=4).map(
                lambda extra: "".join(f"{line}\n" for line in extra).encode()
            ),
        )
    )
    new = old[:at] + inserted + old[cut:]
    with mock.patch.object(task_file, "MAX_ITEMS", cap):
        again = task_file.reparse(old, parse(old.decode("utf-8")), new)
        try:
            text = new.decode("utf-8")
        except UnicodeDecodeError:
            assert again is None
            return
        if again is not None:
            assert _parsed(again) == _parsed(parse(text))


@pytest.fixture
def whole_parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts `task_file` parsed whole from here on."""
    texts: list[str] = []
    real_parse = task_file.parse

    def parse_whole(text: str) -> task_file.Checklist:
        texts.append(text)
        return real_parse(text)

    monkeypatch.setattr(task_file, "parse", parse_whole)
    return texts


def test_a_box_ticked_in_a_long_checklist_is_not_parsed_whole(
    tmp_path: Path, whole_parses: list[str]
) -> None:
    """A loop ticks one box of a long checklist per iteration: the monitor and the driver count
    it again from the lines that changed, not from 10,000 lines, with the same result."""
    todo = tmp_path / "TODO.md"
    lines = [f"- [ ] task {i}" for i in range(10_000)]
    todo.write_text("# Plan\n\n" + "\n".join(lines) + "\n")
    assert task_file.check(tmp_path, "TODO.md", NOW).pending == 10_000
    for i in range(300):
        lines[i] = lines[i].replace("[ ]", "[x]")
        todo.write_text("# Plan\n\n" + "\n".join(lines) + "\n")
        report = task_file.check(tmp_path, "TODO.md", NOW)
        assert (report.pending, report.done) == (9_999 - i, i + 1)
    assert len(whole_parses) == 1 + 200  # whole while a listed box changes; after them, never
    whole = parse(todo.read_text())
    assert report.items == tuple(whole.items)
    kept = task_file._PARSED[str(todo.resolve())]
    assert kept.result.first_pending_line == whole.first_pending_line == 303


@pytest.mark.parametrize("tasks", [MAX_ITEMS - 1, MAX_ITEMS])
def test_a_checklist_listed_whole_is_never_parsed_whole_again(
    tmp_path: Path, whole_parses: list[str], tasks: int
) -> None:
    """A runner's checklist of up to as many tasks as a report lists (every box known): each
    box ticked is one line parsed, whichever box, with the full parse's result."""
    todo = tmp_path / "TODO.md"
    lines = [f"- [ ] task {i}" for i in range(tasks)]
    todo.write_text("\n".join(lines) + "\n")
    task_file.check(tmp_path, "TODO.md", NOW)
    for i in range(0, tasks, 7):
        lines[i] = lines[i].replace("[ ]", "[x]")
        todo.write_text("\n".join(lines) + "\n")
        report = task_file.check(tmp_path, "TODO.md", NOW)
        whole = parse(todo.read_text())
        assert report.items == tuple(whole.items) and report.pending == whole.pending
        kept = task_file._PARSED[str(todo.resolve())]
        assert kept.result.first_pending_line == whole.first_pending_line
    assert len(whole_parses) == 1
