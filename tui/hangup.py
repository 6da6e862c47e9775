"""The monitor ends when its terminal is gone.

A terminal that closes sends its programs SIGHUP, and the monitor ends on it. A monitor started
in a session of its own (`setsid`, a supervisor, a tool that opened a pseudo-terminal and
closed it) gets none: its terminal then reads as ended, at once and forever after, and Textual's
input thread read it in a loop at a whole core, for as long as the machine stayed up.

The kernel marks such a terminal hung up. Watched for that alone (an epoll set asking for no
event, which reports only hang-ups and errors), the watch costs nothing until the terminal goes:
the terminal's input stays Textual's to read.
"""

from __future__ import annotations

import asyncio
import select
from collections.abc import Callable


def watch(fd: int, gone: Callable[[], object]) -> Callable[[], None] | None:
    """Call `gone` once, on the running event loop, when the terminal `fd` hangs up. Returns
    what stops the watch, or None where the terminal cannot be watched this way (not Linux, not
    a terminal or a pipe)."""
    epoll = getattr(select, "epoll", None)
    if epoll is None:
        return None
    loop = asyncio.get_running_loop()
    try:
        hangups = epoll()
    except OSError:
        return None
    try:
        hangups.register(fd, 0)  # no event asked for: epoll reports hang-ups and errors regardless
    except OSError:  # a regular file, a closed descriptor
        hangups.close()
        return None

    def stop() -> None:
        if not hangups.closed:
            loop.remove_reader(hangups.fileno())
            hangups.close()

    def ready() -> None:
        if any(mask & (select.EPOLLHUP | select.EPOLLERR) for _fd, mask in hangups.poll(0)):
            stop()
            gone()

    loop.add_reader(hangups.fileno(), ready)
    return stop
