"""Server-side SVG pictures: leaderboard bars with intervals, judge-vs-human scatter, correlation
heatmap. Plain Python, no Django; every function returns a standalone SVG document (downloadable)."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import ROUND_CEILING, Decimal
from typing import Any
from xml.sax.saxutils import escape

from .scoring import answer_sets
from .tables import places_for, row_value

FONT = 'font-family="system-ui, sans-serif" font-size="12"'


def _svg(width: int, height: int, body: list[str], title: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img">'
        f"<title>{escape(title)}</title>"
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>' + "".join(body) + "</svg>\n"
    )


MAX_TICKS = 6  # intervals on a value axis at most


def value_axis(highest: float | None, full: Decimal) -> tuple[Decimal, Decimal]:
    """(end, step) of a bar chart's value axis, which starts at 0: the first round step (1, 2 or 5
    times a power of ten) that reaches ``highest`` in at most MAX_TICKS steps, and the end the
    smallest multiple of it at or above ``highest``. ``full`` (100 %, or 1 for 0-1 scores) when
    there is nothing above 0 to fit or the fitted end would pass it."""
    if highest is None or highest <= 0:
        return full, full / 4
    target = Decimal(repr(float(highest)))
    exponent = target.adjusted() - 1
    while True:
        for mantissa in (1, 2, 5):
            step = Decimal(mantissa).scaleb(exponent)
            count = (target / step).to_integral_value(rounding=ROUND_CEILING)
            if count <= MAX_TICKS:
                end = count * step
                return (full, full / 4) if end >= full else (end, step)
        exponent += 1


def _tick(value: Decimal) -> str:
    return format(value.normalize(), "f")


def leaderboard_bars(
    board: dict[str, Any], key: str, *, scale_max: float | None = None, label: str | None = None
) -> str:
    """Horizontal bars of one metric per row with the 95 % interval as a whisker; missing values say so.
    Bars follow the board's row order (the leaderboard's, ranking.py), whichever metric they draw.

    The value axis starts at 0 and ends at a round number at or above the largest value and interval
    end (``value_axis``), so a board whose best model has 31 % draws bars on 0-40, not on 0-100;
    the tick labels print the values and a note under the axis says where the full scale ends.
    ``scale_max`` fixes the end instead."""
    rows = board["rows"]
    percent = answer_sets.is_percent(board["protocol"])  # else 0-1 scores (video rating)
    places = places_for(board["protocol"])
    full = Decimal(100) if percent else Decimal(1)
    cells = [row_value(row, key) for row in rows]
    highest = max((v for value, ci in cells for v in (value, *(ci or ())) if v is not None), default=None)
    if not percent and highest is not None and highest > full:  # an open scale (ratings): no full end
        full = Decimal("Infinity")
    if scale_max is not None:
        end = Decimal(repr(float(scale_max)))
        step = end / 4
    else:
        end, step = value_axis(highest, full)
    top = float(end)
    label_w, bar_w, row_h, pad = 180, 420, 26, 30
    width, height = label_w + bar_w + 90, pad * 2 + row_h * max(len(rows), 1)
    x = lambda v: label_w + bar_w * max(0.0, min(1.0, v / top))  # noqa: E731
    axis_y = pad + row_h * len(rows)
    ticks = [step * t for t in range(int(end / step) + 1)]
    body = [
        (
            f'<text x="{label_w}" y="18" {FONT} font-weight="bold">'
            f"{escape(label or key)} ({escape(board['project'])})</text>"
        )
    ]
    # Grid lines at the ticks first, so the bars are drawn over them.
    body += [
        f'<line x1="{x(float(v)):.1f}" x2="{x(float(v)):.1f}" y1="{pad}" y2="{axis_y + 3}" stroke="#e6e6e6"/>'
        for v in ticks
    ]
    for i, (row, (value, ci)) in enumerate(zip(rows, cells)):
        y = pad + i * row_h
        body.append(
            f'<text class="label" x="{label_w - 8}" y="{y + 16}" text-anchor="end" {FONT}>'
            f"{escape(str(row['model']))}</text>"
        )
        if value is None:
            body.append(f'<text x="{label_w + 4}" y="{y + 16}" {FONT} fill="#888">n/a</text>')
            continue
        body.append(
            f'<rect class="bar" x="{label_w}" y="{y + 4}" width="{x(value) - label_w:.1f}" '
            f'height="{row_h - 10}" fill="#4a78b5"/>'
        )
        if ci:
            lo, hi = x(ci[0]), x(ci[1])
            mid = y + row_h / 2 - 1
            body.append(
                f'<line class="ci" x1="{lo:.1f}" x2="{hi:.1f}" y1="{mid}" y2="{mid}" stroke="#222" stroke-width="1.5"/>'
            )
            body += [f'<line x1="{p:.1f}" x2="{p:.1f}" y1="{mid - 5}" y2="{mid + 5}" stroke="#222"/>' for p in (lo, hi)]
        # The number goes after the whisker, where there is one, so the two never overlap.
        end_x = max(x(value), x(ci[1])) if ci else x(value)
        body.append(f'<text class="value" x="{end_x + 6:.1f}" y="{y + 16}" {FONT}>{value:.{places}f}</text>')
    body.append(f'<line class="axis" x1="{label_w}" x2="{label_w + bar_w}" y1="{axis_y}" y2="{axis_y}" stroke="#999"/>')
    for v in ticks:
        body.append(
            f'<text class="tick" x="{x(float(v)):.1f}" y="{axis_y + 14}" text-anchor="middle" {FONT} fill="#555">'
            f"{_tick(v)}</text>"
        )
    unit = " %" if percent else ""
    note = f"axis 0–{_tick(end)}{unit}" + (
        "" if end == full or not full.is_finite() else f", fitted to the values (full scale 0–{_tick(full)}{unit})"
    )
    body.append(f'<text class="axis-note" x="{label_w}" y="{axis_y + 30}" {FONT} fill="#555">{escape(note)}</text>')
    return _svg(width, height + 26, body, f"Leaderboard: {label or key}")


def scatter(judge: Sequence[float | None], human: Sequence[float | None], *, criterion: str, judge_name: str) -> str:
    """Judge score (x, 1-5) against the human mean (y, 1-5), one dot per item with both values."""
    size, pad = 360, 44
    pts = [(j, h) for j, h in zip(judge, human) if j is not None and h is not None]
    sx = lambda v: pad + (v - 1) / 4 * (size - 2 * pad)  # noqa: E731
    sy = lambda v: size - pad - (v - 1) / 4 * (size - 2 * pad)  # noqa: E731
    # Two title lines: a long judge name on one line with the criterion would run off the panel.
    body = [
        f'<text class="title" x="{pad}" y="16" {FONT} font-weight="bold">{escape(criterion)}</text>',
        f'<text class="subtitle" x="{pad}" y="32" {FONT}>{escape(judge_name)} vs humans (n={len(pts)})</text>',
    ]
    for t in range(1, 6):
        body.append(f'<line x1="{sx(t):.1f}" x2="{sx(t):.1f}" y1="{pad}" y2="{size - pad}" stroke="#eee"/>')
        body.append(f'<line x1="{pad}" x2="{size - pad}" y1="{sy(t):.1f}" y2="{sy(t):.1f}" stroke="#eee"/>')
        body.append(f'<text x="{sx(t):.1f}" y="{size - pad + 14}" text-anchor="middle" {FONT}>{t}</text>')
        body.append(f'<text x="{pad - 8}" y="{sy(t) + 4:.1f}" text-anchor="end" {FONT}>{t}</text>')
    body.append(f'<text x="{size / 2}" y="{size - 8}" text-anchor="middle" {FONT}>judge score</text>')
    body.append(
        f'<text x="12" y="{size / 2}" {FONT} transform="rotate(-90 12 {size / 2})" '
        'text-anchor="middle">human mean</text>'
    )
    body += [
        f'<circle class="point" cx="{sx(j):.1f}" cy="{sy(h):.1f}" r="3.5" fill="#c0504d" fill-opacity="0.6"/>'
        for j, h in pts
    ]
    if not pts:
        body.append(
            f'<text x="{size / 2}" y="{size / 2}" text-anchor="middle" {FONT} fill="#888">'
            "no item has both scores</text>"
        )
    return _svg(size, size, body, f"{criterion}: judge vs human")


def _color(v: float | None) -> str:
    if v is None:
        return "#dddddd"
    v = max(-1.0, min(1.0, v))
    if v >= 0:
        r, g, b = int(255 - 180 * v), int(255 - 110 * v), 255
    else:
        r, g, b = 255, int(255 + 150 * v), int(255 + 150 * v)
    return f"#{r:02x}{g:02x}{b:02x}"


def heatmap(report: dict[str, Any], *, stat: str = "kendall_tau_b") -> str:
    """Judges x criteria, cell = the statistic (grey and "n/a" where undefined)."""
    criteria = report["criteria"]
    judges = report["judges"]
    cell_w, cell_h, left, top = 88, 30, 170, 90
    width, height = left + cell_w * len(criteria) + 20, top + cell_h * max(len(judges), 1) + 20
    body = [f'<text x="10" y="20" {FONT} font-weight="bold">{escape(stat)} judge vs human mean</text>']
    for k, c in enumerate(criteria):
        cx = left + k * cell_w + cell_w / 2
        body.append(
            f'<text x="{cx}" y="{top - 8}" {FONT} text-anchor="start" '
            f'transform="rotate(-35 {cx} {top - 8})">{escape(c)}</text>'
        )
    for i, j in enumerate(judges):
        y = top + i * cell_h
        body.append(f'<text x="{left - 8}" y="{y + 19}" text-anchor="end" {FONT}>{escape(j["judge"])}</text>')
        for k, c in enumerate(criteria):
            v = j["per_criterion"][c].get(stat)
            x = left + k * cell_w
            body.append(
                f'<rect class="cell" x="{x}" y="{y}" width="{cell_w - 2}" height="{cell_h - 2}" fill="{_color(v)}"/>'
            )
            label = "n/a" if v is None else f"{v:.2f}"
            body.append(f'<text x="{x + cell_w / 2 - 1}" y="{y + 19}" text-anchor="middle" {FONT}>{label}</text>')
    if not judges:
        body.append(f'<text x="{left}" y="{top + 19}" {FONT} fill="#888">no judge has finished on this release</text>')
    return _svg(width, height, body, "Judge-human agreement heatmap")
