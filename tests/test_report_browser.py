"""The report opened in a real headless Chromium: its charts are drawn (the screenshot is not
blank where they are), and the page asks the network for nothing (Chromium's own log of every
request it made, checked against a page that does fetch, so the check is known to see one).
Skipped, with one line saying why, where Chromium is missing (as the monitor's browser test)."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from loop.store.paths import Workspace
from loop.store.state import StateStore
from loop.views.report import gather
from loop.views.report.files import default_path, text_of, write
from tests.test_report import loop_state, runner_journal

BROWSER = next(
    (p for p in ("/usr/bin/chromium", shutil.which("chromium") or "") if p and Path(p).exists()), None
)
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars", "--host-resolver-rules=MAP * ~NOTFOUND",
]  # fmt: skip
GREEN, RED = (0x2E, 0x7D, 0x32), (0xC6, 0x28, 0x28)
"""The charts' passing and failing lines (`loop.views.report.charts.STYLE`)."""


def shoot(page: str, tmp_path: Path, name: str) -> tuple[Path, list[str]]:
    """A screenshot of `page` (its first chart in view) and the addresses the page
    itself asked for (Chromium's net log, its own update checks left out)."""
    assert BROWSER is not None
    shot, log = tmp_path / f"{name}.png", tmp_path / f"{name}.netlog.json"
    subprocess.run(
        [BROWSER, *FLAGS, f"--user-data-dir={tmp_path / name}", f"--log-net-log={log}",
         f"--screenshot={shot}", "--window-size=700,800", page],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    events = json.loads(log.read_text())
    kinds = {v: k for k, v in events["constants"]["logEventTypes"].items()}
    asked = [
        str(params["url"])
        for event in events["events"]
        if kinds.get(event["type"]) == "URL_REQUEST_START_JOB"
        and "file://" in str((params := event.get("params") or {}).get("network_isolation_key", ""))
    ]
    return shot, [url for url in asked if not url.startswith(("file:", "data:"))]


def pixels(png: Path) -> tuple[int, int, list[bytes]]:
    """A PNG's width, height and rows of RGB(A) bytes (8 bits per channel, as Chromium writes)."""
    data = png.read_bytes()
    pos, idat, width, height, channels = 8, b"", 0, 0, 4
    while pos < len(data):
        size, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + size]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6)
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + size
    raw, stride, rows, previous = zlib.decompress(idat), width * channels, [], bytes(width * channels)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - channels] if x >= channels else 0
            b, c = previous[x], previous[x - channels] if x >= channels else 0
            if kind == 1:
                line[x] = (line[x] + a) & 0xFF
            elif kind == 2:
                line[x] = (line[x] + b) & 0xFF
            elif kind == 3:
                line[x] = (line[x] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line))
        previous = bytes(line)
    return width, channels, rows


def near(pixel: tuple[int, ...], color: tuple[int, int, int]) -> bool:
    return all(abs(p - c) < 40 for p, c in zip(pixel, color, strict=False))


@pytest.mark.skipif(
    BROWSER is None, reason="no Chromium installed (apt-get install chromium) for the browser test"
)
def test_the_report_in_a_real_browser_draws_its_charts_and_fetches_nothing(
    ws: Workspace, tmp_path: Path
) -> None:
    StateStore(ws).write(loop_state(driver="runner", iteration=10, usage={"cost_micro_usd": 2_500_000}))
    runner_journal(ws)
    report = gather(ws)
    path = write(default_path(ws, report), text_of(report))
    shot, asked = shoot(path.as_uri(), tmp_path, "report")
    assert asked == []
    width, channels, rows = pixels(shot)
    found = [tuple(row[x : x + 3]) for row in rows for x in range(0, width * channels, channels)]
    # The running loop's page has no other green or red in view: these are the test curve's.
    assert sum(near(c, GREEN) for c in found) > 100, "no passing line drawn"
    assert sum(near(c, RED) for c in found) > 100, "no failing line drawn"

    canary = tmp_path / "canary.html"  # the same check sees a page that does fetch
    canary.write_text('<img src="http://canary.invalid/x.png">')
    assert shoot(canary.as_uri(), tmp_path, "canary")[1] == ["http://canary.invalid/x.png"]
