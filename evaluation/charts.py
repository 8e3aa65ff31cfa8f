"""Server-side SVG pictures: leaderboard bars with intervals, judge-vs-human scatter, correlation
heatmap. Plain Python, no Django; every function returns a standalone SVG document (downloadable)."""
from __future__ import annotations

from typing import Any, Sequence
from xml.sax.saxutils import escape

FONT = 'font-family="system-ui, sans-serif" font-size="12"'


def _svg(width: int, height: int, body: list[str], title: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">'
        f"<title>{escape(title)}</title>"
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>' + "".join(body) + "</svg>\n"
    )


def leaderboard_bars(board: dict[str, Any], key: str, *, scale_max: float | None = None, label: str | None = None) -> str:
    """Horizontal bars of one metric per row with the 95 % interval as a whisker; missing values say so."""
    rows = board["rows"]
    places = 3 if board["protocol"] == "oscbench" else 2
    top = scale_max if scale_max is not None else (1.0 if board["protocol"] == "oscbench" else 100.0)
    label_w, bar_w, row_h, pad = 180, 420, 26, 30
    width, height = label_w + bar_w + 90, pad * 2 + row_h * max(len(rows), 1)
    x = lambda v: label_w + bar_w * max(0.0, min(1.0, v / top))  # noqa: E731
    body = [f'<text x="{label_w}" y="18" {FONT} font-weight="bold">{escape(label or key)} ({escape(board["project"])})</text>']
    for i, row in enumerate(rows):
        y = pad + i * row_h
        value = row["metrics"].get(key)
        ci = row["ci"].get(key)
        if value is None and key in row.get("breakdowns", {}):
            value, ci = row["breakdowns"][key]["value"], row["breakdowns"][key]["ci"]
        body.append(f'<text x="{label_w - 8}" y="{y + 16}" text-anchor="end" {FONT}>{escape(str(row["model"]))}</text>')
        if value is None:
            body.append(f'<text x="{label_w + 4}" y="{y + 16}" {FONT} fill="#888">n/a</text>')
            continue
        body.append(f'<rect class="bar" x="{label_w}" y="{y + 4}" width="{x(value) - label_w:.1f}" height="{row_h - 10}" fill="#4a78b5"/>')
        if ci:
            lo, hi = x(ci[0]), x(ci[1])
            mid = y + row_h / 2 - 1
            body.append(f'<line class="ci" x1="{lo:.1f}" x2="{hi:.1f}" y1="{mid}" y2="{mid}" stroke="#222" stroke-width="1.5"/>')
            body += [f'<line x1="{p:.1f}" x2="{p:.1f}" y1="{mid - 5}" y2="{mid + 5}" stroke="#222"/>' for p in (lo, hi)]
        body.append(f'<text x="{x(value) + 6:.1f}" y="{y + 16}" {FONT}>{value:.{places}f}</text>')
    axis_y = pad + row_h * len(rows)
    body.append(f'<line x1="{label_w}" x2="{label_w + bar_w}" y1="{axis_y}" y2="{axis_y}" stroke="#999"/>')
    for t in range(5):
        v = top * t / 4
        body.append(f'<text x="{x(v):.1f}" y="{axis_y + 14}" text-anchor="middle" {FONT} fill="#555">{v:g}</text>')
    return _svg(width, height + 10, body, f"Leaderboard: {label or key}")


def scatter(judge: Sequence[float | None], human: Sequence[float | None], *, criterion: str, judge_name: str) -> str:
    """Judge score (x, 1-5) against the human mean (y, 1-5), one dot per item with both values."""
    size, pad = 360, 44
    pts = [(j, h) for j, h in zip(judge, human) if j is not None and h is not None]
    sx = lambda v: pad + (v - 1) / 4 * (size - 2 * pad)  # noqa: E731
    sy = lambda v: size - pad - (v - 1) / 4 * (size - 2 * pad)  # noqa: E731
    body = [f'<text x="{pad}" y="20" {FONT} font-weight="bold">{escape(criterion)}: {escape(judge_name)} vs humans (n={len(pts)})</text>']
    for t in range(1, 6):
        body.append(f'<line x1="{sx(t):.1f}" x2="{sx(t):.1f}" y1="{pad}" y2="{size - pad}" stroke="#eee"/>')
        body.append(f'<line x1="{pad}" x2="{size - pad}" y1="{sy(t):.1f}" y2="{sy(t):.1f}" stroke="#eee"/>')
        body.append(f'<text x="{sx(t):.1f}" y="{size - pad + 14}" text-anchor="middle" {FONT}>{t}</text>')
        body.append(f'<text x="{pad - 8}" y="{sy(t) + 4:.1f}" text-anchor="end" {FONT}>{t}</text>')
    body.append(f'<text x="{size / 2}" y="{size - 8}" text-anchor="middle" {FONT}>judge score</text>')
    body.append(f'<text x="12" y="{size / 2}" {FONT} transform="rotate(-90 12 {size / 2})" text-anchor="middle">human mean</text>')
    body += [f'<circle class="point" cx="{sx(j):.1f}" cy="{sy(h):.1f}" r="3.5" fill="#c0504d" fill-opacity="0.6"/>' for j, h in pts]
    if not pts:
        body.append(f'<text x="{size / 2}" y="{size / 2}" text-anchor="middle" {FONT} fill="#888">no item has both scores</text>')
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
        body.append(f'<text x="{cx}" y="{top - 8}" {FONT} text-anchor="start" transform="rotate(-35 {cx} {top - 8})">{escape(c)}</text>')
    for i, j in enumerate(judges):
        y = top + i * cell_h
        body.append(f'<text x="{left - 8}" y="{y + 19}" text-anchor="end" {FONT}>{escape(j["judge"])}</text>')
        for k, c in enumerate(criteria):
            v = j["per_criterion"][c].get(stat)
            x = left + k * cell_w
            body.append(f'<rect class="cell" x="{x}" y="{y}" width="{cell_w - 2}" height="{cell_h - 2}" fill="{_color(v)}"/>')
            label = "n/a" if v is None else f"{v:.2f}"
            body.append(f'<text x="{x + cell_w / 2 - 1}" y="{y + 19}" text-anchor="middle" {FONT}>{label}</text>')
    if not judges:
        body.append(f'<text x="{left}" y="{top + 19}" {FONT} fill="#888">no judge has finished on this release</text>')
    return _svg(width, height, body, "Judge-human agreement heatmap")
