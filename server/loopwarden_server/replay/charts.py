"""Small SVG charts for the evaluation report, drawn by hand: a strip plot, a pair of histograms
and a pair of line panels.

Why not a plotting library: the report must open offline, stay one file, and be cheap to build
in CI; three chart shapes with integer axes are a few hundred lines of SVG, while a library would
be the daemon distribution's largest dependency. Every chart is an `<svg role="img">` with a
`<title>`, `data-chart` naming it, and a `<title>` on each mark (the browser shows it on hover),
so a test (or a screen reader) can find what is drawn.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

FONT = "system-ui, -apple-system, 'Segoe UI', 'DejaVu Sans', sans-serif"
AXIS_COLOR = "#4a5568"
GRID_COLOR = "#e2e8f0"
TEXT_COLOR = "#1a202c"
MUTED_COLOR = "#718096"


@dataclass(frozen=True, slots=True)
class Series:
    """One named set of marks; `values` are per row (strip plot) or per x (lines, histograms)."""

    name: str
    color: str
    values: Sequence
    dash: str = ""  # lines: an SVG stroke-dasharray, so a series drawn over another stays visible


@dataclass(frozen=True, slots=True)
class Marker:
    """A dashed vertical line across a chart at `x`, labelled (e.g. the configured W)."""

    x: float
    label: str
    color: str = MUTED_COLOR


class Scale:
    """Linear map from a data domain to pixels."""

    def __init__(self, low: float, high: float, start: float, end: float) -> None:
        self.low, self.high = low, (high if high > low else low + 1)
        self.start, self.end = start, end

    def __call__(self, value: float) -> float:
        return self.start + (value - self.low) / (self.high - self.low) * (self.end - self.start)


def nice_ticks(low: float, high: float, most: int = 8, integer: bool = True) -> list[float]:
    """Round tick values covering [low, high]: steps of 1, 2 or 5 times a power of ten."""
    span = max(high - low, 1e-9)
    raw = span / max(most - 1, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    if integer:
        step = max(1, round(step))
    first = math.ceil(low / step) * step
    ticks = []
    value = first
    while value <= high + 1e-9:
        ticks.append(round(value, 10))
        value += step
    return ticks


def _number(value: float) -> str:
    return f"{value:g}"


def _text(x: float, y: float, content: str, *, anchor: str = "start", size: int = 12, color: str = TEXT_COLOR,
          weight: str = "normal", extra: str = "") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}" fill="{color}" '
            f'font-weight="{weight}"{extra}>{escape(content)}</text>')


def _svg(name: str, title: str, width: int, height: int, body: list[str]) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" data-chart="{escape(name)}" '
            f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" font-family="{FONT}">'
            f"<title>{escape(title)}</title>" + "".join(body) + "</svg>")


def _x_axis(scale: Scale, ticks: Sequence[float], y: float, top: float, label: str, *, grid: bool = True) -> list[str]:
    parts = [f'<line x1="{scale.start:.1f}" y1="{y:.1f}" x2="{scale.end:.1f}" y2="{y:.1f}" stroke="{AXIS_COLOR}"/>']
    for tick in ticks:
        x = scale(tick)
        if grid:
            parts.append(f'<line x1="{x:.1f}" y1="{top:.1f}" x2="{x:.1f}" y2="{y:.1f}" stroke="{GRID_COLOR}"/>')
        parts.append(f'<line x1="{x:.1f}" y1="{y:.1f}" x2="{x:.1f}" y2="{y + 4:.1f}" stroke="{AXIS_COLOR}"/>')
        parts.append(_text(x, y + 16, _number(tick), anchor="middle", size=11, color=AXIS_COLOR))
    parts.append(_text((scale.start + scale.end) / 2, y + 34, label, anchor="middle", size=12, color=AXIS_COLOR))
    return parts


def _y_axis(scale: Scale, ticks: Sequence[float], x: float, right: float, label: str) -> list[str]:
    parts = [f'<line x1="{x:.1f}" y1="{scale.start:.1f}" x2="{x:.1f}" y2="{scale.end:.1f}" stroke="{AXIS_COLOR}"/>']
    for tick in ticks:
        y = scale(tick)
        parts.append(f'<line x1="{x:.1f}" y1="{y:.1f}" x2="{right:.1f}" y2="{y:.1f}" stroke="{GRID_COLOR}"/>')
        parts.append(_text(x - 6, y + 4, _number(tick), anchor="end", size=11, color=AXIS_COLOR))
    middle = (scale.start + scale.end) / 2
    parts.append(_text(x - 36, middle, label, anchor="middle", size=12, color=AXIS_COLOR,
                       extra=f' transform="rotate(-90 {x - 36:.1f} {middle:.1f})"'))
    return parts


def _legend(series: Sequence[Series], x: float, y: float, shapes: Sequence[str] | None = None) -> list[str]:
    parts = []
    for index, item in enumerate(series):
        shape = shapes[index] if shapes else "square"
        if shape == "circle":
            parts.append(f'<circle cx="{x + 5:.1f}" cy="{y - 4:.1f}" r="5" fill="{item.color}"/>')
        elif shape == "diamond":
            parts.append(_diamond(x + 5, y - 4, 6, item.color, ""))
        elif shape == "line":
            dash = f' stroke-dasharray="{item.dash}"' if item.dash else ""
            parts.append(f'<line x1="{x - 4:.1f}" y1="{y - 4:.1f}" x2="{x + 12:.1f}" y2="{y - 4:.1f}" '
                         f'stroke="{item.color}" stroke-width="2.5"{dash}/>')
        else:
            parts.append(f'<rect x="{x:.1f}" y="{y - 9:.1f}" width="10" height="10" fill="{item.color}"/>')
        parts.append(_text(x + 16, y, item.name, size=12))
        x += 24 + 7.2 * len(item.name)
    return parts


def _diamond(cx: float, cy: float, size: float, color: str, tooltip: str) -> str:
    """A diamond; with a tooltip it is a data mark (class "mark"), without one a legend swatch."""
    half = size / 2
    points = f"{cx:.1f},{cy - half:.1f} {cx + half:.1f},{cy:.1f} {cx:.1f},{cy + half:.1f} {cx - half:.1f},{cy:.1f}"
    if not tooltip:
        return f'<polygon points="{points}" fill="{color}"/>'
    return (f'<polygon points="{points}" fill="{color}" fill-opacity="0.8" class="mark">'
            f"<title>{escape(tooltip)}</title></polygon>")


def _markers(markers: Sequence[Marker], scale: Scale, top: float, bottom: float) -> list[str]:
    parts = []
    for marker in markers:
        if not scale.low <= marker.x <= scale.high:
            continue
        x = scale(marker.x)
        parts.append(f'<line x1="{x:.1f}" y1="{top:.1f}" x2="{x:.1f}" y2="{bottom:.1f}" stroke="{marker.color}" '
                     f'stroke-dasharray="5 4" stroke-width="1.5"/>')
        parts.append(_text(x + 4, top + 11, marker.label, size=11, color=marker.color))
    return parts


@dataclass(frozen=True, slots=True)
class StripRow:
    """One row of a strip plot: a label, a note under it, and per series the values with their tooltips."""

    label: str
    note: str
    points: Sequence[Sequence[tuple[float, str]]]  # per series: (value, tooltip)


def strip_plot(name: str, title: str, rows: Sequence[StripRow], series: Sequence[Series], x_label: str,
               *, width: int = 820) -> str:
    """Each row's values as dots along a shared x axis, one band per series, jittered so equal
    values stack into a visible column."""
    left, right, top, row_height = 250, width - 24, 40, 64
    bottom = top + row_height * max(len(rows), 1)
    height = bottom + 48
    values = [value for row in rows for points in row.points for value, _ in points]
    high = max(values, default=1)
    scale = Scale(0, high + 1, left, right)
    body = _legend(series, left, 20, ["circle", "diamond"])
    body += _x_axis(scale, nice_ticks(0, high + 1, 10), bottom, top, x_label)
    for index, row in enumerate(rows):
        y0 = top + index * row_height
        if index:
            body.append(f'<line x1="{left:.1f}" y1="{y0:.1f}" x2="{right:.1f}" y2="{y0:.1f}" stroke="{GRID_COLOR}"/>')
        notes = row.note.split("\n")
        first = y0 + row_height / 2 - 7 * len(notes) + 4
        body.append(_text(left - 12, first, row.label, anchor="end", size=13, weight="600"))
        for line, note in enumerate(notes, 1):
            body.append(_text(left - 12, first + 14 * line, note, anchor="end", size=11, color=MUTED_COLOR))
        for band, (item, points) in enumerate(zip(series, row.points)):
            centre = y0 + row_height * (0.32 + 0.36 * band)
            for count, (value, tooltip) in enumerate(points):
                jitter = ((count * 7) % 11 - 5) * 1.4
                x, y = scale(value), centre + jitter
                if band == 0:
                    body.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{item.color}" fill-opacity="0.65" '
                                f'class="mark"><title>{escape(tooltip)}</title></circle>')
                else:
                    body.append(_diamond(x, y, 8, item.color, tooltip))
    return _svg(name, title, width, height, body)


def histogram_pair(name: str, title: str, bins: Sequence[str], series: Sequence[Series], x_label: str,
                   markers: Sequence[Marker] = (), *, width: int = 820) -> str:
    """One histogram panel per series (own y scale, shared bins): runs per bin."""
    left, right, top, panel, gap = 70, width - 24, 36, 130, 26
    count = len(bins)
    scale = Scale(-0.5, count - 0.5, left, right)
    band = (right - left) / max(count, 1)
    body = _legend(series, left, 20)
    bottom = top
    for index, item in enumerate(series):
        panel_top = top + index * (panel + gap) + 10
        panel_bottom = panel_top + panel
        bottom = panel_bottom
        high = max(max(item.values, default=0), 1)
        y_scale = Scale(0, high, panel_bottom, panel_top)
        body += _y_axis(y_scale, nice_ticks(0, high, 5), left, right, "runs")
        body.append(_text(right, panel_top - 2, f"{item.name} ({sum(item.values)})", anchor="end", size=12,
                          color=item.color, weight="600"))
        for position, value in enumerate(item.values):
            if not value:
                continue
            x = scale(position) - band * 0.4
            y = y_scale(value)
            body.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{band * 0.8:.1f}" height="{panel_bottom - y:.1f}" '
                        f'fill="{item.color}" class="mark"><title>{escape(item.name)}: {value} run'
                        f'{"s" if value != 1 else ""} with {escape(bins[position])}</title></rect>')
            if band >= 14:
                body.append(_text(scale(position), y - 3, str(value), anchor="middle", size=10, color=AXIS_COLOR))
        body.append(f'<line x1="{left:.1f}" y1="{panel_bottom:.1f}" x2="{right:.1f}" y2="{panel_bottom:.1f}" '
                    f'stroke="{AXIS_COLOR}"/>')
    body += _markers(markers, scale, top + 6, bottom)
    step = max(1, math.ceil(count / 20))
    for position in range(0, count, step):
        x = scale(position)
        body.append(f'<line x1="{x:.1f}" y1="{bottom:.1f}" x2="{x:.1f}" y2="{bottom + 4:.1f}" stroke="{AXIS_COLOR}"/>')
        body.append(_text(x, bottom + 16, bins[position], anchor="middle", size=11, color=AXIS_COLOR))
    body.append(_text((left + right) / 2, bottom + 34, x_label, anchor="middle", size=12, color=AXIS_COLOR))
    return _svg(name, title, width, bottom + 46, body)


@dataclass(frozen=True, slots=True)
class LinePanel:
    """One panel of a line chart: its title, y label and upper bound, and the series drawn in it."""

    title: str
    y_label: str
    y_max: float
    series: Sequence[Series]


def line_panels(name: str, title: str, x_values: Sequence[float], panels: Sequence[LinePanel], x_label: str,
                markers: Sequence[Marker] = (), *, width: int = 820) -> str:
    """Panels side by side over one x axis; each series a line with a dot per x."""
    top, panel_height, gap, left_pad = 58, 210, 70, 62
    panel_width = (width - 24 - left_pad - gap * (len(panels) - 1)) / max(len(panels), 1)
    height = top + panel_height + 50
    body: list[str] = []
    low, high = min(x_values, default=0), max(x_values, default=1)
    for index, panel in enumerate(panels):
        left = left_pad + index * (panel_width + gap)
        right = left + panel_width
        scale = Scale(low, high, left, right)
        y_scale = Scale(0, max(panel.y_max, 1), top + panel_height, top)
        body.append(_text(left, 18, panel.title, size=13, weight="600"))
        body += _legend(panel.series, left, 38, ["line"] * len(panel.series))
        body += _y_axis(y_scale, nice_ticks(0, max(panel.y_max, 1), 6), left, right, panel.y_label)
        body += _x_axis(scale, nice_ticks(low, high, 10), top + panel_height, top, x_label, grid=False)
        body += _markers(markers, scale, top, top + panel_height)
        for item in panel.series:
            points = [(scale(x), y_scale(y)) for x, y in zip(x_values, item.values) if y is not None]
            if not points:
                continue
            path = " ".join(f"{'M' if i == 0 else 'L'}{x:.1f},{y:.1f}" for i, (x, y) in enumerate(points))
            dash = f' stroke-dasharray="{item.dash}"' if item.dash else ""
            body.append(f'<path d="{path}" fill="none" stroke="{item.color}" stroke-width="2.5"{dash}/>')
            for (x, y), x_value, value in zip(points, x_values, item.values):
                body.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{item.color}" class="mark">'
                            f"<title>{escape(item.name)} at {escape(x_label)} = {_number(x_value)}: "
                            f"{_number(value)}</title></circle>")
    return _svg(name, title, width, height, body)
