"""The hooks' way in, behind `loop/launcher.py` (`<python> -I -S <loop>/launcher.py stop`, as
`loopdeck install` writes it; the launcher says why `-I -S`). Here rather than in the launcher
because a script is compiled on every run and a module is read from the bytecode `loopdeck
install` compiled.

Each Stop is answered in its own process, and whatever happens in it the process exits 0 with
one JSON object on stdout or nothing: `hook.main` fails safe on every error, and what it passes
on (an interrupt, a `SystemExit`) or never reaches (a broken install that cannot import it) is
caught here, said on stderr and answered with the same fail-safe line.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the Stop hook does not pay for typing
    from typing import NoReturn

FAILED = "loopdeck: the Stop hook failed safe and allowed this stop"
"""`hook.FAILED`, here too: a hook that cannot be imported must still say it."""


def site_folders() -> list[str]:
    """The site-packages folders the site start-up would have put on the path (`-S` skipped
    it): where the slower paths find PyYAML (a hand-edited state) and psutil. Only the folders:
    none of their `.pth` files runs (an editable install's import hook would cost every Stop
    milliseconds, and `loop` is found from the launcher's own place). A virtual environment is
    recognised as the site start-up does (its `pyvenv.cfg`): `-S` left `sys.prefix` the base
    interpreter's."""
    import site  # the module only (a fraction of a millisecond): `site.main()` is what -S skipped

    exe_dir = os.path.dirname(os.path.abspath(sys.executable))
    prefixes = [sys.prefix, sys.exec_prefix]
    for conf in (os.path.join(exe_dir, "pyvenv.cfg"), os.path.join(os.path.dirname(exe_dir), "pyvenv.cfg")):
        try:
            with open(conf, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except (OSError, ValueError):
            continue
        system = True
        for line in lines:
            key, sep, value = line.partition("=")
            if sep and key.strip().lower() == "include-system-site-packages":
                system = value.strip().lower() == "true"
        prefixes = [os.path.dirname(exe_dir), *prefixes] if system else [os.path.dirname(exe_dir)]
        break
    found = [path for path in site.getsitepackages(prefixes) if path not in sys.path]
    return [path for path in dict.fromkeys(found) if os.path.isdir(path)]


def main(argv: list[str]) -> int:
    """Run the hook `argv` names, as `loopdeck hook ARGV` would."""
    sys.path.extend(site_folders())  # after the standard library and `loop`: only what they lack
    event, given = argv[:1], argv[1:]
    if event == ["stop"] and not given:
        answer_stop("stop", None)
    if event == ["stop-failure"] and len(given) == 2 and given[0] == "--input":
        answer_stop("stop-failure", given[1])
    if event == ["prompt"] and not given:
        from loop.drivers import hook_prompt

        return hook_prompt.main()
    # Not a form `loopdeck install` writes: one line, and Claude Code goes on (exit 0, no JSON).
    sys.stderr.write(
        f"loopdeck: the launcher runs `stop`, `prompt` or `stop-failure --input FILE`, not {argv!r}\n"
    )
    return 0


def answer_stop(event: str, input_file: str | None) -> NoReturn:
    """Answer this process's Stop (or StopFailure) and exit 0, whatever happens on the way."""
    try:
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
            import json

            text = json.dumps({"systemMessage": line[:900]})
        except Exception:  # even that: the line alone, plain ASCII
            text = '{"systemMessage": "' + FAILED + '"}'
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.write(text + "\n")
