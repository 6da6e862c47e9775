"""The prompt a loop started from a design gives its agent: short (50 to 80 lines), pointing at
the design rather than copying it, so the design stays the one text both read. It says how to
validate (when, how, what if it fails), how to claim completion, how to work, and which
criteria need the agent's judgement before it claims."""

from __future__ import annotations

from loop.design.parse import Criterion, Design

MIN_LINES = 50
MAX_LINES = 80
_ITEM_WIDTH = 160


def build(design: Design, shown_path: str, note: str = "") -> str:
    """The loop's prompt for `design`, which the agent finds at `shown_path` (relative to the
    workspace when inside it). `note`: the person's own words given with the design."""
    commands = design.commands
    head = [
        f"Implement the design in {shown_path}.",
        "That file is the contract for this loop: read it in full before you change anything,",
        "and read it again whenever you are unsure what is asked. This prompt does not repeat it.",
        f"Task type: {design.task_type}." + (f" Title: {design.title}." if design.title else ""),
        "",
        "The design is locked while the loop runs. Do not edit, move or reformat it:",
        "loopdeck stops the loop and calls a person when it changes. If it is wrong,",
        "unclear or contradicts itself, ask a person with <question>...</question> and stop your turn.",
        "",
    ]
    noted = ["From the person who started this loop:", *note.strip().splitlines(), ""] if note.strip() else []
    protocol = [
        "## Validation protocol",
        "When: after every change that could affect a check, and always before you claim completion.",
        "How: from the workspace root, run each command exactly as written:",
        *(
            _listed(commands, 12, shown_path, code=True)
            or ["- (the design names no command: validate by reading the code)"]
        ),
        "What if one fails: read its first failure, fix the cause in the code, and run it again.",
        "Never weaken, skip or delete a test or a check to make it pass.",
        "Do not start on a new criterion while a command that passed before now fails.",
        "loopdeck runs these same commands after your turn. A completion claim made while",
        "one of them fails is refused, and its output comes back to you as the next prompt.",
        "",
        "## Criteria checked by a command",
        *(_listed([_short(c) for c in design.criteria if c.command], 8, shown_path) or ["- none"]),
        "",
        "## Criteria that need your judgement",
        "No command checks these. Before you claim completion, check each one against the code",
        "and write one line per criterion in your final message: met, or what is missing.",
        *(_listed([_short(c) for c in design.judged], 12, shown_path) or ["- none"]),
        "",
    ]
    style = [
        "## Working style",
        "- Work in small steps: one criterion at a time, the smallest change that meets it.",
        "- Read the code you change before changing it; follow the project's conventions.",
        "- Write or update the tests of a behaviour together with its code.",
        "- Fix causes, not symptoms; no workarounds the design does not allow.",
        "- Keep changes inside what the design asks for; note anything else for a person.",
        "- Leave the work tree in a state a person can review: no stray files or debug output.",
        "- End each turn with a short account: what changed, what was validated, what is left.",
        "",
    ]
    finish = [
        "## Completion",
        f"You are done when every criterion in {shown_path} holds and every command above passes.",
        "Only then, after a last run of the validation commands, output the completion promise",
        f"on a line of its own, exactly as given here: <promise>{design.promise}</promise>",
        "The promise must be completely true. Never output it to leave the loop early:",
        "loopdeck checks it, and a false claim only costs another iteration.",
    ]
    checklist = [
        "## Before each turn ends",
        "- Re-read the parts of the design your change touched.",
        "- Run the validation commands; fix what fails before you stop.",
        "- Say which criteria are met so far and which are left.",
        "- If you are stuck on the same failure twice, try another approach or ask a person.",
        "",
    ]
    lines = [*head, *protocol, *style, *finish]
    if len(lines) + len(checklist) <= MAX_LINES:  # it fits: always, but with the longest lists
        lines = [*head, *protocol, *style, *checklist, *finish]
    return "\n".join([*lines[: len(head)], *noted, *lines[len(head) :]])


def _short(criterion: Criterion) -> str:
    text = " ".join(criterion.text.split())
    return text if len(text) <= _ITEM_WIDTH else text[: _ITEM_WIDTH - 1].rstrip() + "…"


def _listed(items: list[str], most: int, shown_path: str, code: bool = False) -> list[str]:
    """`items` as a list of at most `most` lines, the rest left to the design itself."""
    out = [f"- `{item}`" if code else f"- {item}" for item in items[:most]]
    if len(items) > most:
        out.append(f"- ... and {len(items) - most} more in {shown_path}")
    return out
