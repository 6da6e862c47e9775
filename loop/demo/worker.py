"""A scripted stand-in for one parallel worker: `python -m loop.demo.worker [options]`.

It reads its prompt (stdin, or `--prompt-file`), finds its task and the files it may change
there (only its own: that is all the prompt holds), writes a line into each, and reports.
Options make it misbehave on purpose, once per task: break its work (an audit rejects it),
ask a question, or hang without a word (a worker holding its locks forever).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import time
from pathlib import Path

from loop.demo.agent import SCRATCH

TASK = re.compile(r"^Your task \(([^)]*)\): (.*)$", re.MULTILINE)
FILES = re.compile(r"^Files you may change[^\n]*\n((?:- .*\n?)*)", re.MULTILINE)


def parse(prompt: str) -> tuple[str, str, list[str]]:
    """(task id, subject, files) from a worker's prompt."""
    task = TASK.search(prompt)
    files = FILES.search(prompt)
    names = [
        line[2:].strip() for line in (files.group(1) if files else "").splitlines() if line.startswith("- ")
    ]
    return (
        task.group(1) if task else "?",
        task.group(2).strip() if task else "?",
        [n for n in names if n and not n.startswith("(")],
    )


def _once(root: Path, what: str, task: str) -> bool:
    """True the first time `what` happens to `task` (remembered in the workspace)."""
    path = root / SCRATCH / "demo-worker.json"
    try:
        memory = json.loads(path.read_text())
    except (OSError, ValueError):
        memory = {}
    seen = memory.setdefault(what, [])
    if task in seen:
        return False
    seen.append(task)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(memory))
    os.replace(tmp, path)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="loopdeck-demo-worker", description=__doc__)
    parser.add_argument("--prompt-file")
    parser.add_argument("--sleep", type=float, nargs=2, default=(0.0, 0.0), metavar=("MIN", "MAX"))
    parser.add_argument("--break-on", action="append", default=[], metavar="TASK")
    parser.add_argument("--ask-on", action="append", default=[], metavar="TASK")
    parser.add_argument("--hang-on", action="append", default=[], metavar="TASK")
    parser.add_argument(
        "--add-task-on",
        action="append",
        default=[],
        metavar="TASK",
        help="while on TASK, add a follow-up task to the Claude Code task list (CLAUDE_CODE_TASK_LIST_ID)",
    )
    parser.add_argument(
        "--stray",
        action="append",
        default=[],
        metavar="TASK:FILE",
        help="while on TASK, also write FILE, which the task does not declare (a merge may conflict)",
    )
    parser.add_argument("--seed", type=int)
    args = parser.parse_args(argv)
    prompt = Path(args.prompt_file).read_text() if args.prompt_file else sys.stdin.read()
    root = Path.cwd()
    task, subject, files = parse(prompt)
    if task in args.hang_on:
        while True:
            time.sleep(60)
    low, high = args.sleep
    if high > 0:
        time.sleep(random.Random(args.seed).uniform(low, high))
    if task in args.ask_on and "A PERSON ANSWERED" not in prompt and _once(root, "asked", task):
        print(f"Before task {task}: <question>Should {subject!r} keep the old format?</question>")
        return 0
    resolve(root, prompt)
    broken = task in args.break_on and "AUDIT REJECTED" not in prompt and _once(root, "broken", task)
    for name in files:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        before = path.read_text(encoding="utf-8") if path.exists() else ""
        with path.open("a", encoding="utf-8") as out:
            line = f"task {task}: {subject}{' BROKEN' if broken else ''}\n"
            if line not in before:  # a turn that goes on from an earlier one adds nothing twice
                out.write(line)
            if (
                not broken
                and "AUDIT REJECTED" in prompt
                and f"task {task}: fixed after the audit\n" not in before
            ):
                out.write(f"task {task}: fixed after the audit\n")
    if not broken:
        for name in files:  # a rework leaves no broken line behind
            path = root / name
            text = path.read_text()
            if f"task {task}: {subject} BROKEN\n" in text:
                _rewrite(path, text.replace(f"task {task}: {subject} BROKEN\n", ""))
    for stray in args.stray:
        on, _sep, name = stray.partition(":")
        note = f"task {task}: {subject} (noted)\n"
        if on == task and name and note not in ((root / name).read_text() if (root / name).exists() else ""):
            with (root / name).open("a", encoding="utf-8") as out:
                out.write(note)
    if task in args.add_task_on and _once(root, "added", task):
        _add_follow_up(task)
    print(f"Done task {task}: {subject} ({', '.join(files) or 'no files'}).")
    return 0


CONFLICTED = re.compile(r"resolve the conflict markers.*?:\n((?:- .*\n?)*)", re.DOTALL)


def resolve(root: Path, prompt: str) -> None:
    """A worker told its branch conflicts resolves it the simple way: both sides kept."""
    found = CONFLICTED.search(prompt)
    for line in (found.group(1) if found else "").splitlines():
        path = root / line[2:].strip()
        if line.startswith("- ") and path.is_file():
            kept = [
                ln
                for ln in path.read_text().splitlines(keepends=True)
                if not ln.startswith(("<<<<<<<", "=======", ">>>>>>>"))
            ]
            _rewrite(path, "".join(kept))


def _rewrite(path: Path, text: str) -> None:
    """Replace a file in one rename: a worker killed mid-write (its runner killed, and the
    run's processes with it) leaves the file as it was, not emptied for the next attempt to
    append to."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _add_follow_up(task: str) -> None:
    """What a Claude Code worker does with TaskCreate: a new task file in the shared list."""
    from loop.sources.claude_tasks import claude_home

    list_id = os.environ.get("CLAUDE_CODE_TASK_LIST_ID")
    if not list_id:
        return
    folder = claude_home() / "tasks" / list_id
    ident = f"{task}01"
    obj = {
        "id": ident,
        "subject": f"Follow-up of task {task}",
        "description": "Found while working.",
        "status": "pending",
        "blocks": [],
        "blockedBy": [task],
        "metadata": {"target_files": [f"follow-up-{task}.md"]},
    }
    tmp = folder / f".{ident}.json.tmp"
    tmp.write_text(json.dumps(obj, indent=2))
    os.replace(tmp, folder / f"{ident}.json")


AUDIT = '''"""The demo's audit: the task's own files (LOOPDECK_FILES) hold no BROKEN line."""
import os
import pathlib
import sys

names = [n for n in os.environ.get("LOOPDECK_FILES", "").splitlines() if n]
broken = [n for n in names if pathlib.Path(n).exists() and "BROKEN" in pathlib.Path(n).read_text()]
if broken:
    print("REJECTED: broken lines in", ", ".join(broken))
    sys.exit(1)
print("approved:", ", ".join(names) or "no files")
'''


if __name__ == "__main__":
    sys.exit(main())
