"""One registry of the monitor's keys, for every screen and widget: the bindings, the footer, the
help and the palette are all made from it, so a key, its label and its explanation never
disagree, and every key can be rebound.

Each key has an id (`loop.pause`), which is what a keymap file names to rebind it (Textual's
`App.set_keymap`: the keymap applies to every binding with that id, on whichever screen or widget
holds it). One id means one key wherever it appears: `p` pauses the loop on the main screen and
in the escalation prompt alike, and rebinding `loop.pause` moves both. The file is
`$LOOPDECK_KEYMAP`, else `$XDG_CONFIG_HOME/loopdeck/keymap.toml` (`~/.config/loopdeck/keymap.toml`):

    [keys]
    "loop.pause" = "P"
    "view.output" = "o,f2"
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from rich.console import RenderableType
from textual.binding import Binding, BindingType


@dataclass(frozen=True)
class Key:
    """One key of one screen or widget (its `scope`)."""

    id: str
    """The binding id a keymap file rebinds (the same id in several scopes: one key for all)."""
    key: str
    """The default key(s), Textual's names, comma-separated."""
    action: str
    """The action the binding runs, in its scope's namespace (`pause`, `choose('skip')`)."""
    label: str
    """The footer's word."""
    title: str
    """The palette's and the help's name for it."""
    help: str
    """What it does: the help's line, the palette's detail and the key's tooltip."""
    scope: str
    """Where the key works: one of `SCOPES`."""
    show: bool = True
    """In the footer (when it applies)."""
    palette: bool = True
    """In the command palette (when it applies)."""
    group: str | None = None
    """The footer shows the keys of one group together under this word (short on 80 columns)."""


SCOPES: dict[str, str] = {
    "app": "Steering the loop (the main screen)",
    "main": "Views (the main screen)",
    "monitor": "Other loops",
    "workers": "The workers panel (a worker row selected)",
    "search": "Searching the journal or the output",
    "escalation": "The escalation prompt",
    "confirm": "A yes-or-no question",
    "undo": "Picking a landed task to undo",
    "resume": "The resume prompt",
    "number": "Max iterations",
    "note": "A note for the agent",
    "question": "The agent's question",
    "text": "Help and a verification's output",
    "progress": "The progress charts",
    "fleet": "The fleet",
    "neighbour": "Another tool's loop (read-only)",
}
"""Each scope, as the help names it, in the help's order."""

READ_ONLY = "read-only: this loop is run by its own tool, not by loopdeck"

BACK = "escape"

KEYS: tuple[Key, ...] = (
    # --- the main screen (MainScreen): the loop, steered by the app --------------------------------------
    Key(
        "loop.pause",
        "p",
        "app.pause",
        "Pause",
        "Pause the loop",
        "the iteration in progress finishes, then the loop waits",
        "app",
    ),
    Key(
        "loop.resume",
        "r",
        "app.resume",
        "Resume",
        "Resume the loop",
        "continue a paused or interrupted loop",
        "app",
    ),
    Key(
        "loop.skip",
        "s",
        "app.skip",
        "Skip",
        "Skip the current task",
        "mark it skipped (or skip the current verification loop)",
        "app",
    ),
    Key(
        "loop.complete",
        "c",
        "app.complete",
        "Complete",
        "Force completion",
        "archive the loop as complete now (asks first)",
        "app",
    ),
    Key(
        "loop.stop",
        "x",
        "app.stop",
        "Stop",
        "Stop the loop",
        "status stopped; the loop is kept (asks first)",
        "app",
    ),
    Key(
        "loop.set_max",
        "m",
        "app.set_max",
        "Max",
        "Set max iterations",
        "move the escalation threshold",
        "app",
    ),
    Key(
        "loop.say",
        "t",
        "app.say",
        "Tell",
        "Tell the agent something",
        "a note for its next prompt, delivered once",
        "app",
    ),
    Key(
        "state.restore",
        "b",
        "app.restore_backup",
        "Restore",
        "Restore the state backup",
        "put the last good state file back",
        "app",
    ),
    Key(
        "task.undo",
        "u",
        "app.undo",
        "Undo",
        "Undo a landed task",
        "revert a task the workers landed, reopen it (asks first; not while a runner drives the loop)",
        "app",
    ),
    # --- the main screen: its views ----------------------------------------------------------------------
    Key(
        "view.output",
        "o",
        "toggle_output",
        "Output",
        "Agent output full screen",
        "the current iteration's output alone (again, or escape, to go back)",
        "main",
    ),
    Key(
        "view.journal",
        "l",
        "toggle_journal",
        "Log",
        "Journal full screen",
        "the journal alone (again, or escape, to go back)",
        "main",
    ),
    Key(
        "view.progress",
        "g",
        "app.progress",
        "Progress",
        "Progress charts",
        "tasks, tests, cost and turn durations per iteration (again, or escape, to go back)",
        "main",
        show=False,
    ),
    Key(
        "view.search",
        "slash",
        "search",
        "Search",
        "Search the journal or output",
        "filter the log on screen by text",
        "main",
        show=False,
    ),
    Key(
        "app.back",
        BACK,
        "back",
        "Back",
        "Back",
        "leave full screen, clear a search, or go back to the fleet",
        "main",
    ),
    # --- the main screen: other loops (MonitorApp; none for the plain app) -------------------------------
    Key(
        "loop.next",
        "n",
        "app.next_loop",
        "Next loop",
        "Next loop in this folder",
        "another tool's loop here, watched read-only",
        "monitor",
    ),
    Key("view.fleet", "f", "app.fleet", "Fleet", "The fleet", "every loop of the folders watched", "monitor"),
    # --- last on the main screen's footer ----------------------------------------------------------------
    Key("app.help", "question_mark", "app.help", "Help", "Help", "every key and what it does", "app"),
    Key("app.quit", "q", "app.quit", "Quit", "Quit the monitor", "the loop keeps going", "app"),
    # --- the workers panel (WorkersPanel) ----------------------------------------------------------------
    Key(
        "worker.skip",
        "k",
        "skip_worker",
        "Skip its task",
        "Skip the worker's task",
        "the selected worker's task is skipped",
        "workers",
        show=False,
    ),
    Key(
        "worker.stop",
        "w",
        "stop_worker",
        "Stop worker",
        "Stop the worker",
        "the selected worker stops; its task goes back to pending",
        "workers",
        show=False,
    ),
    Key(
        "worker.answer",
        "a",
        "answer_worker",
        "Answer worker",
        "Answer the worker",
        "the selected worker asked a question",
        "workers",
        show=False,
    ),
    # --- a search box (SearchInput) ----------------------------------------------------------------------
    Key(
        "search.keep",
        "enter",
        "keep",
        "Keep filter",
        "Keep the search",
        "the filter stays; the keys work again",
        "search",
        palette=False,
    ),
    Key(
        "search.clear",
        "escape",
        "clear",
        "Clear search",
        "Clear the search",
        "every line again",
        "search",
        palette=False,
    ),
    # --- the escalation prompt: the main screen's keys ---------------------------------------------------
    Key(
        "loop.resume",
        "r",
        "choose('continue')",
        "Continue",
        "Continue",
        "raise the limit and resume",
        "escalation",
    ),
    Key("loop.pause", "p", "choose('pause')", "Pause", "Pause", "leave the loop paused", "escalation"),
    Key(
        "loop.skip",
        "s",
        "choose('skip')",
        "Skip task",
        "Skip the task",
        "skip the current task and go on",
        "escalation",
    ),
    Key(
        "loop.complete",
        "c",
        "choose('complete')",
        "Complete",
        "Force completion",
        "archive the loop as complete",
        "escalation",
    ),
    Key(
        "view.journal",
        "l",
        "choose('log')",
        "Log",
        "Open the journal",
        "the journal full screen",
        "escalation",
    ),
    Key(
        "app.back",
        BACK,
        "choose('dismiss')",
        "Later",
        "Later",
        "close the prompt; the loop stays as it is",
        "escalation",
    ),
    # --- yes or no ---------------------------------------------------------------------------------------
    Key("confirm.yes", "y", "answer(True)", "Yes", "Yes", "answer yes", "confirm"),
    Key("confirm.no", "n", "answer(False)", "No", "No", "answer no", "confirm"),
    Key("app.back", BACK, "answer(False)", "Cancel", "Cancel", "answer no", "confirm"),
    # --- picking a landed task to undo (arrows and enter pick) ---------------------------------------------
    Key("app.back", BACK, "cancel", "Cancel", "Cancel", "undo nothing", "undo"),
    # --- the resume prompt -------------------------------------------------------------------------------
    Key("resume.yes", "y,enter", "answer(True)", "Resume", "Resume", "resume the loop", "resume"),
    Key(
        "resume.no", "n", "answer(False)", "Leave paused", "Leave paused", "leave the loop as it is", "resume"
    ),
    Key(
        "app.back",
        BACK,
        "answer(False)",
        "Leave paused",
        "Leave paused",
        "leave the loop as it is",
        "resume",
        show=False,
    ),
    Key(
        "resume.keep",
        "c",
        "git('continue')",
        "Keep changes",
        "Keep the changes",
        "continue with uncommitted work as it is",
        "resume",
        show=False,
    ),
    Key(
        "resume.commit",
        "m",
        "git('commit')",
        "Commit changes",
        "Commit the changes",
        "commit uncommitted work first",
        "resume",
        show=False,
    ),
    Key(
        "resume.stash",
        "s",
        "git('stash')",
        "Stash changes",
        "Stash the changes",
        "stash uncommitted work first (a named stash)",
        "resume",
        show=False,
    ),
    # --- prompts with a text box -------------------------------------------------------------------------
    Key("app.back", BACK, "cancel", "Cancel", "Cancel", "keep the limit as it is", "number"),
    Key("app.back", BACK, "cancel", "Cancel", "Cancel", "send nothing", "note"),
    Key("app.back", BACK, "later", "Later", "Later", "answer later", "question"),
    # --- help, a verification's output -------------------------------------------------------------------
    Key("app.back", BACK, "close", "Close", "Close", "back to the monitor", "text"),
    Key(
        "text.close",
        "q,enter",
        "close",
        "Close",
        "Close",
        "back to the monitor",
        "text",
        show=False,
        palette=False,
    ),
    # --- the progress charts ----------------------------------------------------------------------------
    Key("app.back", BACK, "close", "Back", "Back", "back to the monitor", "progress"),
    Key(
        "view.progress",
        "g",
        "close",
        "Back",
        "Back",
        "back to the monitor",
        "progress",
        show=False,
        palette=False,
    ),
    # --- the fleet ---------------------------------------------------------------------------------------
    Key(
        "fleet.open",
        "enter",
        "select_cursor",
        "Open",
        "Open the loop",
        "the selected loop's monitor",
        "fleet",
    ),
    Key(
        "app.quit",
        "q",
        "app.quit",
        "Quit",
        "Quit the monitor",
        "every loop keeps going",
        "fleet",
        palette=False,
    ),
    # --- another tool's loop -----------------------------------------------------------------------------
    Key("loop.pause", "p", "steer('pause')", "Pause", "Pause", READ_ONLY, "neighbour", palette=False),
    Key("loop.resume", "r", "steer('resume')", "Resume", "Resume", READ_ONLY, "neighbour", palette=False),
    Key("loop.skip", "s", "steer('skip')", "Skip", "Skip", READ_ONLY, "neighbour", palette=False),
    Key("loop.stop", "x", "steer('stop')", "Stop", "Stop", READ_ONLY, "neighbour", palette=False),
    Key(
        "loop.set_max",
        "m",
        "steer('set_max')",
        "Max",
        "Max iterations",
        READ_ONLY,
        "neighbour",
        palette=False,
    ),
    Key(
        "loop.cancel",
        "c",
        "cancel_loop",
        "Cancel loop",
        "Cancel the loop",
        "the plugin's way: its state file removed, a copy kept",
        "neighbour",
    ),
    Key(
        "loop.next",
        "n",
        "leave('next')",
        "Next loop",
        "Next loop in this folder",
        "the next loop here",
        "neighbour",
    ),
    Key(
        "app.back", BACK, "leave('back')", "Back", "Back", "back to loopdeck's loop or the fleet", "neighbour"
    ),
    Key(
        "app.quit",
        "q",
        "app.quit",
        "Quit",
        "Quit the monitor",
        "the loop keeps going",
        "neighbour",
        palette=False,
    ),
)

IDS: frozenset[str] = frozenset(k.id for k in KEYS)
"""Every id a keymap file may name."""
DEFAULTS: dict[str, str] = {k.id: k.key for k in KEYS}
"""Each id's default key(s) (one key per id, wherever it appears)."""


def in_scope(scope: str) -> tuple[Key, ...]:
    return tuple(k for k in KEYS if k.scope == scope)


def bindings(
    *scopes: str, only: Collection[str] | None = None, skip: Collection[str] = ()
) -> list[BindingType]:
    """A screen's or a widget's BINDINGS, from the registry, in its order (the footer's): the
    keys of `scopes`, `only` those actions (a widget of the screen holding one of them) or all
    but those to `skip`."""
    return [
        Binding(
            k.key,
            k.action,
            k.label,
            show=k.show,
            id=k.id,
            tooltip=f"{k.label}: {k.help}" if k.group else k.help,
            group=Binding.Group(k.group, compact=True) if k.group else None,
        )
        for k in KEYS
        if k.scope in scopes and (only is None or k.action in only) and k.action not in skip
    ]


def key_label(app: object, binding_id: str) -> str:
    """A button's key as bound now (`[r]`, or the keymap's first key for the id), escaped for
    Textual's markup."""
    keymap = getattr(app, "keymap", {})
    keys = keymap.get(binding_id, DEFAULTS[binding_id]) if isinstance(keymap, dict) else DEFAULTS[binding_id]
    return "\\[" + key_names(keys).split(",")[0].strip() + "]"


def key_names(keys: str) -> str:
    """`question_mark` → `?`: how a person writes the key."""
    words = {"question_mark": "?", "slash": "/", "escape": "esc"}
    return ", ".join(words.get(k.strip(), k.strip()) for k in keys.split(","))


HELP_INTRO = "Every key of every screen, as bound now; ctrl+p lists the ones that apply, by name."
HELP_OUTRO = (
    "Keys send commands to the loop's control queue; the driver applies them: the runner within a "
    "second, a hook-driven loop at the end of the agent's turn. Until then the command shows as "
    "pending in the top bar, and keys that would contradict it are off. Quitting never stops the "
    "loop.\n\n"
    "Any key can be rebound in ~/.config/loopdeck/keymap.toml (or $LOOPDECK_KEYMAP), by its id: "
    '[keys] then "loop.pause" = "P". One id is one key on every screen.'
)


def help_table(keys: dict[str, str]) -> RenderableType:
    """The help screen's body: every key of every screen, one row each (its key, what it does,
    the id that rebinds it), a heading per screen. Dense on purpose: 80x24 shows a dozen keys
    at a time, where a Markdown table of bordered cells showed two."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    parts: list[RenderableType] = [Text(HELP_INTRO)]
    for scope, heading in SCOPES.items():
        table = Table(box=None, show_header=False, padding=(0, 1), pad_edge=False, expand=True)
        table.add_column("key", no_wrap=True, style="bold", width=8)
        table.add_column("does", ratio=1)
        table.add_column("id", no_wrap=True, style="dim")
        for k in in_scope(scope):
            table.add_row(key_names(keys.get(k.id, k.key)), f"{k.title.lower()}: {k.help}", k.id)
        parts += [Text(""), Text(heading, style="bold underline"), table]
    parts += [Text(""), Text(HELP_OUTRO)]
    return Group(*parts)


def help_plain(keys: dict[str, str]) -> str:
    """`help_table` as plain lines (`p · pause the loop: … · loop.pause`): what the help screen
    holds, for a search or a test."""
    rows = [HELP_INTRO]
    for scope, heading in SCOPES.items():
        rows.append(heading)
        rows += [
            f"{key_names(keys.get(k.id, k.key))} · {k.title.lower()}: {k.help} · {k.id}"
            for k in in_scope(scope)
        ]
    return "\n".join([*rows, HELP_OUTRO])


def keymap_path() -> Path:
    explicit = os.environ.get("LOOPDECK_KEYMAP")
    if explicit:
        return Path(explicit).expanduser()
    from loop.store.xdg import base

    return base("XDG_CONFIG_HOME", ".config") / "loopdeck" / "keymap.toml"  # never a repository's


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
    if not isinstance(table, dict):
        return {}, f'keymap {path} ignored: [keys] should be a table of id = "keys"'
    keymap = {k: v for k, v in table.items() if k in IDS and isinstance(v, str) and v.strip()}
    unknown = sorted(str(k) for k in table if k not in IDS)
    bad = sorted(str(k) for k, v in table.items() if k in IDS and not (isinstance(v, str) and v.strip()))
    problems = []
    if unknown:
        problems.append(f"unknown ids {', '.join(unknown)}")
    if bad:
        problems.append(f'{", ".join(bad)} should name keys as text ("ctrl+p")')
    problem = f"keymap {path}: {'; '.join(problems)}" if problems else None
    return keymap, problem
