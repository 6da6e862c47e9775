"""Read a file's lines from the end, in blocks, without ever reading the whole file.

Journals and transcripts grow without bound (a long Claude Code session writes hundreds of MB);
everything loopdeck wants from them is near the end. The cost here is proportional to what is
read, never to the file's size.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

BLOCK = 64 * 1024


@dataclass(slots=True)
class ReadCounter:
    """How many bytes a backwards scan pulled from disk, so benches and tests can prove the
    scan stayed near the end."""

    bytes_read: int = 0


def lines_backwards(
    f: BinaryIO,
    end: int | None = None,
    stop: int = 0,
    counter: ReadCounter | None = None,
    block: int = BLOCK,
) -> Iterator[tuple[int, bytes, bool]]:
    """Yield `(offset, line, terminated)` from the last line back to the first.

    `line` has no trailing newline; `terminated` says whether it had one (a line without one at
    the end of a file is often a writer caught mid-write). Lines longer than `block` are joined
    across blocks. Scanning stops at byte `stop`.
    """
    if end is None:
        end = f.seek(0, os.SEEK_END)
    pos = end
    # The pieces (newest first) of the line being gathered: joined once, when its start is
    # found, so a line of many blocks costs its length, not its length squared.
    pieces: list[bytes] = []
    after_last_newline = True  # the next piece found is what follows the file's final "\n"
    while pos > stop:
        size = min(block, pos - stop)
        pos -= size
        f.seek(pos)
        chunk = f.read(size)
        if counter is not None:
            counter.bytes_read += len(chunk)
        piece_end = len(chunk)
        newline = chunk.rfind(b"\n", 0, piece_end)
        while newline != -1:
            line = chunk[newline + 1 : piece_end]
            if pieces:
                pieces.append(line)
                line = b"".join(reversed(pieces))
                pieces = []
            if after_last_newline:
                after_last_newline = False
                if line:
                    yield pos + newline + 1, line, False
            else:
                yield pos + newline + 1, line, True
            piece_end = newline
            newline = chunk.rfind(b"\n", 0, piece_end)
        pieces.append(chunk[:piece_end])
    carry = b"".join(reversed(pieces))
    if after_last_newline:
        if carry:
            yield stop, carry, False
    else:
        yield stop, carry, True
