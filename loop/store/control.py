"""The control queue: `.claude/orchestrator-loop.control.jsonl`, how people steer a loop.

The TUI and the CLI never write the state file (one writer per file): they append a command
here, and the driver that holds the loop lock applies it. Each command is applied exactly once:

* the driver applies commands in file order and records, in the state file itself, the byte
  offset up to which everything is applied (`control_offset`). The effect and the new offset
  land in the same atomic rename, so a crash cannot apply a command twice or lose it;
* the driver reads the offset under the loop lock, so two drivers racing for the same Stop
  serialise and the second finds nothing left to apply;
* each application is journaled (`command-applied` with the command's id), which is how the
  sender learns its command took effect, and how a driver skips a command a state put back
  by hand (an older offset) would apply again (`read_unapplied`).

Anyone who can write the workspace can append a line, the agent included. So a line proves it
came from a person's process on this machine: the sender (a CLI verb outside an agent, the
monitor, a slash command a person typed) adds `"mac"`, an HMAC-SHA256 of the line's canonical
JSON (without the mac) and the workspace's real path, keyed by this user's secret key, kept in
the trust folder the agent's sandbox does not have (`loop.trust.key`). The reader checks it and
says so in `Command.person`; the engine decides what a line without it may do (only pause).
The key comes in as a parameter: this layer does not know where it lives.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from loop.core.errors import LoopdeckError, os_problem
from loop.core.model import COMMANDS, Command, LoopState
from loop.core.redact import redact
from loop.core.timeutil import iso_ms, utcnow
from loop.store.journal import Journal
from loop.store.paths import Workspace
from loop.store.safeopen import ShortWrite, UnsafePath, append_bytes, open_regular
from loop.store.state import StateStore

MAX_LINE_BYTES = 64 * 1024

Key = Callable[[], "bytes | None"]
"""How a reader gets this user's key: called only when a line carries a mac (the Stop hook with
nothing queued reads no key file)."""

MAC_CONTEXT = b"loopdeck control line v1\0"


@dataclass(frozen=True, slots=True)
class BadLine:
    offset: int
    reason: str


def new_id() -> str:
    return os.urandom(8).hex()


def _binding(control: Path) -> bytes:
    """The workspace a line is for: the real path of the folder holding `.claude/`. A signed line
    copied into another workspace's queue does not verify there."""
    return os.path.realpath(control.parent.parent).encode("utf-8", "surrogateescape")


def _canonical(obj: dict[str, object]) -> bytes:
    body = json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return body.encode("utf-8", "surrogatepass")


def mac_of(key: bytes, control: Path, obj: dict[str, object]) -> str:
    """The mac of a line (`obj` without its "mac") for the queue at `control`."""
    # Imported here: ~3 ms of `hashlib` and `hmac` (`-X importtime`) on every Stop, which reads a line only
    # when one was queued.
    import hashlib
    import hmac

    unsigned = {k: v for k, v in obj.items() if k != "mac"}
    message = MAC_CONTEXT + _binding(control) + b"\0" + _canonical(unsigned)
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def signed_by(key: bytes | None, control: Path, obj: dict[str, object]) -> bool:
    """Whether `obj` (a decoded line) carries a valid mac of `key` for this queue."""
    mac = obj.get("mac")
    if not key or not isinstance(mac, str):
        return False
    import hmac

    return hmac.compare_digest(mac, mac_of(key, control, obj))


def send(
    workspace: Workspace,
    kind: str,
    *,
    source: str = "cli",
    reason: str | None = None,
    value: int | None = None,
    now: datetime | None = None,
    target: str | None = None,
    key: bytes | None = None,
) -> Command:
    """Queue a command; one `O_APPEND` write, safe alongside any number of other senders.

    Its text is redacted first: a note or an answer reaches the agent's next prompt through the
    state and the journal, and the queue is kept as long as the workspace; a token a person
    pastes belongs in the agent's environment, not in what the loop keeps. `key`: this user's
    key, given only by a person's process (`loop.trust.key.for_person`): the line is signed, and
    every command is applied; without it only a pause is."""
    if kind not in COMMANDS:
        raise LoopdeckError(f"unknown command {kind!r}; expected one of {', '.join(COMMANDS)}")
    if kind == "set-max-iterations" and (value is None or value < 0):
        raise LoopdeckError("set-max-iterations needs a whole number >= 0 (0 = no limit)")
    if kind in ("answer", "say") and not (reason or "").strip():
        raise LoopdeckError(f"{kind} needs its text")
    text = redact(reason) if reason else None
    if text:  # what is signed is what a reader decodes: no lone surrogate survives the write
        text = text.encode("utf-8", "replace").decode("utf-8")
    command = Command(
        new_id(), iso_ms(now or utcnow()), kind, source, text, value, target=target, person=key is not None
    )
    obj = command.to_json()
    if key is not None:
        obj["mac"] = mac_of(key, workspace.control, obj)
    line = json.dumps(obj, ensure_ascii=False) + "\n"
    try:
        append_bytes(workspace.control, line.encode("utf-8", "replace"))  # never through a symlink
    except ShortWrite as exc:
        # What was written was taken back out, or is a torn line the reader skips.
        outcome = "may or may not have been queued" if exc.maybe_whole else "was not queued"
        raise LoopdeckError(f"{kind} {outcome}: {os_problem(exc)}") from None
    except OSError as exc:
        raise LoopdeckError(f"{kind} was not queued: {os_problem(exc)}") from None
    except UnsafePath as exc:
        raise UnsafePath(f"{kind} was not queued: {exc}") from None
    return command


def queue(
    workspace: Workspace,
    kind: str,
    *,
    source: str = "cli",
    reason: str | None = None,
    value: int | None = None,
    target: str | None = None,
    iteration: int | None = None,
    warn: Callable[[str], None] | None = None,
    key: bytes | None = None,
) -> Command:
    """Queue a command and journal that it was sent: what every sender does (the CLI, the
    monitor, the slash commands), so the journal shows a command from the moment it exists.
    `key`: as for `send`."""
    command = send(workspace, kind, source=source, reason=reason, value=value, target=target, key=key)
    data: dict[str, object] = {"id": command.id, "command": kind, "source": source}
    if command.reason is not None:
        data["reason"] = command.reason  # redacted, as queued
    if value is not None:
        data["value"] = value
    if target:
        data["worker"] = target
    try:
        Journal(workspace.journal).append("command-sent", iteration, data)
    except (OSError, LoopdeckError) as exc:
        # The command is queued and will be applied: saying it failed would be untrue.
        why = os_problem(exc) if isinstance(exc, OSError) else str(exc)
        if warn is not None:
            warn(f"the journal could not record the {kind} ({why})")
    return command


def end_offset(workspace: Workspace) -> int:
    """Where the queue ends now: a new loop starts here, so commands sent to an older loop (or
    before any loop) are never applied to it."""
    try:
        return workspace.control.stat().st_size
    except FileNotFoundError:
        return 0


def read_since(path: Path, offset: int, key: Key | None = None) -> tuple[list[Command], list[BadLine], int]:
    """Commands in complete lines from `offset` on, the lines that were not commands, and the
    offset after the last complete line. A half-written last line waits for the next read.
    `key`: this user's key, to tell a person's lines (`Command.person`); without it none is."""
    try:
        f = open_regular(path)  # a FIFO planted as the queue must not hang the driver
    except FileNotFoundError:
        return [], [], 0
    with f:
        size = f.seek(0, os.SEEK_END)
        if offset > size:
            offset = 0  # the queue was replaced by a shorter one: read it all
        f.seek(offset)
        data = f.read()
    cut = data.rfind(b"\n") + 1
    commands: list[Command] = []
    bad: list[BadLine] = []
    pos = offset
    keys: list[bytes | None] = []

    def the_key() -> bytes | None:
        if not keys:
            keys.append(key() if key is not None else None)
        return keys[0]

    for line in data[:cut].split(b"\n")[:-1]:
        end = pos + len(line) + 1
        if line.strip():
            item = _decode(line, pos, end, path, the_key)
            (commands if isinstance(item, Command) else bad).append(item)  # type: ignore[arg-type]
        pos = end
    return commands, bad, offset + cut


def _decode(line: bytes, offset: int, end: int, path: Path, key: Key) -> Command | BadLine:
    if len(line) > MAX_LINE_BYTES:
        return BadLine(offset, f"line of {len(line)} bytes is too long for a command")
    try:
        obj = json.loads(line)
    except (ValueError, UnicodeDecodeError, RecursionError):  # garbage, torn, or nested too deep
        return BadLine(offset, "not JSON")
    if not isinstance(obj, dict):
        return BadLine(offset, "not a JSON object")
    kind, cid = obj.get("kind"), obj.get("id")
    if kind not in COMMANDS:
        return BadLine(offset, f"unknown command {kind!r}")
    if not isinstance(cid, str) or not cid:
        return BadLine(offset, "missing 'id'")
    value = obj.get("value")
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        return BadLine(offset, f"'value' must be a whole number >= 0, got {value!r}")
    if kind == "set-max-iterations" and value is None:
        return BadLine(offset, "set-max-iterations without a 'value'")
    reason = obj.get("reason")
    target = obj.get("target")
    return Command(
        id=cid,
        ts=str(obj.get("ts", "")),
        kind=kind,
        source=str(obj.get("source", "?")),
        reason=str(reason) if reason else None,
        value=value,
        end=end,
        target=str(target) if isinstance(target, str) and target else None,
        person="mac" in obj and signed_by(key(), path, obj),
    )


def read_unapplied(
    workspace: Workspace, offset: int, journal: Journal, key: Key | None = None
) -> tuple[list[Command], list[BadLine], int]:
    """`read_since`, less the commands the journal says were applied already: a state put back
    by hand (its backup copied over it) holds an older offset, and a command must still be
    applied at most once. The journal is read (from its end, bounded) only when commands wait
    past the offset, which is rare: a Stop with nothing queued costs nothing more."""
    commands, bad, end = read_since(workspace.control, offset, key)
    if commands:
        applied = applied_ids(journal, within=max(500, 2 * len(commands)))
        commands = [c for c in commands if c.id not in applied]
    return commands, bad, end


def pending(workspace: Workspace, state: LoopState | None = None, key: Key | None = None) -> list[Command]:
    """Commands the driver has not applied yet (everything after the state's `control_offset`)."""
    if state is None:
        state = StateStore(workspace).read()
    offset = state.control_offset if state is not None else 0
    commands, _bad, _end = read_since(workspace.control, offset, key)
    return commands


def bad_line_message(store: StateStore, line: BadLine) -> str:
    return f"{store.workspace.control}: byte {line.offset}: {line.reason}; skipped"


def journal_applied(journal: Journal, iteration: int, command: Command, outcome: str) -> None:
    journal.append(
        "command-applied",
        iteration,
        {"id": command.id, "command": command.kind, "source": command.source, "outcome": outcome},
    )


APPLIED_BUDGET = 256 * 1024
"""How far back `applied_ids` looks: a command being waited for was applied moments ago, so its
`command-applied` event is a few KB from the end (256 KB holds thousands of events). Without a
bound, each `--wait` poll read the whole journal whenever fewer than `within` commands had ever
been applied (2.7 s per poll at 100 MB)."""


HANDLED = ("command-applied", "command-refused")
"""What a driver journals for each command it read: either way it is never taken up again."""


def applied_ids(journal: Journal, within: int = 500, budget: int = APPLIED_BUDGET) -> set[str]:
    """Ids the journal says were applied (or refused: handled, never again), among its last
    `within` such events and its last `budget` bytes, read from the end."""
    return set(handled(journal, within, budget))


def handled(journal: Journal, within: int = 500, budget: int = APPLIED_BUDGET) -> dict[str, str]:
    """Id → "command-applied" or "command-refused", as `applied_ids` reads them."""
    result = journal.tail(within, where=lambda e: e.kind in HANDLED, budget=budget)
    return {str(e.data.get("id")): e.kind for e in result.events}
