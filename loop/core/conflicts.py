"""What the agent turn that resolves a conflict reads: the files, the hunks, and both sides'
intent (the task being landed and the tasks, or commits, that put the other lines on the loop's
branch), so it keeps both instead of guessing which side wins. The driver gathers the facts
(`loop.repo.landing.sides`, the graph's titles); the words are here."""

from __future__ import annotations

from collections.abc import Sequence

from loop.core.board import FEEDBACK_CHARS


def side_line(task: str, title: str) -> str:
    """One side of a conflict, as the agent and a person read it."""
    if task:
        return f"task {task}: {title}" if title else f"task {task}"
    return f"a commit: {title}"


def conflict_feedback(
    files: Sequence[str], hunks: str, ours: str = "", theirs: Sequence[tuple[str, str]] = ()
) -> str:
    """The rework prompt of a branch that conflicted with the loop's: `ours` the title of the
    task being landed, `theirs` (task, title) of what landed the other lines (title alone for a
    commit loopdeck did not make)."""
    names = "\n".join(f"- {f}" for f in files)
    intent = ""
    if ours or theirs:
        others = "\n".join(f"- {side_line(t, title)}" for t, title in theirs) or "- (not known)"
        intent = (
            f"\nBoth sides' intent: your task ({ours or 'this task'}) and what landed the other "
            f"lines on the loop's branch:\n{others}\nKeep what each of them meant to do.\n"
        )
    return (
        "MERGE CONFLICT: your branch conflicts with work merged into the loop's branch since you "
        f"started. The loop's branch is now merged into yours; resolve the conflict markers "
        f"(<<<<<<< ======= >>>>>>>) in these files, keeping the intent of both sides:\n{names}\n"
        f"{intent}\nThe conflicting hunks:\n{hunks.strip()[-FEEDBACK_CHARS // 2 :]}"
    )
