"""The hooks' way in, behind `loop/launcher.py` (`<python> -I <loop>/launcher.py stop`, as
`loopdeck install` writes it; the launcher says why `-I`). Here rather than in the launcher
because a script is compiled on every run and a module is read from the bytecode `loopdeck
install` compiled.

Each Stop is answered in its own process, and whatever happens in it the process exits 0 with
one JSON object on stdout or nothing: `hook.main` fails safe on every error, and what it passes
on (an interrupt, a `SystemExit`) or never reaches (a broken install that cannot import it) is
caught here, said on stderr and answered with the same fail-safe line.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from typing import NoReturn

FAILED = "loopdeck: the Stop hook failed safe and allowed this stop"
"""`hook.FAILED`, here too: a hook that cannot be imported must still say it."""


def main(argv: list[str]) -> int:
    """Run the hook `argv` names, as `loopdeck hook ARGV` would."""
    event, given = argv[:1], argv[1:]
    if event == ["stop"] and not given:
        answer_stop("stop", None)
    if event == ["stop-failure"] and len(given) == 2 and given[0] == "--input":
        answer_stop("stop-failure", given[1])
    if event == ["prompt"] and not given:
        from loop.drivers import hook_prompt  # one module per event: a process loads its own

        return hook_prompt.main()
    # Not a form `loopdeck install` writes: one line, and Claude Code goes on (exit 0, no JSON).
    sys.stderr.write(
        f"loopdeck: the launcher runs `stop`, `prompt` or `stop-failure --input FILE`, not {argv!r}\n"
    )
    return 0


def answer_stop(event: str, input_file: str | None) -> NoReturn:
    """Answer this process's Stop (or StopFailure) and exit 0, whatever happens on the way."""
    try:  # imported here, inside the try: a broken install still gets its fail-safe answer
        from loop.drivers import hook
    except BaseException as exc:  # a broken install: nothing of it can journal
        failed(exc, print_answer=event == "stop")
    else:
        try:
            hook.main(event=event, input_file=input_file)
        except BaseException as exc:  # what hook.main passes on (journaled already)
            failed(exc, print_answer=event == "stop" and not hook.answered)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(0)  # the answer is out: the interpreter's teardown is of no use to anyone


def failed(error: BaseException, print_answer: bool) -> None:
    """Say why the Stop failed: one line on stderr, and (when nothing was printed yet) the
    fail-safe answer on stdout that lets the session stop and tells the person. The journal
    has the line too when the hook got far enough to know the project (`hook.main` writes it
    before it passes an interrupt on). Never raises."""
    try:
        line = f"{FAILED} ({type(error).__name__}: {error})"
    except Exception:  # an error whose own text fails
        line = f"{FAILED} ({type(error).__name__})"
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(line + "\n")
    if print_answer:
        try:
            text = json.dumps({"systemMessage": line[:900]})
        except Exception:  # even that: the line alone, plain ASCII
            text = '{"systemMessage": "' + FAILED + '"}'
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.write(text + "\n")
