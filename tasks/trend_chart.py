"""The last nights as a picture: chunks, pages, quarantined and seconds, one small bar chart
each, oldest night left, as inline SVG in a markdown artifact.

Prefect renders a markdown artifact's HTML through DOMPurify with its SVG profile: SVG
elements and presentation attributes (fill, stroke, font-size) are kept, `style`
attributes and `<style>` elements are dropped, so every colour here is an attribute. Text
is `currentColor`, so it reads on the dashboard's dark and light themes alike. An SVG is an
HTML block only when its opening tag has a line of its own and no line inside it is blank.

Every bar has its night under the axis (the day and the UTC time it started, on two lines),
so a screenshot says which bar is which night; the figure and verdict are its tooltip.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from html import escape

from firechunk.run.history import RunRow

SLOTS = 14  # nights a panel has room for; fewer nights leave the left of it empty
PANEL_WIDTH = 390
PANEL_HEIGHT = 134
GAP = 24
PLOT_TOP = 34
PLOT_HEIGHT = 62
LEGEND_HEIGHT = 26
WIDTH = 2 * PANEL_WIDTH + GAP
HEIGHT = 2 * PANEL_HEIGHT + GAP + LEGEND_HEIGHT

COLOURS = {"passed": "#3fa36b", "failed": "#e5534b", "refused": "#d9822b"}
OTHER = "#8b949e"  # running, unfinished, superseded, unreadable
HELD = "#4c8dff"
LABEL_SIZE = 8  # px: "11-27" fits under a bar of 14 in a panel


@dataclass(frozen=True)
class Metric:
    title: str
    value: Callable[[RunRow], float | None]
    decimals: int = 0


METRICS = (
    Metric("chunks", lambda row: row.chunks),
    Metric("pages", lambda row: row.pages),
    Metric("quarantined", lambda row: row.quarantined),
    Metric("seconds", lambda row: row.seconds, decimals=1),
)


def trend_svg(runs: list[RunRow], held_run: str | None = None) -> str:
    """Four panels in a 2 x 2 grid and a legend; `runs` newest first (as `list_runs`
    gives them), drawn oldest left. `held_run`: the run the database holds, marked ▲."""
    nights = list(reversed(runs[:SLOTS]))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" fill="currentColor" '
        'role="img" aria-label="The last nights: chunks, pages, quarantined, seconds">'
    ]
    for index, metric in enumerate(METRICS):
        x = (index % 2) * (PANEL_WIDTH + GAP)
        y = (index // 2) * (PANEL_HEIGHT + GAP)
        parts += _panel(metric, nights, held_run, x, y)
    parts += _legend(HEIGHT - LEGEND_HEIGHT + 16)
    parts.append("</svg>")
    return "\n".join(parts)


def _panel(
    metric: Metric, nights: list[RunRow], held_run: str | None, left: float, top: float
) -> list[str]:
    """A title with the newest night's figure (in its verdict's colour, and saying so
    unless it passed), a bar per night scaled to the panel's largest figure (which labels
    the top line), and under each bar its night."""
    values = [metric.value(row) for row in nights]
    known = [value for value in values if value is not None]
    largest = max(known, default=0) or 1
    newest = values[-1] if values else None
    verdict = nights[-1].verdict if nights else "passed"
    base = top + PLOT_TOP + PLOT_HEIGHT
    slot = PANEL_WIDTH / SLOTS
    colour = "" if verdict == "passed" else f' fill="{COLOURS.get(verdict, OTHER)}"'
    newest_is = "" if verdict == "passed" else f"newest run {escape(verdict)} · "
    parts = [
        f'<text x="{left}" y="{top + 14}" font-size="14" font-weight="bold">{metric.title}</text>',
        f'<text x="{left + PANEL_WIDTH}" y="{top + 15}" font-size="16" font-weight="bold" '
        f'text-anchor="end"{colour}>{_figure(newest, metric.decimals)}</text>',
        f'<text x="{left + PANEL_WIDTH}" y="{top + PLOT_TOP - 4}" font-size="10" '
        f'text-anchor="end" opacity="0.6">{newest_is}max '
        f"{_figure(max(known, default=None), metric.decimals)}</text>",
        f'<line x1="{left}" y1="{base}" x2="{left + PANEL_WIDTH}" y2="{base}" '
        'stroke="currentColor" stroke-opacity="0.35"/>',
    ]
    first = SLOTS - len(nights)
    labels = [f'<g font-size="{LABEL_SIZE}" text-anchor="middle" opacity="0.7">']
    for offset, (row, value) in enumerate(zip(nights, values, strict=True)):
        x = left + (first + offset) * slot
        parts += _bar(row, value, metric, x, slot, base, largest)
        if row.run_id == held_run:
            parts.append(_held_mark(x + slot / 2, base + 9))
        labels.append(_night_label(row, x + slot / 2, base + 22))
    return [*parts, *labels, "</g>"]


def _bar(
    row: RunRow, value: float | None, metric: Metric, x: float, slot: float, base: float,
    largest: float,
) -> list[str]:  # fmt: skip
    """The night's bar, its colour its verdict, its tooltip the run and figure; a night
    without the figure (killed before writing it) is a grey dot on the base line."""
    tip = f"<title>{escape(row.run_id)}: {_figure(value, metric.decimals)} ({row.verdict})</title>"
    if value is None:
        return [
            f'<circle cx="{x + slot / 2:.1f}" cy="{base - 2}" r="2" fill="{OTHER}">{tip}</circle>'
        ]
    height = max(PLOT_HEIGHT * value / largest, 1.0)
    colour = COLOURS.get(row.verdict, OTHER)
    return [
        f'<rect x="{x + slot * 0.15:.1f}" y="{base - height:.1f}" width="{slot * 0.7:.1f}" '
        f'height="{height:.1f}" fill="{colour}">{tip}</rect>'
    ]


def _held_mark(x: float, y: float) -> str:
    return (
        f'<path d="M{x:.1f} {y - 5:.1f} l5 8 h-10 z" fill="{HELD}">'
        "<title>the run the database holds</title></path>"
    )


def _night_label(row: RunRow, x: float, y: float) -> str:
    """The night under its bar: the day it started, and under that the time (UTC), which
    tells apart two runs of one day; one text element, the time a tspan."""
    return (
        f'<text x="{x:.1f}" y="{y}">{row.started:%m-%d}<tspan x="{x:.1f}" '
        f'dy="{LABEL_SIZE + 1}">{row.started:%H:%M}</tspan></text>'
    )


def _legend(y: float) -> list[str]:
    items = [
        ("passed", COLOURS["passed"]),
        ("failed", COLOURS["failed"]),
        ("refused", COLOURS["refused"]),
        ("running, killed or superseded", OTHER),
    ]
    parts = []
    x = 0
    for label, colour in items:
        parts.append(f'<rect x="{x}" y="{y - 9}" width="10" height="10" fill="{colour}"/>')
        parts.append(f'<text x="{x + 14}" y="{y}" font-size="12">{label}</text>')
        x += 26 + 7 * len(label)
    parts.append(_held_mark(x + 5, y - 1))
    parts.append(f'<text x="{x + 14}" y="{y}" font-size="12">the run the database holds</text>')
    return parts


def _figure(value: float | None, decimals: int) -> str:
    if value is None:
        return "–"
    return f"{value:,.{decimals}f}"
