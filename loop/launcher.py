"""What Claude Code runs for loopdeck's hooks: `<python> -I -S <this file> stop` (or `prompt`,
`stop-failure --input FILE`), as `loopdeck install` writes it.

The Stop hook starts on every agent turn, so the interpreter's own start-up counts. `-S` skips
the site start-up (the site folders, every `.pth` file in them, an editable install's import
hook), which the hook's fast path does not need: the folder that holds the `loop` package, found
from this file's own place, is all it puts on the import path. `-I` keeps the project the agent
works in out of the interpreter: no `PYTHON*` variables (a `PYTHONPATH` naming the project would
import its `json.py` in place of the real one), no user site folder, and not even this file's
folder on the path. A script is compiled on every run: the rest is in `loop.drivers.hook_entry`,
whose bytecode `loopdeck install` compiled, so that no Stop compiles anything.
"""

import os
import sys

if __name__ == "__main__":
    sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        from loop.drivers.hook_entry import main
    except BaseException as exc:  # a broken install: one line, and Claude Code goes on (exit 0)
        sys.stderr.write(f"loopdeck: the hook cannot start ({type(exc).__name__}: {exc})\n")
        sys.exit(0)
    sys.exit(main(sys.argv[1:]))
