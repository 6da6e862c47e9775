"""The design file as the loop's contract: how a `DESIGN-<timestamp>.md` is read, the prompt
made from it, and `loopdeck start` taking it (named, or the newest), its commands left for a
person to confirm."""

from __future__ import annotations

from pathlib import Path

import pytest

from loop.design import Design, DesignError, newest, parse, read
from loop.design.prompt import MAX_LINES, MIN_LINES, build
from loop.store.paths import Workspace
from loop.store.state import StateStore
from tests.conftest import run_loopdeck

SEED_STYLE = """\
# DESIGN: Todo API

Status: DRAFT
Type: feature

## Overview
A small REST API for todos, kept in memory. Only the design says this sentence.

## Acceptance Criteria
- [ ] API tests pass: `pytest tests/api`
- [ ] Lint is clean: `ruff check .`
- [ ] Errors return JSON with a message field
- [x] The README documents every endpoint

## Validation
```bash
$ pytest -q
# the linter too
ruff check .
```
"""


def design_of(text: str, name: str = "DESIGN-20260119-143022.md") -> Design:
    return parse(text, Path(name))


def test_a_seed_style_design_gives_its_criteria_commands_type_and_status() -> None:
    design = design_of(SEED_STYLE)
    assert design.title == "DESIGN: Todo API"
    assert design.task_type == "feature" and design.promise == "FEATURE_COMPLETE"
    assert design.status == "DRAFT"
    assert [c.command for c in design.criteria] == ["pytest tests/api", "ruff check .", None, None]
    assert [c.done for c in design.criteria] == [False, False, False, True]
    assert design.criteria[0].line == 10
    assert design.validation == ("pytest -q", "ruff check .")
    assert design.commands == ["pytest -q", "ruff check .", "pytest tests/api"]
    assert [c.text for c in design.judged] == [
        "Errors return JSON with a message field",
        "The README documents every endpoint",
    ]


def test_the_type_comes_from_a_section_or_front_matter_and_commands_from_a_backticked_list() -> None:
    section = design_of(
        "## Task Type\n\n**Bugfix**\n\n## Success Criteria\n1. No crash: `make test`\n"
        "## Validation\n- `go test ./...`\n- run the app by hand\n"
    )
    assert section.task_type == "bugfix" and section.promise == "BUGFIX_COMPLETE"
    assert section.validation == ("go test ./...",)
    assert section.commands == ["go test ./...", "make test"]
    front = design_of("---\ntype: refactor\nstatus: LOCKED\n---\n## Acceptance Criteria\n* tidy\n")
    assert (front.task_type, front.status, front.commands) == ("refactor", "LOCKED", [])
    assert design_of("## Acceptance Criteria\n- works\n").promise == "TASK_COMPLETE"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("# Nothing here\n", "no acceptance criteria; expected a `## Acceptance Criteria` section"),
        ("## Acceptance Criteria\n\nprose only\n", "the acceptance criteria section lists nothing"),
        ("## Acceptance Criteria\n- a\n## Acceptance Criteria\n- b\n", ":3: a second `Acceptance Criteria`"),
        ("## Acceptance Criteria\n- a\n```\nopen\n", "a code block is never closed"),
        ("Type: ???\n## Acceptance Criteria\n- a\n", "task type '???' is not a word"),
    ],
)
def test_a_bad_design_is_one_line_naming_the_file_and_what_was_expected(text: str, said: str) -> None:
    with pytest.raises(DesignError) as caught:
        design_of(text)
    message = str(caught.value)
    assert said in message and "DESIGN-20260119-143022.md" in message and "\n" not in message


def test_an_unreadable_design_is_one_line_too(tmp_path: Path) -> None:
    with pytest.raises(DesignError, match="not found"):
        read(tmp_path / "DESIGN-1.md")
    (tmp_path / "DESIGN-2.md").write_bytes(b"## Acceptance Criteria\n- \xff\n")
    with pytest.raises(DesignError, match="byte 25 is not UTF-8"):
        read(tmp_path / "DESIGN-2.md")
    (tmp_path / "DESIGN-3.md").mkdir()
    with pytest.raises(DesignError, match="cannot be read"):
        read(tmp_path / "DESIGN-3.md")


def test_the_newest_design_is_the_latest_timestamp(tmp_path: Path) -> None:
    assert newest(tmp_path) is None
    for name in ("DESIGN-20260119-143022.md", "DESIGN-20260120-090000.md", "DESIGN-20251231-235959.md"):
        (tmp_path / name).write_text(SEED_STYLE)
    found = newest(tmp_path)
    assert found is not None and found.name == "DESIGN-20260120-090000.md"


def test_the_prompt_references_the_design_and_says_how_to_validate_finish_and_work() -> None:
    text = build(design_of(SEED_STYLE), "DESIGN-20260119-143022.md")
    lines = text.splitlines()
    assert MIN_LINES <= len(lines) <= MAX_LINES
    assert lines[0] == "Implement the design in DESIGN-20260119-143022.md."
    assert "Only the design says this sentence" not in text  # referenced, not copied
    for heading in ("## Validation protocol", "## Working style", "## Completion"):
        assert heading in lines
    assert "- `pytest tests/api`" in lines and "- `pytest -q`" in lines
    judged = lines[lines.index("## Criteria that need your judgement") :]
    assert "- Errors return JSON with a message field" in judged
    assert "<promise>FEATURE_COMPLETE</promise>" in text


def test_the_prompt_stays_within_eighty_lines_however_long_the_design() -> None:
    many = "## Acceptance Criteria\n" + "".join(
        f"- criterion {i}: `make check{i}`\n- judged {i}\n" for i in range(40)
    )
    text = build(design_of(many), "DESIGN-x.md")
    assert MIN_LINES <= len(text.splitlines()) <= MAX_LINES
    assert "- ... and 28 more in DESIGN-x.md" in text


# --- `loopdeck start` ----------------------------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / ".git").mkdir()  # a workspace root; no git is run
    return root


def test_start_with_no_prompt_takes_the_newest_design_and_says_so(project: Path) -> None:
    (project / "DESIGN-20260101-000000.md").write_text("## Acceptance Criteria\n- old\n")
    (project / "DESIGN-20260119-143022.md").write_text(SEED_STYLE)
    done = run_loopdeck("-C", str(project), "start", "--no-github", "--no-tasks", cwd=project)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == (
        "loopdeck: starting from the newest design, DESIGN-20260119-143022.md (--design names another)"
    )
    assert "To finish, the agent outputs <promise>FEATURE_COMPLETE</promise>" in done.stdout
    state = StateStore(Workspace(project)).read()
    assert state is not None
    assert state.prompt.startswith("Implement the design in DESIGN-20260119-143022.md.")
    assert state.promise == "FEATURE_COMPLETE"
    assert state.verify == ["pytest -q", "ruff check .", "pytest tests/api"]
    record = state.extra["design"]
    assert record["path"] == "DESIGN-20260119-143022.md" and record["type"] == "feature"
    assert len(record["sha256"]) == 64 and record["criteria"][0]["command"] == "pytest tests/api"
    assert (project / "DESIGN-20260119-143022.md").read_text() == SEED_STYLE  # the person's file, unwritten


def test_a_prompt_given_takes_no_design_and_a_design_named_takes_the_prompt_as_a_note(project: Path) -> None:
    (project / "DESIGN-20260119-143022.md").write_text(SEED_STYLE)
    plain = run_loopdeck("-C", str(project), "start", "Fix the bug", "--no-github", "--no-tasks", cwd=project)
    assert plain.returncode == 0 and "design" not in plain.stdout
    state = StateStore(Workspace(project)).read()
    assert state is not None and state.prompt == "Fix the bug" and "design" not in state.extra
    (project / "docs").mkdir()
    (project / "docs" / "api.md").write_text("Type: api\n## Acceptance Criteria\n- fast\n")
    named = run_loopdeck(
        "-C", str(project), "start", "Mind the cache", "--design", "docs/api.md", "--force",
        "--no-github", "--no-tasks", "--completion-promise", "SHIPPED", cwd=project,
    )  # fmt: skip
    assert named.returncode == 0, named.stderr
    state = StateStore(Workspace(project)).read()
    assert state is not None and state.promise == "SHIPPED" and state.verify == []
    assert "From the person who started this loop:\nMind the cache" in state.prompt
    assert state.extra["design"]["path"] == "docs/api.md"


def test_a_bad_design_refuses_to_start_in_one_line_and_writes_nothing(project: Path) -> None:
    (project / "DESIGN-20260119-143022.md").write_text("# only a title\n")
    done = run_loopdeck("-C", str(project), "start", "--no-github", "--no-tasks", cwd=project)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "no acceptance criteria" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not StateStore(Workspace(project)).exists()
    missing = run_loopdeck("-C", str(project), "start", "--design", "DESIGN-nope.md", cwd=project)
    assert missing.returncode != 0 and "DESIGN-nope.md: not found" in missing.stderr


def test_the_designs_commands_wait_for_a_person_and_loopdeck_trust_lists_them(project: Path) -> None:
    (project / "DESIGN-20260119-143022.md").write_text(SEED_STYLE)
    done = run_loopdeck("-C", str(project), "start", "--no-github", "--no-tasks", cwd=project)
    assert "nothing of the loop runs until you confirm them: loopdeck trust" in done.stdout
    listed = run_loopdeck("-C", str(project), "trust", cwd=project)
    assert "  verification command: pytest tests/api" in listed.stdout
    assert "  verification command: pytest -q" in listed.stdout
    assert "prompt:" not in listed.stdout  # the person started it: only the design's commands wait
    confirmed = run_loopdeck("-C", str(project), "trust", "--yes", cwd=project)
    assert confirmed.returncode == 0, confirmed.stderr
    again = run_loopdeck("-C", str(project), "trust", cwd=project)
    assert "everything this loop names was confirmed" in again.stdout


def test_a_symlinked_design_is_refused_and_a_link_put_in_its_place_is_a_change(
    project: Path, tmp_path: Path
) -> None:
    from loop.design import lock

    outside = tmp_path / "elsewhere.md"
    outside.write_text(SEED_STYLE)
    (project / "DESIGN-link.md").symlink_to(outside)
    with pytest.raises(DesignError, match="is a symbolic link"):
        read(project / "DESIGN-link.md")
    done = run_loopdeck("-C", str(project), "start", "--design", "DESIGN-link.md", cwd=project)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "DESIGN-link.md: is a symbolic link" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not StateStore(Workspace(project)).exists()

    real = project / "DESIGN-20260119-143022.md"
    real.write_text(SEED_STYLE)
    state = StateStore(Workspace(project))
    started = run_loopdeck("-C", str(project), "start", "--no-github", "--no-tasks", cwd=project)
    assert started.returncode == 0, started.stderr
    loop = state.read()
    assert loop is not None and lock.changed(project, loop) is None
    real.unlink()
    real.symlink_to(outside)  # the very same bytes, through a link
    assert lock.changed(project, loop) == "DESIGN-20260119-143022.md"


def test_a_designs_refused_command_names_the_start_command_the_person_typed(project: Path) -> None:
    text = "## Acceptance Criteria\n- [ ] greeting file exists: `test -f greeting.txt`\n"
    (project / "DESIGN-20260119-143022.md").write_text(text)
    done = run_loopdeck(
        "-C", str(project), "start", "--design", "DESIGN-20260119-143022.md", "--no-github", cwd=project
    )
    assert done.returncode != 0 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert (
        "`loopdeck start --design DESIGN-20260119-143022.md --verify-allow 'test -f greeting.txt'`"
        in done.stderr
    )
    assert "loopdeck run" not in done.stderr
    allowed = run_loopdeck(
        "-C", str(project), "start", "--design", "DESIGN-20260119-143022.md", "--no-github",
        "--verify-allow", "test -f greeting.txt", cwd=project,
    )  # fmt: skip
    assert allowed.returncode == 0, allowed.stderr
