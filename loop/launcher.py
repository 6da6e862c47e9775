"""What Claude Code runs for loopdeck's hooks: `<python> -I <this file> stop` (or `prompt`,
`stop-failure --input FILE`), as `loopdeck install` writes it.

`-I` keeps the project the agent works in out of the interpreter: no `PYTHON*` variables (a
`PYTHONPATH` naming the project would import its `json.py` in place of the real one), no user
site folder, and not even this file's folder on the path. The site start-up runs as usual, so
the environment's packages (PyYAML, psutil) are found as they are for `loopdeck` itself, from a
wheel or an editable install alike; the folder that holds this `loop` package is added after
them, for a copy that is not installed. A script is compiled on every run: the rest is in
`loop.drivers.hook_entry`, whose bytecode `loopdeck install` compiled.
"""

import os
import site
import sys

if __name__ == "__main__":
    if sys.flags.no_site:  # an install made before this one wrote `-I -S`: the same start-up
        site.main()
    sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        from loop.drivers.hook_entry import main
    except BaseException as exc:  # a broken install: one line, and Claude Code goes on (exit 0)
        sys.stderr.write(f"loopdeck: the hook cannot start ({type(exc).__name__}: {exc})\n")
        sys.exit(0)
    sys.exit(main(sys.argv[1:]))
