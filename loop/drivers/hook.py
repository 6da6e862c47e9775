"""Driver 1: Claude Code's Stop hook (`loopdeck hook stop`).

Claude Code runs this on every turn of the agent with one JSON object on stdin; printing
`{"decision": "block", "reason": …}` keeps the agent working, printing nothing lets it stop.
It must be fast (it runs every turn: no Textual, no GitPython, the transcript read from its
tail only) and it must fail safe: whatever goes wrong, the user is never
trapped: the stop is allowed, the error journaled with its traceback, and a one-line
systemMessage says so. stdout carries one JSON object or nothing, never a traceback.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loop import trust
from loop.core import engine, progress
from loop.core.errors import FileProblem, LoopdeckError, os_problem
from loop.core.limits import usage_limit
from loop.core.model import RUNNER_ENV, Aggregate, LoopState
from loop.core.timeutil import iso_s, utcnow
from loop.drivers import writer
from loop.drivers.classify import stop_waits
from loop.sources.aggregate import SourceConfig, check_all
from loop.sources.transcript import last_assistant_text
from loop.store import control
from loop.store.journal import Journal
from loop.store.paths import Workspace, find_workspace
from loop.store.proc import session_pid
from loop.store.safeopen import open_regular
from loop.store.state import StateStore
from loop.trust import key

if TYPE_CHECKING:  # imported where a check runs: see `_sandbox`
    from loop.processes.sandbox import Spec, Status

LOCK_TIMEOUT = 15.0
DEADLINE_S = 540.0
"""The whole hook, whatever it meets, ends within this (Claude Code's hook timeout, as
`loopdeck install` sets it, is 600 s): past it, it fails safe and says so in the journal."""
VERIFY_BUDGET_S = 400.0
"""All verification commands together stay under Claude Code's hook timeout (600 s as installed)."""
MAX_STDIN = 16 * 1024 * 1024


def _block_cap(env: Mapping[str, str]) -> int | None:
    raw = env.get("CLAUDE_CODE_STOP_HOOK_BLOCK_CAP")
    if raw is None or raw.strip() == "":
        return engine.DEFAULT_BLOCK_CAP
    try:
        value = int(raw)
    except ValueError:
        return engine.DEFAULT_BLOCK_CAP
    return value if value > 0 else None


def _workspace(payload: Mapping[str, Any], env: Mapping[str, str]) -> Workspace:
    project = env.get("CLAUDE_PROJECT_DIR")
    if project:
        return Workspace(Path(project))
    cwd = payload.get("cwd")
    return find_workspace(Path(cwd) if isinstance(cwd, str) and cwd else None)


class BadInput(ValueError):
    """The hook input is not what Claude Code sends: the stop is allowed, the reason said."""


PATH_FIELDS = ("transcript_path", "cwd")
"""The hook input's fields that name files: each must be a path this process can open."""


def path_problem(value: object) -> str | None:
    """Why `value` (a hook input field) is no path to open, or None when it is one (or absent).

    A NUL byte, a lone surrogate (no file name can hold it), `~someone` for no such user or a
    number where a string belongs would otherwise surface as a traceback wherever the path is
    first used."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        kind = {bool: "true/false", int: "a number", float: "a number", list: "a list", dict: "an object"}
        return f"it is {kind.get(type(value), type(value).__name__)}, expected a string"
    if "\x00" in value:
        return "it holds a NUL byte"
    try:
        os.fsencode(value)
    except UnicodeEncodeError as exc:
        return f"it holds {value[exc.start]!r}, which no file name can hold"
    try:
        Path(value).expanduser()
    except RuntimeError:  # `~name` for no user of this machine, or no home folder at all
        head = value.partition("/")[0]
        return "no home folder is known for ~" if head == "~" else f"{head} names no user of this machine"
    return None


def checked_input(payload: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The hook input with every unusable path field dropped, and one line for each dropped:
    the Stop goes on without it (a transcript the sources do without, the workspace found
    from the hook's own folder)."""
    problems = []
    for field in PATH_FIELDS:
        value = payload.get(field)
        problem = path_problem(value)
        if problem is not None:
            shown = repr(value)
            shown = shown if len(shown) <= 120 else shown[:117] + "..."
            problems.append(f"the hook input's {field} {shown} is not a usable path: {problem}")
            payload = {k: v for k, v in payload.items() if k != field}
    return payload, problems


def _journal_problems(ws: Workspace, problems: list[str]) -> None:
    """Each line in the journal of the loop here (if there is one); a journal that cannot be
    written is no reason to fail the Stop."""
    if not problems or not ws.state.exists():
        return
    journal = Journal(ws.journal)
    for line in problems:
        try:
            journal.append("warning", None, {"message": line})
        except (OSError, LoopdeckError):
            return


def _last_text(payload: Mapping[str, Any]) -> str | None:
    message = payload.get("last_assistant_message")
    if isinstance(message, str):
        return message
    transcript = payload.get("transcript_path")
    if not isinstance(transcript, str) or not transcript:
        return None
    try:
        return last_assistant_text(Path(transcript).expanduser())
    except OSError:  # missing, a FIFO, a folder: the agent's words are unknown, the sources decide
        return None


TOOL_ROUND_WINDOW = 8 * 1024 * 1024
"""How much of the transcript appended since the last block is searched for a tool round."""


def _size(path: Path | None) -> int | None:
    if path is None:
        return None
    try:
        return path.stat().st_size
    except OSError:
        return None


def _tool_round(transcript: Path | None, seen: object, size: int | None) -> bool:
    """Did the agent run a tool since the last block? Claude Code's consecutive-block count
    restarts after every tool round, so loopdeck's must too. Only what was appended since then
    is read (at most a window of it); more than the window appended is a tool round for sure."""
    if transcript is None or not isinstance(seen, int) or isinstance(seen, bool):
        return False
    if size is None or size <= seen:
        return False
    if size - seen > TOOL_ROUND_WINDOW:
        return True
    try:
        with open_regular(transcript) as f:  # a FIFO or device must not hang the Stop
            f.seek(seen)
            appended = f.read(size - seen)
    except OSError:
        return False
    return b'"tool_result"' in appended


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


QUESTION_WAIT_S = 120.0
"""How long a Stop whose agent asked a question waits for the answer (from the monitor or
`loopdeck answer`) before it lets the session stop, paused: well inside the hook timeout that
`loopdeck install` sets. `LOOPDECK_QUESTION_WAIT` (seconds, 0 = no wait) changes it."""


def handle(
    payload: Mapping[str, Any],
    env: Mapping[str, str],
    now: datetime,
    wait: bool = True,
) -> dict[str, Any] | None:
    """Decide one Stop; returns the JSON to print, or None to allow silently."""
    if all(env.get(key) == value for key, value in RUNNER_ENV.items()):
        return None  # the runner's own agent: the runner drives this loop, not the hook
    ws = _workspace(payload, env)
    store = StateStore(ws, lock_timeout=LOCK_TIMEOUT)
    if not store.exists():
        return None  # no loop here: the cheapest possible answer
    journal = Journal(ws.journal)
    with store.locked():
        state = store.read()
        stop = engine.StopInput(
            last_text=None,
            session_id=_str(payload.get("session_id")),
            transcript_path=_str(payload.get("transcript_path")),
            stop_hook_active=payload.get("stop_hook_active") is True,
            block_cap=_block_cap(env),
            ralph_active=ws.ralph_state.exists(),
            driver=engine.HOOK.name,
            session_pid=session_pid(),  # the session: resumption sees it close
        )
        if state is None or not engine.ours(state, stop):
            return None  # no live loop, or another session's Stop: not even the transcript is read
        pending = trust.unconfirmed(ws, state)
        if pending:  # nobody here confirmed it: not adopted, nothing of it sent or run
            unconfirmed = replace(stop, unconfirmed=tuple(pending))
            return _said(engine.decide(state, unconfirmed, [], None, now, engine.HOOK))
        commands, bad, end = control.read_unapplied(ws, state.control_offset, journal, key.reader(ws.root))
        transcript = Path(stop.transcript_path).expanduser() if stop.transcript_path else None
        size = _size(transcript)
        stop = replace(
            stop,
            last_text=_last_text(payload),
            # Only a capped, continuing turn needs to know (the cap is off once installed).
            tool_round=bool(stop.block_cap and stop.stop_hook_active)
            and _tool_round(transcript, state.extra.get("transcript_seen"), size),
            transcript_size=size,
        )
        if "design" in state.extra:  # locked while the loop runs: one read and hash a Stop
            from loop.design import lock

            stop = replace(stop, design_changed=lock.changed(ws.root, state))
        sources = (
            _count(ws, state, stop) if engine.needs_sources(state, stop, commands, engine.HOOK) else None
        )
        if sources is not None and engine.wants_verification(state, stop, sources):
            failure, validation = _verify(ws, state, journal, now)
            stop = replace(
                stop, verification_failure=failure, verified=failure is None, validation=validation
            )
        result = engine.decide(state, stop, commands, sources, now, engine.HOOK)
        writer.carry_out(ws, store, journal, state, result, now, end, bad)
    after = result.state
    if wait and after is not None and after.waiting_kind == "question" and _answer_came(ws, after, env):
        # Claude Code keeps the turn open while the hook runs: the answer reaches the agent now,
        # without anyone typing into the session.
        return handle(payload, env, utcnow(), wait=False)
    return _said(result)


def _said(result: engine.Result) -> dict[str, Any] | None:
    """The hook's output for a decision."""
    if result.blocked:
        return {"decision": "block", "reason": result.reason, "systemMessage": result.system_message}
    if result.system_message:
        return {"systemMessage": result.system_message}
    return None


def _answer_came(ws: Workspace, state: LoopState, env: Mapping[str, str]) -> bool:
    """Wait (bounded) for a person's command after the agent asked a question: True when one
    is queued (the answer, or a resume, stop…), False when the wait ran out."""
    try:
        budget = float(env.get("LOOPDECK_QUESTION_WAIT", QUESTION_WAIT_S))
    except ValueError:
        budget = QUESTION_WAIT_S
    wait = max(0.0, min(budget, DEADLINE_S - VERIFY_BUDGET_S - 10))
    if wait <= 0:
        return False
    deadline = time.monotonic() + wait
    with stop_waits(ws, time.time() + wait):  # `loopdeck answer` says the answer lands now
        while time.monotonic() < deadline:
            if control.read_since(ws.control, state.control_offset)[0]:
                return True
            time.sleep(0.25)
    return False


def stop_failure(payload: Mapping[str, Any], env: Mapping[str, str], now: datetime) -> None:
    """Claude Code's StopFailure hook: the turn ended on an API error. A usage or rate limit
    makes the loop wait for its reset; anything else is journaled."""
    if all(env.get(key) == value for key, value in RUNNER_ENV.items()):
        return  # the runner reads its agent's result itself
    ws = _workspace(payload, env)
    store = StateStore(ws, lock_timeout=LOCK_TIMEOUT)
    if not store.exists():
        return
    words = "\n".join(_strings(payload))
    status = next((v for v in _ints(payload) if 400 <= v <= 599), None)
    journal = Journal(ws.journal)
    with store.locked():
        state = store.read()
        session = _str(payload.get("session_id"))
        if state is None or (session and state.session_id and session != state.session_id):
            return
        limited = usage_limit(words, status, now)
        if limited is None:
            journal.append(
                "warning", state.iteration, {"message": f"the agent's turn failed: {words[-300:]}"}
            )
            return
        result = engine.usage_limited(state, limited[0], limited[1], now)
        writer.carry_out(ws, store, journal, state, result, now)


def _strings(value: object, depth: int = 0) -> list[str]:
    """Every string in the hook input but its paths and ids: the error's words, wherever the
    version of Claude Code puts them."""
    if depth > 6:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        skip = {"session_id", "transcript_path", "cwd", "prompt_id", "hook_event_name", "permission_mode"}
        return [s for k, v in value.items() if k not in skip for s in _strings(v, depth + 1)]
    if isinstance(value, list):
        return [s for v in value[:50] for s in _strings(v, depth + 1)]
    return []


def _ints(value: object, depth: int = 0) -> list[int]:
    if depth > 6:
        return []
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if isinstance(value, Mapping):
        return [i for v in value.values() for i in _ints(v, depth + 1)]
    if isinstance(value, list):
        return [i for v in value[:50] for i in _ints(v, depth + 1)]
    return []


def _count(ws: Workspace, state: LoopState, stop: engine.StopInput) -> Aggregate:
    return check_all(
        SourceConfig.from_state(
            ws,
            state,
            transcript=Path(stop.transcript_path).expanduser() if stop.transcript_path else None,
            session_id=stop.session_id,
        )
    )


def _sandbox(ws: Workspace) -> tuple[Spec, Status] | None:
    """The sandbox a check runs in (the runner's, where one can start): a check runs code the
    agent may have written. Looked for only when a check runs."""
    # Here, not at the top: ~9 ms (`-X importtime`) that every Stop without a check would pay.
    from loop.processes import sandbox

    try:
        status = sandbox.detect(sandbox.choose(None))
    except LoopdeckError:
        return None
    return (sandbox.Spec(ws.root, ws.root, beside=True), status) if status.on else None


def _verify(
    ws: Workspace, state: LoopState, journal: Journal, now: datetime
) -> tuple[str | None, dict[str, Any]]:
    """Run the loop's verification commands, one at a time within the hook's budget: the
    failures' output (None when all pass), and their results as data (`StopInput.validation`:
    the commands' together, with the time; the hook leaves git alone, so `git_clean` is not
    known)."""
    # Here, not at the top: ~48 ms (`-X importtime`) that every Stop without a check would pay.
    from loop import verify
    from loop.verify.suite import run_all

    allow = state.extra.get("verify_allow") or []
    budget = VERIFY_BUDGET_S / max(1, len(state.verify))
    failures: list[str] = []
    parts: list[dict[str, Any]] = []
    for command in state.verify:
        try:
            item = verify.check(
                command, [str(a) for a in allow] if isinstance(allow, list) else [], cwd=ws.root
            )
        except verify.CommandRefused as exc:
            journal.append("verification-started", state.iteration, {"command": command})
            failures.append(str(exc))
            journal.append(
                "verification-failed",
                state.iteration,
                {"command": command, "exit_code": None, "tail": str(exc)},
            )
            parts.append({"commands": [{"command": command, "exit_code": None}]})
            continue
        verdict = run_all(
            [item],
            ws.root,
            timeout=budget,
            report=lambda kind, data: journal.append(kind, state.iteration, data),
            sandbox=_sandbox(ws),
        )
        failures += verdict.failures
        parts.append(verdict.validation())
    validation = progress.combined(parts)
    validation["ts"] = iso_s(now)
    return ("\n\n".join(failures) if failures else None), validation


FAILED = "loopdeck: the Stop hook failed safe and allowed this stop"


def fail_safe(error: BaseException, ws: Workspace | None) -> dict[str, Any]:
    """Allow the stop and say why in one line, in the journal too (when it can be written).

    A refusal (a file loopdeck will not write through, a corrupt state, a full disk, bad
    input) is that line alone: what, where, what was expected. An error nobody foresaw (a bug),
    or the deadline (where the time went), also takes its traceback to the journal, never to
    stdout. Never raises."""
    refusal = isinstance(error, LoopdeckError | OSError | BadInput)
    if isinstance(error, FileProblem):
        what = f"cannot read {error}"
    elif isinstance(error, OSError):
        what = os_problem(error)
    elif refusal or isinstance(error, HookDeadline):
        what = str(error)
    else:
        what = f"{type(error).__name__}: {error}"
    line = f"{FAILED} ({what})"
    if ws is not None:
        data = {"message": line}
        try:
            if not refusal:
                data["traceback"] = "".join(traceback.format_exception(error))
            Journal(ws.journal).append("error", None, data)
        except Exception:  # a journal that cannot take the line: stdout still has it
            pass
    return {"systemMessage": line[:900]}


class HookDeadline(Exception):
    """The hook ran out of its time: it fails safe rather than be killed by Claude Code."""

    def __str__(self) -> str:
        return f"the hook ran past its {DEADLINE_S:g} s deadline"


def _deadline(env: Mapping[str, str]) -> Any:
    """Arm SIGALRM for the deadline; returns the handler it replaced (to put back), or None
    where no alarm can be armed (not the main thread)."""

    def expired(signum: int, frame: object) -> None:
        raise HookDeadline()

    try:
        previous = signal.signal(signal.SIGALRM, expired)
    except ValueError:  # not the main thread (a host running the hook in process): no alarm
        return None
    signal.alarm(max(1, int(DEADLINE_S)))
    return previous if previous is not None else signal.SIG_DFL


def main(
    stdin: Any = None,
    env: Mapping[str, str] | None = None,
    now: datetime | None = None,
    event: str = "stop",
    input_file: str | None = None,
) -> int:
    """`loopdeck hook stop` (and `hook stop-failure`): always exit 0; stdout holds one JSON
    object or nothing. An interrupt or a `SystemExit` is journaled, then passed on (the host
    decides: `hook_entry` answers the Stop with the fail-safe line)."""
    env = os.environ if env is None else env
    ws: Workspace | None = None
    out: dict[str, Any] | None
    alarm = _deadline(env)
    try:
        if input_file is not None:
            # The StopFailure hook's input, saved by its shell line before Claude Code exited.
            with open(input_file, "rb") as saved:
                raw = saved.read(MAX_STDIN + 1)
            with contextlib.suppress(OSError):
                os.unlink(input_file)
        else:
            raw = (stdin or sys.stdin.buffer).read(MAX_STDIN + 1)
        if len(raw) > MAX_STDIN:
            raise BadInput("hook input larger than 16 MB")
        try:
            payload = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise BadInput(f"hook input is not JSON ({exc})") from None
        except RecursionError:
            raise BadInput("hook input is not JSON loopdeck can read (nested too deep)") from None
        if not isinstance(payload, dict):
            raise BadInput(f"hook input is a JSON {type(payload).__name__}, expected an object")
        payload, problems = checked_input(payload)
        ws = _workspace(payload, env)
        _journal_problems(ws, problems)
        if event == "stop-failure":
            stop_failure(payload, env, now or utcnow())
            out = None
        else:
            out = handle(payload, env, now or utcnow())
    except BaseException as exc:  # the fail-safe exit is the point of this module
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            with contextlib.suppress(BaseException):
                fail_safe(exc, ws)  # the journal says why this Stop ended
            raise
        try:
            out = fail_safe(exc, ws)
        except Exception:  # even the deadline striking here: stdout still answers
            out = {"systemMessage": FAILED}
    finally:
        if alarm is not None:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, alarm)
    if out is not None:
        _answer(out)
    return 0


answered = False
"""Whether this process printed its answer (or began to): `hook_entry` then prints no other."""


def _answer(out: dict[str, Any]) -> None:
    """Print the one JSON object, as UTF-8 whatever the locale; a lone surrogate from the hook
    input (which UTF-8 cannot hold) goes out escaped. A reader gone (Claude Code killed) is no
    reason for a traceback."""
    global answered
    text = json.dumps(out, ensure_ascii=False) + "\n"
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        data = (json.dumps(out) + "\n").encode("ascii")
    try:
        answered = True
        buffer = getattr(sys.stdout, "buffer", None)
        if buffer is not None:
            buffer.write(data)
        else:
            sys.stdout.write(data.decode("utf-8"))
        sys.stdout.flush()
    except (OSError, ValueError):
        # Nobody reads the answer: what is still buffered goes to /dev/null, so the flush on
        # the way out (the launcher's) meets no broken pipe either.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
