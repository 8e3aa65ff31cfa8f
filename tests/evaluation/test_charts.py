"""Leaderboard bar charts: the value axis starts at 0 and ends at a round number at or above the largest
value and interval end, the tick labels print the values, and a note says where the full scale ends."""

import re
from decimal import Decimal

import pytest

from evaluation import charts

BAR_W, LABEL_W = 420, 180  # charts.leaderboard_bars' geometry


def board(protocol, key, rows):
    return {
        "project": "p",
        "release": None,
        "protocol": protocol,
        "rows": [{"model": m, "n": 10, "parse_failures": 0, "metrics": {key: v}, "ci": {key: ci}} for m, v, ci in rows],
    }


def ticks(svg):
    return re.findall(r'<text class="tick"[^>]*>([^<]*)</text>', svg)


def bar_widths(svg):
    return [float(w) for w in re.findall(r'<rect class="bar" x="180" y="[^"]*" width="([^"]*)"', svg)]


def note(svg):
    return re.search(r'<text class="axis-note"[^>]*>([^<]*)</text>', svg).group(1)


def test_a_board_whose_best_model_has_31_percent_draws_on_0_to_40():
    svg = charts.leaderboard_bars(
        board(
            "status",
            "roa",
            [
                ("best", 31.0, [26.5, 35.5]),
                ("second", 12.25, [8.0, 16.5]),
                ("none", None, None),
                ("zero", 0.0, [0.0, 0.0]),
            ],
        ),
        "roa",
    )
    assert ticks(svg) == ["0", "10", "20", "30", "40"]
    assert note(svg) == "axis 0–40 %, fitted to the values (full scale 0–100 %)"
    # Bars start at 0 and are drawn to the fitted scale: 31 of 40 is 77.5 % of the bar area.
    assert bar_widths(svg) == [325.5, 128.6, 0.0]
    lo_hi = re.findall(r'<line class="ci" x1="([^"]*)" x2="([^"]*)"', svg)[0]
    assert [float(v) for v in lo_hi] == [
        pytest.approx(LABEL_W + BAR_W * 26.5 / 40, abs=0.051),
        pytest.approx(LABEL_W + BAR_W * 35.5 / 40, abs=0.051),
    ]
    assert re.findall(r'<text class="value"[^>]*>([^<]*)</text>', svg) == ["31.00", "12.25", "0.00"]


def test_an_interval_end_above_the_next_round_number_widens_the_axis():
    svg = charts.leaderboard_bars(
        board("status", "roa", [("best", 31.0, [22.0, 41.2]), ("other", 5.0, [1.0, 9.0])]), "roa"
    )
    assert ticks(svg) == ["0", "10", "20", "30", "40", "50"]
    assert bar_widths(svg) == [pytest.approx(BAR_W * 31 / 50, abs=0.051), pytest.approx(BAR_W * 5 / 50, abs=0.051)]


@pytest.mark.parametrize(
    "highest, full, end, step",
    [
        (31, 100, "40", "10"),
        (40, 100, "40", "10"),
        (41, 100, "50", "10"),
        (60.5, 100, "80", "20"),
        (5.45, 100, "6", "1"),
        (0.7, 100, "0.8", "0.2"),
        (0.6, 100, "0.6", "0.1"),
        (81, 100, "100", "25"),
        (100, 100, "100", "25"),
        (0, 100, "100", "25"),
        (None, 100, "100", "25"),
        (0.62, 1, "0.8", "0.2"),
        (0.875, 1, "1", "0.25"),
        (0.31, 1, "0.4", "0.1"),
    ],
)
def test_value_axis_picks_a_round_end_at_or_above_the_highest_value(highest, full, end, step):
    got_end, got_step = charts.value_axis(highest, Decimal(full))
    assert (got_end, got_step) == (Decimal(end), Decimal(step))
    assert highest is None or got_end >= Decimal(str(highest))
    assert got_end / got_step <= charts.MAX_TICKS and got_end % got_step == 0


def test_a_board_near_the_top_or_at_zero_keeps_the_full_scale():
    svg = charts.leaderboard_bars(board("status", "oa", [("a", 93.0, [88.0, 97.5])]), "oa")
    assert ticks(svg) == ["0", "25", "50", "75", "100"] and note(svg) == "axis 0–100 %"
    svg = charts.leaderboard_bars(board("status", "roa", [("a", 0.0, [0.0, 0.0]), ("b", None, None)]), "roa")
    assert ticks(svg) == ["0", "25", "50", "75", "100"]


def test_oscbench_scores_fit_their_0_to_1_scale():
    svg = charts.leaderboard_bars(
        board("oscbench", "state_change", [("genA", 0.55, [0.5, 0.62]), ("genB", 0.3, [0.2, 0.4])]), "state_change"
    )
    assert ticks(svg) == ["0", "0.2", "0.4", "0.6", "0.8"]
    assert note(svg) == "axis 0–0.8, fitted to the values (full scale 0–1)"
    assert bar_widths(svg) == [
        pytest.approx(BAR_W * 0.55 / 0.8, abs=0.051),
        pytest.approx(BAR_W * 0.3 / 0.8, abs=0.051),
    ]


def test_a_fixed_scale_still_wins():
    svg = charts.leaderboard_bars(board("status", "roa", [("a", 31.0, [26.5, 35.5])]), "roa", scale_max=100)
    assert ticks(svg) == ["0", "25", "50", "75", "100"] and bar_widths(svg) == [BAR_W * 0.31]
