"""The verbs that open the monitor: `tui`, `serve`, `demo`. Their functions are `tui`'s, found
by `loop.cli.main` when one is asked for (`loop` never imports the monitor): no `func` here."""

from __future__ import annotations

import argparse

from loop.cli.definition.base import VerbGroup

MONITOR_VERBS = ("tui", "serve", "demo")


def add(verbs: VerbGroup) -> None:
    tui = verbs.add_parser("tui", help="the monitor (also: loopdeck with no verb, on a terminal)")
    tui.add_argument(
        "dir", nargs="*", metavar="DIR", help="the workspace (default: here); several open the fleet view"
    )
    tui.add_argument("--scan", metavar="DIR", help="the fleet view of every loop found below DIR")
    tui.add_argument(
        "--depth",
        type=int,
        default=4,
        metavar="N",
        help="how many folder levels --scan looks down (default 4)",
    )
    tui.set_defaults(func=None)

    serve = verbs.add_parser(
        "serve",
        help="the monitor in a web browser",
        description=(
            "Serve the monitor to a web browser. Anyone with the page can steer the loops, so every "
            "request needs a token: a random one unless given, printed once in the address to open "
            "(http://HOST:PORT/?token=...). The browser then keeps it in a cookie; pages from other "
            "sites and other host names are refused, and the token is never logged."
        ),
    )
    serve.add_argument("dir", nargs="*", metavar="DIR", help="the workspace(s), as for tui")
    serve.add_argument("--scan", metavar="DIR", help="the fleet view of every loop found below DIR")
    serve.add_argument("--depth", type=int, default=4, metavar="N", help="how deep --scan looks (default 4)")
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        help="the address to listen on (default 127.0.0.1); any other serves plain HTTP to the network, "
        "the token included: from another machine, tunnel over SSH instead (ssh -L 8000:127.0.0.1:8000 HOST)",
    )
    serve.add_argument("--port", type=int, default=8000, help="the port (default 8000; 0: any free one)")
    serve.add_argument(
        "--token-file",
        metavar="FILE",
        help="a file holding the secret the browser must present, at least 8 characters, readable by you "
        "alone (default: LOOPDECK_SERVE_TOKEN, else a random one, printed once)",
    )
    serve.add_argument("--token", help=argparse.SUPPRESS)  # refused: a command line shows in `ps`
    serve.set_defaults(func=None)

    demo = verbs.add_parser(
        "demo", help="a throwaway workspace, a scripted agent, the runner and the monitor"
    )
    demo.add_argument("--headless", action="store_true", help="no monitor: run to completion, print the log")
    demo.add_argument(
        "--workers", type=int, metavar="N", help="parallel workers (2-12) over a small task graph"
    )
    demo.set_defaults(func=None)
