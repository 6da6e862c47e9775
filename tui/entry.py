"""The `loopdeck` console script.

Claude Code runs `loopdeck hook stop` on every turn of the agent: that path goes straight to the
hook, before any command line parser or other verb is loaded, and leaves without the
interpreter's teardown once its answer is flushed. Everything else is `tui.cli`.
"""

from __future__ import annotations

import os
import sys

HOOK_EVENTS = ("stop", "stop-failure")


def main() -> int:
    if sys.argv[1:2] == ["hook"] and sys.argv[2:3] and sys.argv[2] in HOOK_EVENTS:
        from loop.drivers import hook

        given = sys.argv[3:]
        if given and (given[0] != "--input" or len(given) != 2 or sys.argv[2] != "stop-failure"):
            from tui.cli import main as verbs  # not a form the fast path knows: let argparse say

            return verbs()
        code = hook.main(event=sys.argv[2], input_file=given[1] if given else None)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    from tui.cli import main as verbs

    return verbs()


if __name__ == "__main__":
    sys.exit(main())
