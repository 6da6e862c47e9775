"""The architecture's rules, checked on the source: one module writes the loop's state."""

from __future__ import annotations

import ast

from tests.conftest import REPO

WRITER = {"loop/drivers/writer.py", "loop/store/state.py"}
"""`loop.drivers.writer` carries out the engine's results; `loop.store.state` is the file's own door."""

WRITES = {"write", "restore_backup", "archive", "archive_ending", "mark_current", "_keep_previous"}
"""Calls that write the state file, its backup, the archive or the task file's skip marks."""


def _writes(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in WRITES - {"write"}:
            found.append((node.lineno, func.id))
        elif isinstance(func, ast.Attribute) and func.attr in WRITES:
            receiver = ast.unparse(func.value)
            if func.attr != "write" or "store" in receiver.lower() or "StateStore" in receiver:
                found.append((node.lineno, f"{receiver}.{func.attr}"))
    return found


def test_only_the_writer_writes_the_state() -> None:
    offenders = []
    for path in sorted([*REPO.glob("loop/**/*.py"), *REPO.glob("tui/**/*.py")]):
        rel = path.relative_to(REPO).as_posix()
        if rel in WRITER or rel == "loop/store/archive.py":
            continue
        for line, call in _writes(ast.parse(path.read_text(), rel)):
            if call.startswith("writer."):
                continue  # through the writer: that is the rule
            offenders.append(f"{rel}:{line}: {call}")
    assert offenders == [], "only loop/drivers/writer.py may write the state, the archive or skip marks"


def test_the_check_catches_a_direct_write() -> None:
    bad = ast.parse(
        "from loop.store.state import StateStore\nStateStore(ws).write(state)\nstore.restore_backup()\n"
    )
    assert [call for _, call in _writes(bad)] == ["StateStore(ws).write", "store.restore_backup"]
