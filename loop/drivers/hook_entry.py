"""The hooks' way in, behind `loop/launcher.py` (`<python> -I -S <loop>/launcher.py stop`, as
`loopdeck install` writes it; the launcher says why `-I -S`). Here rather than in the launcher
because a script is compiled on every run and a module is not.

The site start-up was skipped, so what only the slower paths import (PyYAML for a hand-edited
state file, psutil) is not on the import path at first: the first import nothing else finds
runs the site start-up then, once, and is looked for again.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: the Stop hook does not pay for typing
    from collections.abc import Iterable, Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

NEVER_IN_SITE = frozenset({"nt", "_winapi", "winreg", "msvcrt", "_overlapped"})
"""Modules the standard library looks for and, off Windows, never finds (`pathlib` asks for
`nt` on every start): no site folder holds them, so missing one is no reason for the site
start-up."""


class SiteOnDemand:
    """The last finder on `sys.meta_path`: asked only for a module no other finder found."""

    ran = False

    @classmethod
    def find_spec(
        cls, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        # A submodule is found through its package, whichever folder that came from.
        if cls.ran or path is not None or name in NEVER_IN_SITE:
            return None
        cls.ran = True  # before: the site start-up imports (sitecustomize) come back here
        import site

        site.main()
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if finder is not cls and find is not None else None
            if spec is not None:
                return spec  # type: ignore[no-any-return]
        return None


def stamps(paths: Iterable[str]) -> dict[str, tuple[int, int]]:
    """(mtime, size) of each file of `paths`; (0, -1) for one that is gone. The hook server's
    way to see an upgrade: `sources()` before it imports, its own modules at each Stop."""
    found: dict[str, tuple[int, int]] = {}
    for path in paths:
        try:
            info = os.stat(path)
        except OSError:
            found[path] = (0, -1)
        else:
            found[path] = (info.st_mtime_ns, info.st_size)
    return found


def sources() -> dict[str, tuple[int, int]]:
    """`stamps` of every module file of the `loop` package, taken before the hook server
    imports them, so that a file changed while it did is seen."""
    folder = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = (os.path.join(where, name) for where, _, names in os.walk(folder) for name in names)
    return stamps(path for path in files if path.endswith(".py"))


def main(argv: list[str]) -> int:
    """Run the hook `argv` names, as `loopdeck hook ARGV` would."""
    sys.meta_path.append(SiteOnDemand)
    event, given = argv[:1], argv[1:]
    saved_input = event == ["stop-failure"] and len(given) == 2 and given[0] == "--input"
    served: int | str | None = None
    if event == ["stop"] and not given:
        from loop.drivers import hook_client

        served = hook_client.ask("stop")
        if isinstance(served, int):
            os._exit(served)  # the server's child answered, on this process's stdout
    if (event == ["stop"] and not given) or saved_input:
        from loop.drivers import hook

        code = hook.main(event=event[0], input_file=given[1] if given else None)
        sys.stdout.flush()
        sys.stderr.flush()
        if served in (hook_client.ABSENT, hook_client.REFUSED):
            hook_client.start_server()  # for the next Stop, now that this one is answered
        os._exit(code)  # the answer is out: the interpreter's teardown is of no use to anyone
    if event == ["hook-server"] and not given:
        before = sources()
        from loop.drivers import hook_server

        return hook_server.main(before)
    if event == ["prompt"] and not given:
        from loop.drivers import hook_prompt

        return hook_prompt.main()
    # Not a form `loopdeck install` writes: one line, and Claude Code goes on (exit 0, no JSON).
    sys.stderr.write(
        f"loopdeck: the launcher runs `stop`, `prompt` or `stop-failure --input FILE`, not {argv!r}\n"
    )
    return 0
