"""The report's charts as inline SVG, drawn by pygal.

pygal writes plain SVG from pure Python (no browser, no native code) and is kept up to date;
its tooltips need a script from its site, so that script is turned off (`js=[]`) and the
settings it would read and its comments (links to its site) are taken out: the page a chart
sits in fetches nothing. Only
figures reach a chart (the loop's text stays in the page's escaped HTML), and the module is
imported only when a report is written.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pygal  # type: ignore[import-untyped]  # no type hints shipped
from pygal.style import Style  # type: ignore[import-untyped]

WIDTH = 640
HEIGHT = 260
MAX_LABELS = 16
"""Iteration labels on an axis: a night of iterations would print a black band."""

STYLE = Style(
    background="transparent",
    plot_background="#ffffff",
    foreground="#333333",
    foreground_strong="#111111",
    foreground_subtle="#d8d8d8",
    opacity=".35",
    opacity_hover=".5",
    colors=("#2e7d32", "#c62828", "#1565c0", "#6a1b9a", "#ef6c00"),
    font_family="system-ui, sans-serif",
    label_font_size=11,
    major_label_font_size=11,
    legend_font_size=12,
    title_font_size=14,
)

_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_SCRIPT = re.compile(r"<script\b.*?</script>", re.DOTALL | re.IGNORECASE)
"""pygal's settings for its tooltips' script, written into each chart even without the script."""
NAMESPACES = ("http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink")
"""The only addresses a chart may hold: XML namespace names, which nothing fetches."""


def _config(chart: Any, labels: Sequence[str]) -> None:
    chart.x_labels = list(labels)
    if len(labels) > MAX_LABELS:
        chart.x_labels_major_every = max(1, len(labels) // MAX_LABELS)
        chart.show_minor_x_labels = False


def _options(title: str, **more: object) -> dict[str, object]:
    return {
        "title": title,
        "js": [],
        "style": STYLE,
        "width": WIDTH,
        "height": HEIGHT,
        "explicit_size": False,
        "disable_xml_declaration": True,
        "legend_at_bottom": True,
        "legend_box_size": 10,
        "print_values": False,
        "dots_size": 3,
        "allow_interruptions": True,
        "no_data_text": "no data",
        **more,
    }


def _svg(chart: Any) -> str:
    svg = _SCRIPT.sub("", _COMMENT.sub("", str(chart.render(is_unicode=True))))
    left = [url for url in re.findall(r"https?://[^\s\"'<>)]+", svg) if url not in NAMESPACES]
    left += re.findall(r"(?:href|src)\s*=\s*[\"']?//[^\s\"'<>]*", svg)  # `//host/…`: fetched too
    if left:  # pygal changed what it writes: a chart must never make the page fetch anything
        raise ValueError(f"a chart refers to {left[0]}")
    return svg


def lines(
    title: str, labels: Sequence[str], named: Sequence[tuple[str, Sequence[float | None]]], **more: object
) -> str:
    """A line chart of one or more series over the iterations."""
    chart = pygal.Line(**_options(title, show_dots=len(labels) <= 40, **more))
    _config(chart, labels)
    for name, values in named:
        chart.add(name, list(values))
    return _svg(chart)


def bars(title: str, labels: Sequence[str], name: str, values: Sequence[float | None], **more: object) -> str:
    """A bar chart: one bar per turn."""
    chart = pygal.Bar(**_options(title, show_legend=False, **more))
    _config(chart, labels)
    chart.add(name, list(values))
    return _svg(chart)
