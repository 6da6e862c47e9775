"""Is a person at the keyboard, or is this an agent's process?

Confirming is what only a person may do: trusting a loop's commands, answering `--yes` for
them, resuming a loop that waits for a person, forcing its completion. An agent told (by a
repository's text, a web page, its own prompt) to run `loopdeck trust --yes` would otherwise
confirm its own commands. So the confirming verbs refuse inside an agent's session, known by

* the environment agent CLIs give the commands their agents run (`CLAUDECODE=1` in Claude
  Code's tools and hooks, `GEMINI_CLI=1`, Codex's sandbox variables, OpenCode's) and the one
  loopdeck gives its own agents and workers (`LOOPDECK_DRIVER`, `LOOPDECK_WORKER`);
* the same in the environment of every ancestor process, and the ancestors' program names:
  `env -u CLAUDECODE loopdeck trust` still runs below the agent's shell.

A detached process (`nohup env -u CLAUDECODE loopdeck trust --yes &`, reparented to init) has no
ancestor left to tell, but keeps the rest of its environment: loopdeck's run marker
(`LOOPDECK_RUN`, `loop.processes.sweep`) and the runner's `LOOPDECK_DRIVER`, which every process
an agent of a loopdeck run starts inherits, are checked too, here and in every ancestor.

This stops an agent that follows instructions. An agent with a shell runs as the person does
and could go further (unset every variable, a terminal of its own): it is a guard. What holds
then is the sandbox each agent turn runs in: the trust folder (the records and the key that signs
a person's control lines, `loop.trust.key`) is not in it, so a record an agent writes, or a key
it makes, is not the person's and vanishes with the turn.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from loop.core.errors import LoopdeckError

AGENT_MARKERS: dict[str, str] = {
    "CLAUDECODE": "Claude Code's session",
    "GEMINI_CLI": "Gemini CLI's session",
    "CODEX_SANDBOX": "Codex's sandbox",
    "CODEX_SANDBOX_NETWORK_DISABLED": "Codex's sandbox",
    "OPENCODE": "OpenCode's session",
    "LOOPDECK_DRIVER": "an agent loopdeck started",
    "LOOPDECK_WORKER": "a parallel worker loopdeck started",
    "LOOPDECK_RUN": "a process a loopdeck run started",
    "LOOPDECK_TASK": "a parallel worker loopdeck started",
}
"""Variables an agent's commands carry, and whose session they say this is."""

AGENT_PROGRAMS = ("claude", "codex", "gemini", "opencode")
"""Agent CLIs by program name, for ancestors whose environment cannot be read."""

MAX_ANCESTORS = 64


def _marked(env: Mapping[str, str]) -> str | None:
    for name, what in AGENT_MARKERS.items():
        if env.get(name):
            return f"{what} ({name} is set)"
    return None


def _ancestors() -> list[tuple[int, str, dict[str, str] | None]]:
    """(pid, program name, environment or None) of every ancestor, nearest first."""
    try:
        import psutil  # ~15 ms (`-X importtime`): asked when a command is signed, never on a Stop
    except ImportError:  # pragma: no cover - a dependency; without it, the environment decides
        return []
    found: list[tuple[int, str, dict[str, str] | None]] = []
    try:
        proc = psutil.Process().parent()
    except psutil.Error:
        return []
    while proc is not None and proc.pid > 1 and len(found) < MAX_ANCESTORS:
        try:
            name = proc.name()
        except psutil.Error:
            name = "?"
        env: dict[str, str] | None
        try:
            env = proc.environ()
        except psutil.Error:
            env = None
        found.append((proc.pid, name, env))
        try:
            proc = proc.parent()
        except psutil.Error:
            break
    return found


def agent_session(env: Mapping[str, str] | None = None, ancestry: bool = True) -> str | None:
    """Why this process belongs to an agent's session (a short phrase), or None when a person
    runs it. `ancestry=False` looks at this process's environment only."""
    env = os.environ if env is None else env
    why = _marked(env)
    if why is not None or not ancestry:
        return why
    for pid, name, parent_env in _ancestors():
        if parent_env is not None:
            marked = _marked(parent_env)
            if marked is not None:
                return f"{marked.split(' (')[0]} (process {pid}, {name}, above this one)"
        base = name.lower().removesuffix(".exe")
        if base in AGENT_PROGRAMS:
            return f"an agent's session (process {pid}, {name}, above this one)"
    return None


def typed_by_a_person(env: Mapping[str, str] | None = None) -> str | None:
    """For a hook of an agent's session that receives what was typed (Claude Code's
    UserPromptSubmit): None when a person typed it, else why not. The session's own marks are
    expected (the hook runs inside it); an agent loopdeck started, or a session started from
    inside another agent's session (an agent running `claude -p "/orchestrator-loop …"`), is
    not a person."""
    env = os.environ if env is None else env
    for name in ("LOOPDECK_DRIVER", "LOOPDECK_WORKER"):
        if env.get(name):
            return f"{AGENT_MARKERS[name]} ({name} is set)"
    seen_session = False
    for pid, name, parent_env in _ancestors():
        base = name.lower().removesuffix(".exe")
        if not seen_session:
            seen_session = base in AGENT_PROGRAMS
            if seen_session and parent_env is not None:
                for marker in ("LOOPDECK_DRIVER", "LOOPDECK_WORKER"):
                    if parent_env.get(marker):
                        return f"{AGENT_MARKERS[marker]} (process {pid}, {name})"
            continue
        marked = _marked(parent_env) if parent_env is not None else None
        if marked is not None or base in AGENT_PROGRAMS:
            return f"a session started inside another agent's session (process {pid}, {name})"
    return None


def refuse_inside_agent(what: str, env: Mapping[str, str] | None = None) -> None:
    """Raise a one-line refusal when `what` (a verb, an option) runs inside an agent's session."""
    why = agent_session(env)
    if why is not None:
        raise LoopdeckError(
            f"{what} is for a person, and this runs inside {why}; run it in a terminal of your own"
        )
