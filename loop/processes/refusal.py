"""What the sandbox refused an agent, read from its output: the lines to journal and the one
line its next prompt carries, so the agent learns that a refusal is expected and stops retrying."""

from __future__ import annotations

import re

REFUSED = re.compile(
    rb"read-only file system|EROFS|operation not permitted|permission denied|device or resource busy",
    re.IGNORECASE,  # zsh says `read-only file system`
)
GUARDED_ONLY = (b"permission denied", b"device or resource busy")
"""Refusals that are the sandbox's only about loopdeck's or git's files (`Device or resource
busy`: a rename over a file mounted read-only, as `git config` does)."""
MAX_REFUSALS = 5
LINE_CHARS = 200


def lines(output: bytes, guarded: tuple[str, ...] = (".claude", ".git", "loopdeck")) -> list[str]:
    """The lines of the agent's output that show the sandbox refusing something: a read-only
    file system anywhere, `Permission denied` only about loopdeck's or git's files (a plain
    permission error is the project's own business). At most five, each cut to 200 characters."""
    found: list[str] = []
    for raw in output.splitlines():
        match = REFUSED.search(raw)
        if match is None:
            continue
        line = raw.decode("utf-8", "replace").strip()
        if match.group(0).lower() in GUARDED_ONLY and not any(g in line for g in guarded):
            continue
        if "The sandbox refused:" in line:
            continue  # our own note, echoed back by the agent
        if len(line) > LINE_CHARS:  # a long line (a JSON event): the part around the refusal
            at = max(0, len(raw[: match.start()].decode("utf-8", "replace")) - LINE_CHARS // 2)
            line = line[at : at + LINE_CHARS]
        if line not in found:
            found.append(line)
        if len(found) >= MAX_REFUSALS:
            break
    return found


def note(lines: list[str]) -> str:
    """The one line the next prompt carries about what the sandbox refused."""
    return (
        f"The sandbox refused: {lines[0][:LINE_CHARS]} (loopdeck's files, git's config and folders "
        "outside the workspace are read-only; this is expected)"
    )
