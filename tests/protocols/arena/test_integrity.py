"""Arena integrity (protocols/arena/integrity.py): the per-rater consistency screen, gold pairs."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from scipy import stats

from protocols.arena import integrity
from protocols.kit.paired import holm


def _item(key: str, a: str, b: str, **extra):
    return SimpleNamespace(key=key, payload={"prompt": key, "model_a": a, "model_b": b, **extra})


def _board():
    """20 items: "strong" against "weak", the strong model shown as a on even items and b on odd
    ones. Five honest raters vote for the strong side except on items 0 and 1 (2 misses in 20); a
    contrarian votes for the weak side on 16 of 20 items and ties the rest."""
    items = [_item(f"i{n}", *(("strong", "weak") if n % 2 == 0 else ("weak", "strong"))) for n in range(20)]
    votes: dict[str, list] = {item.key: [] for item in items}
    for n, item in enumerate(items):
        strong_side = "a" if n % 2 == 0 else "b"
        weak_side = "b" if n % 2 == 0 else "a"
        for r in range(5):
            votes[item.key].append((f"honest-{r}", {"winner": weak_side if n < 2 else strong_side}))
        votes[item.key].append(("contrarian", {"winner": weak_side if n < 16 else "tie"}))
    return items, votes


def test_the_contrarian_is_flagged_and_the_honest_raters_are_not():
    items, votes = _board()
    result = {row.rater: row for row in integrity.screen(items, votes)}
    # The contrarian's 4 ties are not decisive: 16 screened votes, all misses.
    contrarian = result["contrarian"]
    assert (contrarian.votes, contrarian.misses, contrarian.gold_votes) == (16, 16, 0)
    assert contrarian.others_rate == pytest.approx(10 / 100)
    honest = result["honest-0"]
    assert (honest.votes, honest.misses) == (20, 2)
    assert honest.others_rate == pytest.approx((8 + 16) / 96)
    # p values: one-sided exact binomial tests, independently recomputed, then Holm over the six.
    expected_p = {
        "contrarian": stats.binomtest(16, 16, 0.1, alternative="greater").pvalue,
        **{f"honest-{r}": stats.binomtest(2, 20, 24 / 96, alternative="greater").pvalue for r in range(5)},
    }
    raters = list(expected_p)
    adjusted = dict(zip(raters, holm([expected_p[r] for r in raters]), strict=True))
    for rater in raters:
        assert result[rater].p == pytest.approx(expected_p[rater], rel=1e-9)
        assert result[rater].p_holm == pytest.approx(adjusted[rater], rel=1e-9)
    assert [row.rater for row in integrity.screen(items, votes) if row.flagged] == ["contrarian"]
    assert integrity.screen(items, votes)[0].to_json() == {
        "rater": "contrarian",
        "votes": 16,
        "misses": 16,
        "gold_votes": 0,
        "gold_misses": 0,
        "miss_rate": 1.0,
        "others_rate": 0.1,
        "p": float(f"{adjusted['contrarian'] / 6:.4g}"),
        "p_holm": float(f"{adjusted['contrarian']:.4g}"),
        "flagged": True,
    }


def test_gold_pairs_set_the_expected_side_and_a_tie_on_them_is_a_miss():
    items, votes = _board()
    # A gold pair whose known better side is the weak model's output (b): the fit would say a.
    items.append(_item("gold-1", "strong", "weak", gold_winner="b"))
    votes["gold-1"] = [("honest-0", {"winner": "b"}), ("honest-1", {"winner": "tie"}), ("contrarian", {"winner": "a"})]
    result = {row.rater: row for row in integrity.screen(items, votes)}
    assert (result["honest-0"].votes, result["honest-0"].misses) == (21, 2)
    assert (result["honest-0"].gold_votes, result["honest-0"].gold_misses) == (1, 0)
    assert (result["honest-1"].votes, result["honest-1"].misses) == (21, 3)
    assert (result["honest-1"].gold_votes, result["honest-1"].gold_misses) == (1, 1)
    assert (result["contrarian"].votes, result["contrarian"].misses) == (17, 17)
    assert (result["contrarian"].gold_votes, result["contrarian"].gold_misses) == (1, 1)


def test_without_a_finite_fit_only_gold_pairs_are_screened():
    # "strong" never lost or tied, and the gold pair's models never met the others: no finite
    # rating, so only the gold item has an expected side.
    items = [_item("i0", "strong", "weak"), _item("gold", "gold-x", "gold-y", gold_winner="a")]
    votes = {"i0": [("r1", {"winner": "a"})], "gold": [("r1", {"winner": "a"}), ("r2", {"winner": "tie"})]}
    result = {row.rater: row for row in integrity.screen(items, votes, min_votes=1)}
    assert (result["r1"].votes, result["r1"].misses, result["r1"].gold_votes) == (1, 0, 1)
    assert (result["r2"].votes, result["r2"].misses, result["r2"].gold_misses) == (1, 1, 1)


def test_raters_below_min_votes_are_listed_but_not_tested():
    items, votes = _board()
    result = {row.rater: row for row in integrity.screen(items, votes, min_votes=17)}
    assert result["contrarian"].p is None and result["contrarian"].flagged is False
    assert result["honest-0"].p is not None


def test_a_bad_gold_winner_and_level_are_refused():
    items, votes = _board()
    items.append(_item("gold-x", "strong", "weak", gold_winner="left"))
    with pytest.raises(ValueError, match="item 'gold-x': gold_winner is 'left'; expected one of a, b"):
        integrity.screen(items, votes)
    with pytest.raises(ValueError, match="level must be between 0 and 1; got 1.5"):
        integrity.screen(items[:-1], votes, level=1.5)
