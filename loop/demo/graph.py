"""A small task graph for the demo of `run --workers`: dependencies, and one file conflict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DEMO: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("1", "Sketch the data model", (), ("src/model.py",)),
    ("2", "Add the storage layer", ("1",), ("src/store.py",)),
    ("3", "Expose the list endpoint", ("1",), ("src/api.py",)),
    ("4", "Expose the create endpoint", ("1",), ("src/api.py", "src/validate.py")),
    ("5", "Write the README section", (), ("README.md",)),
    ("6", "Handle errors consistently", ("2",), ("src/errors.py",)),
    ("7", "Add a smoke test", ("3", "4"), ("tests/test_smoke.py",)),
    ("8", "Add the changelog", (), ("CHANGELOG.md",)),
)
"""Tasks 3 and 4 both change src/api.py: whichever starts second is deferred."""


def task_json(
    ident: str, subject: str, blocked_by: tuple[str, ...], files: tuple[str, ...]
) -> dict[str, Any]:
    return {
        "id": ident,
        "subject": subject,
        "description": f"{subject}, in {', '.join(files)}.",
        "status": "pending",
        "blocks": [],
        "blockedBy": list(blocked_by),
        "metadata": {"target_files": list(files)},
    }


def create(folder: Path, tasks: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...]], ...] = DEMO) -> Path:
    """Write `tasks` as a Claude Code Tasks list folder (one `<id>.json` a task)."""
    folder.mkdir(parents=True, exist_ok=True)
    blocks: dict[str, list[str]] = {}
    for ident, _subject, blocked_by, _files in tasks:
        for other in blocked_by:
            blocks.setdefault(other, []).append(ident)
    for ident, subject, blocked_by, files in tasks:
        obj = task_json(ident, subject, blocked_by, files)
        obj["blocks"] = blocks.get(ident, [])
        (folder / f"{ident}.json").write_text(json.dumps(obj, indent=2) + "\n")
    return folder
