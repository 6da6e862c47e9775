"""The `loopdeck` command: `main` parses the verb (`loop.cli.definition`) and runs it.

Each verb's module is imported when that verb runs; the verbs that open the monitor are `tui`'s,
found through the `loopdeck.monitor` entry points (`loop` never imports the monitor). Claude
Code's `hook stop` goes to the hook before any parser.

Exit status: 0 done, 1 failed (the message on stderr), 2 usage.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence

from loop.cli.definition import build_parser
from loop.cli.definition.monitor import MONITOR_VERBS
from loop.core.errors import LoopdeckError, os_problem
from loop.core.redact import redact

__all__ = ["build_parser", "main"]

HOOK_EVENTS = ("stop", "stop-failure")
MONITOR_GROUP = "loopdeck.monitor"
"""The entry points through which the installed package names the monitor's verbs."""

Verb = Callable[[argparse.Namespace], int]
MonitorVerbs = Mapping[str, Verb]
"""The verbs that open the monitor (`tui`, `serve`, `demo`), by name."""


def main(argv: Sequence[str] | None = None, monitor: MonitorVerbs | None = None) -> int:
    """The `loopdeck` console script (and `python -m loop.cli`). `monitor` hands in the
    monitor's verbs (`tui.cli` does); by default they are looked up when one is asked for."""
    if argv is None and _is_hook(sys.argv[1:]):
        _run_hook(sys.argv[2], sys.argv[3:])
    sdk_before = "temporalio" in sys.modules
    code = _main(argv, monitor)
    if not sdk_before and "temporalio" in sys.modules:
        # A verb loaded the Temporal SDK, whose native runtime can abort in the interpreter's
        # teardown (after the work is done, success or error): leave without that teardown.
        # Only when this call loaded it: a process that had it before (a test) goes on.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _is_hook(given: Sequence[str]) -> bool:
    """`hook stop`, or `hook stop-failure --input FILE`: the forms older installs run on every
    agent turn. Any other form goes through the parser, which says what is wrong with it."""
    if given[:1] != ["hook"] or given[1:2] not in (["stop"], ["stop-failure"]):
        return False
    rest = given[2:]
    return not rest or (given[1] == "stop-failure" and len(rest) == 2 and rest[0] == "--input")


def _run_hook(event: str, rest: Sequence[str]) -> None:
    """Answer the hook and leave without the interpreter's teardown once it is flushed."""
    # Imported here, not at the top: the hook's modules cost every other verb ~45 ms.
    from loop.drivers import hook

    code = hook.main(event=event, input_file=rest[1] if rest else None)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _main(argv: Sequence[str] | None, monitor: MonitorVerbs | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.verb is None:
        # People get the monitor; scripts and pipes (no terminal) get the status.
        tty = sys.stdout.isatty() and sys.stdin.isatty() and _monitor_verb("tui", monitor) is not None
        args = parser.parse_args([*(argv or sys.argv[1:]), "tui" if tty else "status"])
    try:
        _check_workspace(args)
        func = args.func
        if func is None:
            func = _monitor_verb(args.verb, monitor)
            if func is None:
                raise LoopdeckError(
                    f"`loopdeck {args.verb}` opens the monitor, which is not installed with this "
                    "loopdeck (install the package, e.g. pip install -e ., to get it)"
                )
        result: int = func(args)
        sys.stdout.flush()  # inside the try: a reader gone early (`| head -1`) is met here
        return result
    except BrokenPipeError:
        # The reader closed the pipe: what it wanted it has. Point stdout at /dev/null so the
        # interpreter's own flush at exit does not print a traceback, and end quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except LoopdeckError as exc:
        # one line; a detached runner's goes to runner.log
        print(f"loopdeck: error: {redact(str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except OSError as exc:  # a read-only or full disk, a file where a folder belongs…
        print(f"loopdeck: error: {os_problem(exc)}", file=sys.stderr)
        return 1
    except Exception as exc:  # a bug: still one line, never a traceback
        print(
            f"loopdeck: error: unexpected {type(exc).__name__}: {_one_line(str(exc))} "
            "(a bug in loopdeck: please report it with the command that caused it)",
            file=sys.stderr,
        )
        return 1


def _monitor_verb(verb: str, given: MonitorVerbs | None) -> Verb | None:
    """The function of a verb that opens the monitor: handed in, else the installed package's
    `loopdeck.monitor` entry point of that name (None when there is none)."""
    if verb not in MONITOR_VERBS:
        return None
    if given is not None:
        return given.get(verb)
    # Imported here, not at the top: importlib.metadata costs every other verb ~35 ms, and only
    # the monitor's verbs (which then import Textual, ~150 ms) look the entry points up.
    from importlib.metadata import entry_points

    for point in entry_points(group=MONITOR_GROUP, name=verb):
        found: Verb = point.load()
        return found
    return None


def _check_workspace(args: argparse.Namespace) -> None:
    """`-C DIR` names a folder that exists: `-C /nonexistent status` must not say "no loop"
    and succeed."""
    given = getattr(args, "workspace", None)
    if given is None:
        return
    folder = os.fspath(given)
    if not os.path.exists(folder):
        raise LoopdeckError(f"-C {given}: the folder does not exist")
    if not os.path.isdir(folder):
        raise LoopdeckError(f"-C {given} is a file, expected a folder")


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 300 else text[:297] + "..."


if __name__ == "__main__":
    sys.exit(main())
