"""A person's yes at this terminal, and its record: what `trust` and `config --trust` both ask
before anything a workspace file names may run. One place, so the two never drift apart in
what they accept (only `y` or `yes`, never a pipe's silence)."""

from __future__ import annotations

import sys
from collections.abc import Callable

from loop import trust
from loop.core.errors import LoopdeckError
from loop.store.paths import Workspace


def confirm_and_record(ws: Workspace, yes: bool, record: Callable[[], object]) -> None:
    """Ask at the terminal (unless `--yes` said it), then `record` the confirmation; a refusal,
    no terminal or a record that cannot be written is one clear error, and nothing changed."""
    if not yes:
        if not sys.stdin.isatty():
            raise LoopdeckError("not confirmed: confirm at a terminal, or give --yes")
        try:
            answer = input("Confirm? [y/N] ").strip().lower()
        except EOFError:
            answer = ""
        if answer not in ("y", "yes"):
            raise LoopdeckError("not confirmed; nothing changed")
    try:
        record()
    except OSError as exc:
        raise LoopdeckError(
            f"could not record the confirmation in {trust.home(ws.root)}: {exc.strerror or exc}"
        ) from None
    print("loopdeck: confirmed on this machine")
