"""What Claude Code runs for loopdeck's hooks: `<python> -I -S <this file> stop` (or `prompt`,
`stop-failure --input FILE`), as `loopdeck install` writes it.

The Stop hook starts on every agent turn, so the interpreter's own start-up counts. `-S` skips
the site start-up (the site folders, every `.pth` file in them, an editable install's import
hook), which the hook's fast path does not need: the folder that holds the `loop` package, found
from this file's own place, is all it puts on the import path. `-I` keeps the project the agent
works in out of the interpreter: no `PYTHON*` variables (a `PYTHONPATH` naming the project would
import its `json.py` in place of the real one), no user site folder, and not even this file's
folder on the path.

What only the slower paths import (PyYAML for a hand-edited state file, psutil) is still found:
the first import nothing else finds runs the site start-up then, once, and is looked for again.
This file is compiled on every run (a script is never cached), so it stays small.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: the Stop hook does not pay for typing
    from collections.abc import Sequence
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


def main(argv: list[str]) -> int:
    """Run the hook `argv` names, as `loopdeck hook ARGV` would."""
    sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.meta_path.append(SiteOnDemand)
    event, given = argv[:1], argv[1:]
    saved_input = event == ["stop-failure"] and len(given) == 2 and given[0] == "--input"
    if (event == ["stop"] and not given) or saved_input:
        from loop import hook

        code = hook.main(event=event[0], input_file=given[1] if given else None)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # the answer is out: the interpreter's teardown is of no use to anyone
    from loop import cli  # the prompt hook, or a form the fast path does not know: argparse says

    return cli.main(["hook", *argv])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
