"""One registry of the monitor's actions: the bindings, the footer, the help and the palette
are all made from it, so a key, its label and its explanation never disagree.

Each action's binding has an id (`loop.pause`), which is what a keymap file names to rebind it
(Textual's `App.set_keymap`). The file is `$LOOPDECK_KEYMAP`, else
`$XDG_CONFIG_HOME/loopdeck/keymap.toml` (`~/.config/loopdeck/keymap.toml`):

    [keys]
    "loop.pause" = "P"
    "view.output" = "o,f2"
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from textual.binding import Binding, BindingType


@dataclass(frozen=True)
class Action:
    """One thing a person can do from the main screen."""

    name: str
    """The action (`action_<name>` on the app)."""
    key: str
    """The default key(s), Textual's names, comma-separated."""
    label: str
    """The footer's word."""
    title: str
    """The palette's and the help's name for it."""
    help: str
    """What it does: the help's line, the palette's detail and the key's tooltip."""
    id: str
    """The binding id a keymap file rebinds."""
    show: bool = True
    """In the footer."""
    palette: bool = True
    """In the command palette."""


ACTIONS: tuple[Action, ...] = (
    Action(
        "pause",
        "p",
        "Pause",
        "Pause the loop",
        "the iteration in progress finishes, then the loop waits",
        "loop.pause",
    ),
    Action(
        "resume",
        "r",
        "Resume",
        "Resume the loop",
        "continue a paused or interrupted loop",
        "loop.resume",
    ),
    Action(
        "skip",
        "s",
        "Skip",
        "Skip the current task",
        "mark it skipped (or skip the current verification loop)",
        "loop.skip",
    ),
    Action(
        "complete",
        "c",
        "Complete",
        "Force completion",
        "archive the loop as complete now (asks first)",
        "loop.complete",
    ),
    Action(
        "stop", "x", "Stop", "Stop the loop", "status stopped; the loop is kept (asks first)", "loop.stop"
    ),
    Action("set_max", "m", "Max", "Set max iterations", "move the escalation threshold", "loop.set_max"),
    Action(
        "say",
        "t",
        "Tell",
        "Tell the agent something",
        "a note for its next prompt, delivered once",
        "loop.say",
        show=False,
    ),
    Action(
        "restore_backup",
        "b",
        "Restore",
        "Restore the state backup",
        "put the last good state file back",
        "state.restore",
    ),
    Action(
        "toggle_output",
        "o",
        "Output",
        "Agent output full screen",
        "the current iteration's output alone (again to go back)",
        "view.output",
    ),
    Action(
        "toggle_journal",
        "l",
        "Journal",
        "Journal full screen",
        "show the journal alone (again to go back)",
        "view.journal",
    ),
    Action(
        "search",
        "slash",
        "Search",
        "Search the journal or output",
        "filter the focused log by text",
        "view.search",
        show=False,
    ),
    Action("help", "question_mark", "Help", "Help", "keys and what they do", "app.help"),
    Action("quit", "q", "Quit", "Quit the monitor", "the loop keeps going", "app.quit", palette=False),
)

BY_NAME = {action.name: action for action in ACTIONS}


def bindings() -> list[BindingType]:
    """The app's BINDINGS, from the registry, plus the keys that are no action of their own."""
    made: list[BindingType] = [
        Binding(a.key, a.name, a.label, show=a.show, id=a.id, tooltip=a.help) for a in ACTIONS
    ]
    made.append(Binding("escape", "clear_search", "Clear search", show=False))
    return made


def key_names(keys: str) -> str:
    """`question_mark` → `?`: how a person writes the key."""
    words = {"question_mark": "?", "slash": "/", "escape": "esc"}
    return ", ".join(words.get(k.strip(), k.strip()) for k in keys.split(","))


def help_markdown(keys: dict[str, str]) -> str:
    """The help screen's text, with the keys as they are now bound (after any keymap)."""
    rows = "\n".join(
        f"| `{key_names(keys.get(a.id, a.key))}` | {a.title.lower()}: {a.help} |" for a in ACTIONS
    )
    return (
        "# loopdeck\n\n"
        "Watches the loop in this workspace and steers it. Keys send commands to the loop's control\n"
        "queue; the driver applies them: the runner within a second, a hook-driven loop at the end of\n"
        "the agent's turn. Until then the command shows as pending in the top bar, and keys that\n"
        "would contradict it are off. Quitting never stops the loop.\n\n"
        "| key | does |\n| --- | --- |\n"
        f"{rows}\n| `ctrl+p` | every action, by name |\n\n"
        "Keys can be rebound in `~/.config/loopdeck/keymap.toml` (or `$LOOPDECK_KEYMAP`), by id:\n"
        + ", ".join(f"`{a.id}`" for a in ACTIONS)
        + ".\n"
    )


def keymap_path() -> Path:
    explicit = os.environ.get("LOOPDECK_KEYMAP")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "loopdeck" / "keymap.toml"


def load_keymap(path: Path | None = None) -> tuple[dict[str, str], str | None]:
    """(binding id → keys, a problem to tell the person or None). A missing file is no problem;
    a broken one is reported and ignored: the monitor opens with its default keys."""
    path = path or keymap_path()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}, None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return {}, f"keymap {path} ignored: {exc}"
    table = data.get("keys", data)
    known = {a.id for a in ACTIONS}
    keymap = {k: v for k, v in table.items() if k in known and isinstance(v, str) and v.strip()}
    unknown = sorted(k for k in table if k not in known)
    problem = f"keymap {path}: unknown ids {', '.join(unknown)}" if unknown else None
    return keymap, problem
