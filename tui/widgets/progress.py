"""Pictures of the loop's progress per iteration: the Progress view's charts and the main
screen's small panel.

Both draw `loop.views.progress.series` (the same figures as `loopdeck report`), which the app
reads on its refresh path and sets on them (`tui.progress`): they read and watch nothing
themselves. A chart with nothing to draw says so in a line, never an empty frame.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.reactive import var
from textual.widgets import Sparkline, Static

from loop.views.progress import Series
from tui import actions
from tui.widgets.common import update_static


@dataclass(frozen=True)
class Line:
    """One figure of the series drawn in a chart."""

    column: str
    """The `Point` field it draws."""
    label: str
    color: str
    """`#rrggbb`: plotext draws the line in it and the chart's title names the line in it (a
    legend inside the plot would cover the lines)."""

    @property
    def rgb(self) -> tuple[int, int, int]:
        value = self.color.lstrip("#")
        return int(value[0:2], 16), int(value[2:4], 16), int(value[4:6], 16)


@dataclass(frozen=True)
class Chart:
    id: str
    title: str
    lines: tuple[Line, ...]
    empty: str
    """What the chart says when none of its figures is known yet."""
    bars: bool = False
    money: bool = False


GREEN, YELLOW, RED, CYAN, BLUE = "#4ebf71", "#e5c07b", "#e06c75", "#56b6c2", "#61afef"

CHARTS: tuple[Chart, ...] = (
    Chart(
        "tasks",
        "Tasks",
        (Line("tasks_done", "done", GREEN), Line("tasks_open", "open", YELLOW)),
        "No task counts yet: each judged turn records them.",
    ),
    Chart(
        "tests",
        "Tests",
        (Line("tests_passed", "passing", GREEN), Line("tests_failed", "failing", RED)),
        "No test results yet: a verification command that reports its tests adds them.",
    ),
    Chart(
        "cost",
        "Cost so far",
        (Line("cost_usd", "USD", CYAN),),
        "No cost reported: the agent did not say what its turns cost.",
        money=True,
    ),
    Chart(
        "durations",
        "Turn durations (s)",
        (Line("duration_s", "seconds", BLUE),),
        "No turn durations yet: each finished turn records its time.",
        bars=True,
    ),
)
"""The Progress view's charts, in reading order (left to right, top to bottom)."""


def ticks(low: float, high: float, most: int, whole: bool = False) -> list[float]:
    """At most `most` round ticks from `low` to `high` (steps of 1, 2, 2.5 or 5 times a power of
    ten; whole steps when the figures are counts, `whole`)."""
    if high <= low:
        return [low]
    rough = (high - low) / max(1, most - 1)
    power = 10.0 ** math.floor(math.log10(rough))
    if whole and rough <= 1:
        step = 1.0
    else:
        steps = (1, 2, 5, 10) if whole else (1, 2, 2.5, 5, 10)
        step = next(m * power for m in steps if m * power >= rough)
    first = math.ceil(low / step - 1e-9)
    found = [round(n * step, 10) for n in range(first, math.floor(high / step + 1e-9) + 1)]
    return found or [low]


def money(value: float) -> str:
    return f"${value:.2f}" if value < 100 else f"${value:.0f}"


class ProgressChart(Vertical):
    """One chart in a frame titled with what it shows; a line instead when nothing is known."""

    DEFAULT_CSS = """
    ProgressChart { border: round $primary 50%; height: 1fr; width: 1fr; padding: 0; }
    ProgressChart > .empty { display: none; padding: 0 1; color: $text-muted; }
    ProgressChart.-empty > .empty { display: block; }
    ProgressChart.-empty > PlotextPlot { display: none; }
    """

    def __init__(self, chart: Chart) -> None:
        super().__init__(id=f"chart-{chart.id}", classes="-empty")
        self.chart = chart
        self.shown: tuple[tuple[float | None, ...], ...] | None = None
        self.data = Series()

    def compose(self) -> ComposeResult:
        # Here, not at the top: plotext costs ~50 ms to import, which a monitor whose Progress
        # view is never opened does not pay.
        from textual_plotext import PlotextPlot

        yield Static(self.chart.empty, classes="empty", markup=False)
        yield PlotextPlot()

    def on_mount(self) -> None:
        lines = self.chart.lines
        named = [f"[{line.color}]{line.label}[/]" for line in lines] if len(lines) > 1 else []
        self.border_title = " · ".join([self.chart.title, *named])

    @property
    def empty(self) -> bool:
        return self.has_class("-empty")

    def on_resize(self) -> None:
        """Drawn again at the new size: the ticks on the side are as many as the height holds."""
        self.shown = None
        self.draw(self.data)

    def draw(self, data: Series) -> None:
        """The chart for `data` (only when its own figures changed)."""
        chart = self.chart
        columns = tuple(tuple(data.column(line.column)) for line in chart.lines)
        self.data = data
        if columns == self.shown:
            return
        self.shown = columns
        iterations = [point.iteration for point in data.points]
        known = [
            (line, [(x, y) for x, y in zip(iterations, column, strict=True) if y is not None])
            for line, column in zip(chart.lines, columns, strict=True)
        ]
        known = [(line, pairs) for line, pairs in known if pairs]
        self.set_class(not known, "-empty")
        if not known:
            return
        from textual_plotext import PlotextPlot

        plot = self.query_one(PlotextPlot)
        plt = plot.plt
        plt.clear_figure()
        xs = [x for _, pairs in known for x, _ in pairs]
        ys = [y for _, pairs in known for _, y in pairs]
        for line, pairs in known:
            px, py = [float(x) for x, _ in pairs], [float(y) for _, y in pairs]
            if chart.bars:
                plt.bar(px, py, color=line.rgb, width=0.6)
            elif len(pairs) == 1:
                plt.scatter(px, py, color=line.rgb, marker="dot")
            else:
                plt.plot(px, py, color=line.rgb, marker="braille")
        plt.xaxes(True, False)  # the frame is the widget's border: plotext draws two axes only
        plt.yaxes(True, False)
        low_x, high_x = min(xs), max(xs)
        xt = [t for t in ticks(low_x, high_x, 6, whole=True) if float(t).is_integer()]
        plt.xticks(xt, [str(int(t)) for t in xt])
        low_y = 0.0
        high_y = max(max(ys), 1.0 if not chart.money else 0.01)
        if chart.bars:
            plt.ylim(0, high_y)
        else:
            plt.ylim(low_y, high_y * 1.05)
        yt = ticks(low_y, high_y, 5 if self.size.height >= 12 else 3, whole=not chart.money)
        labels = [money(t) if chart.money else _number(t) for t in yt]
        plt.yticks(yt, labels)
        plot.refresh()


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


class ProgressCharts(Vertical):
    """The Progress view's four charts, two by two, with a line that says the trend."""

    DEFAULT_CSS = """
    ProgressCharts { height: 1fr; }
    ProgressCharts #progress-headline {
        height: 1; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis;
    }
    ProgressCharts .row { height: 1fr; }
    """

    series: var[Series] = var(Series, init=False)

    def compose(self) -> ComposeResult:
        yield Static("", id="progress-headline", markup=False)
        for pair in (CHARTS[:2], CHARTS[2:]):
            with Horizontal(classes="row"):
                for chart in pair:
                    yield ProgressChart(chart)

    def on_mount(self) -> None:
        self.show(self.series)

    def watch_series(self, data: Series) -> None:
        self.show(data)

    def show(self, data: Series) -> None:
        update_static(self.query_one("#progress-headline", Static), headline(data))
        for chart in self.query(ProgressChart):
            chart.draw(data)


def change(values: Sequence[float | None], word: str) -> str | None:
    """`failing 10 → 0`: the first and the last known value (`failing 3` when it never moved)."""
    known = [v for v in values if v is not None]
    if not known:
        return None
    first, last = _number(float(known[0])), _number(float(known[-1]))
    return f"{word} {first} → {last}" if len(known) > 1 else f"{word} {last}"


def headline(data: Series) -> str:
    """One line above the charts: the iterations drawn and how the figures moved."""
    if not data.points:
        return "No iteration recorded yet: the charts fill in as the loop's turns end."
    first, last = data.points[0].iteration, data.points[-1].iteration
    span = f"iteration {first}" if first == last else f"iterations {first}–{last}"
    parts = [
        change(data.column("tests_failed"), "failing"),
        change(data.column("tests_passed"), "passing"),
        change(data.column("tasks_open"), "tasks open"),
    ]
    cost = [v for v in data.column("cost_usd") if v is not None]
    if cost:
        parts.append(f"cost {money(cost[-1])}")
    return " · ".join([span, *(p for p in parts if p)])


def trend(data: Series) -> tuple[str, list[float]]:
    """What a small picture of the loop draws: tests failing when tests were counted, else the
    tasks open (`("", [])` when neither)."""
    for column, word in (("tests_failed", "failing"), ("tasks_open", "tasks open")):
        values = [float(v) for v in data.column(column) if v is not None]
        if values:
            return word, values
    return "", []


class ProgressPanel(Vertical):
    """The main screen's small picture of progress (where there is room: `app.tcss`): a
    sparkline of the tests failing per iteration (or the tasks open), and how they moved. It
    stays away until the loop has a figure to show."""

    DEFAULT_CSS = """
    ProgressPanel { border: round $primary 50%; padding: 0 1; height: auto; }
    ProgressPanel.-empty { display: none; }
    ProgressPanel Sparkline { height: 1; }
    ProgressPanel Sparkline > .sparkline--max-color { color: $error; }
    ProgressPanel Sparkline > .sparkline--min-color { color: $success; }
    ProgressPanel #progress-line { height: 1; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    series: var[Series] = var(Series, init=False)
    """The loop's progress per iteration (bound to the main screen's, which the app sets)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, classes="-empty")

    def compose(self) -> ComposeResult:
        yield Sparkline([], id="progress-sparkline")
        yield Static("", id="progress-line", markup=False)

    def on_mount(self) -> None:
        self.border_title = "Progress"
        self.border_subtitle = f"{actions.key_label(self.app, 'view.progress')} charts"
        self.show(self.series)

    def watch_series(self, data: Series) -> None:
        self.show(data)

    def show(self, data: Series) -> None:
        word, values = trend(data)
        self.set_class(not values, "-empty")
        if not values:
            return
        self.query_one(Sparkline).data = values if len(values) > 1 else values * 2
        parts = [
            change(data.column("tests_failed"), "failing"),
            change(data.column("tests_passed"), "passing"),
        ]
        line = " · ".join(p for p in parts if p) or change(values, word) or word
        update_static(self.query_one("#progress-line", Static), line)
