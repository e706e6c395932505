"""Time-series line charts as inline SVG, drawn on the server: no chart library to ship."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from moldau.console.render import compact

# Distinguishable on white and for the common colour-vision deficiencies (Okabe-Ito-like).
PALETTE = (
    "#2563eb",
    "#e69f00",
    "#009e73",
    "#d55e00",
    "#cc79a7",
    "#56b4e9",
    "#7c3aed",
    "#b45309",
    "#0f766e",
    "#64748b",
)
_H = 220
WIDTHS = (300, 1600)  # the range of drawing widths a page may ask for
_LEFT, _RIGHT, _TOP, _BOTTOM = 48, 12, 12, 26

Points = Sequence[tuple[float, float]]


@dataclass(frozen=True)
class LegendEntry:
    name: str
    color: str
    last: float


@dataclass(frozen=True)
class Chart:
    svg: Markup
    legend: tuple[LegendEntry, ...]
    empty: bool


def nice_ceiling(value: float) -> float:
    """The smallest 1, 2, 2.5 or 5 x 10^k at or above `value` (an axis top)."""
    if value <= 0:
        return 1.0
    exponent = math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        candidate = step * 10**exponent
        if candidate >= value * (1 - 1e-9):
            return float(candidate)
    raise AssertionError("unreachable")


def line_chart(series: Mapping[str, Points], *, unit: str = "", width: int = 600) -> Chart:
    """One line per series over a shared time axis; the y axis starts at zero.

    `width` is the drawing's width in user units: pages ask for about their box's pixel
    width, so labels keep their size however wide the chart is shown."""
    w = min(max(width, WIDTHS[0]), WIDTHS[1])
    drawn = {name: sorted(points) for name, points in series.items() if points}
    if not drawn or all(len(p) < 2 for p in drawn.values()):
        return Chart(_empty_svg(w), (), True)
    times = [t for points in drawn.values() for t, _ in points]
    t0, t1 = min(times), max(times)
    span = max(t1 - t0, 1e-9)
    top = nice_ceiling(max(v for points in drawn.values() for _, v in points))
    # Round gridlines: 2 -> 0.5 steps, 1 / 2.5 / 5 -> fifths.
    ticks = 4 if top / 10 ** math.floor(math.log10(top)) == 2 else 5
    plot_w, plot_h = w - _LEFT - _RIGHT, _H - _TOP - _BOTTOM

    def x(t: float) -> float:
        return _LEFT + (t - t0) / span * plot_w

    def y(v: float) -> float:
        return _TOP + plot_h - v / top * plot_h

    parts = [
        f'<svg class="chart" viewBox="0 0 {w} {_H}" role="img" xmlns="http://www.w3.org/2000/svg">'
    ]
    for i in range(ticks + 1):
        value = top * i / ticks
        ty = y(value)
        parts.append(
            f'<line class="gridline" x1="{_LEFT}" x2="{w - _RIGHT}" y1="{ty:.1f}" y2="{ty:.1f}"/>'
            f'<text class="axis" x="{_LEFT - 6}" y="{ty + 4:.1f}" text-anchor="end">'
            f"{escape(compact(value))}</text>"
        )
    for i in range(5):
        t = t0 + span * i / 4
        anchor = "start" if i == 0 else "end" if i == 4 else "middle"
        label = time.strftime("%H:%M:%S", time.gmtime(t))
        parts.append(
            f'<text class="axis" x="{x(t):.1f}" y="{_H - 6}" text-anchor="{anchor}">{label}</text>'
        )
    if unit:
        parts.append(
            f'<text class="axis unit" x="{_LEFT + 4}" y="{_TOP + 10}">{escape(unit)}</text>'
        )
    legend = []
    for i, (name, points) in enumerate(sorted(drawn.items())):
        color = PALETTE[i % len(PALETTE)]
        path = " ".join(
            f"{'M' if j == 0 else 'L'}{x(t):.1f},{y(v):.1f}" for j, (t, v) in enumerate(points)
        )
        last_t, last_v = points[-1]
        peak = max(v for _, v in points)
        parts.append(
            f'<g class="series" data-series="{escape(name)}" data-last="{last_v:g}" '
            f'data-max="{peak:g}">'
            f"<title>{escape(name)}: {escape(compact(last_v))} {escape(unit)}</title>"
            f'<path d="{path}" stroke="{color}"/>'
            f'<circle cx="{x(last_t):.1f}" cy="{y(last_v):.1f}" r="3" fill="{color}"/></g>'
        )
        legend.append(LegendEntry(name, color, last_v))
    parts.append("</svg>")
    return Chart(Markup("".join(parts)), tuple(legend), False)


def _empty_svg(w: int) -> Markup:
    return Markup(
        f'<svg class="chart" viewBox="0 0 {w} {_H}" role="img" xmlns="http://www.w3.org/2000/svg">'
        f'<rect class="empty" x="{_LEFT}" y="{_TOP}" width="{w - _LEFT - _RIGHT}" '
        f'height="{_H - _TOP - _BOTTOM}" rx="6"/>'
        f'<text class="axis" x="{w / 2}" y="{_H / 2}" text-anchor="middle">'
        "Collecting samples…</text></svg>"
    )
