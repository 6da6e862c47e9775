"""Saved defaults, applied: what `run`, `start` and `/orchestrator-loop` take from the
configuration files for a value the command line did not give.

The one rule: a value from the workspace's file (`.loopdeck.toml`, pyproject.toml's
`[tool.loopdeck]`) came with the repository, so it is used only once a person on this machine
confirmed it (`loop.trust.config_unconfirmed`), as a state file's commands are; a value from
the user's own file is the person's. Nothing is taken from a repository silently: an
unconfirmed value is confirmed at a terminal (`confirm`), or the verb stops and says how.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from loop.core.errors import LoopdeckError
from loop.store.config import KEYS, Config, load
from loop.store.paths import Workspace

Confirm = Callable[[list[str], str], bool]
"""Asks a person to confirm the listed values of the named file; True when they do."""


@dataclass(frozen=True)
class Defaults:
    """The saved values a verb uses, and the files they come from."""

    config: Config
    values: dict[str, Any]

    def get(self, key: str, fallback: Any = None) -> Any:
        value = self.values.get(key)
        return fallback if value is None else value

    def where(self, key: str) -> str:
        """The file a used value comes from, for a message about it (`… (agent)`)."""
        found = self.config.origin(key)
        return f"{found.shown} ({key})" if found is not None else key


def settle(
    ws: Workspace, wanted: Iterable[str], *, confirm: Confirm | None = None, by: str = "run"
) -> Defaults:
    """The saved values for the keys in `wanted` (the ones the command line left unset). A
    value the workspace's file contributes that nobody here confirmed is asked about through
    `confirm` (then recorded), or refused: LoopdeckError naming the values and how to confirm."""
    from loop import trust

    config = load(ws.root)
    keys = [k for k in wanted if k in KEYS and config.get(k) is not None]
    contributed = config.from_workspace(keys)
    pending = trust.config_unconfirmed(ws, contributed) if contributed else []
    if pending:
        shown = config.project.shown
        if confirm is None or not confirm(pending, shown):
            listed = "\n".join(f"  {line}" for line in pending)
            raise LoopdeckError(
                f"{shown} names values nobody on this machine confirmed:\n{listed}\n"
                "Nothing was run. Review them with `loopdeck config`, confirm them with "
                "`loopdeck config --trust`, or give these options on the command line."
            )
        try:
            trust.record_config(ws, contributed, by)
        except OSError as exc:
            raise LoopdeckError(
                f"could not record the confirmation in {trust.home(ws.root)}: {exc.strerror or exc}"
            ) from None
    return Defaults(config, {k: config.get(k) for k in keys})


def limits(defaults: Defaults) -> dict[str, int]:
    """The limits the saved values set, as the state records them (cost in millionths)."""
    out: dict[str, int] = {}
    cost = defaults.get("max_cost")
    if cost is not None:
        out["max_cost_micro_usd"] = round(float(cost) * 1_000_000)
    for key in ("stuck_after", "same_error_after"):
        value = defaults.get(key)
        if value is not None:
            out[key] = int(value)
    return out
