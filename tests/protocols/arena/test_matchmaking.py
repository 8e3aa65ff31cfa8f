"""Arena matchmaking (protocols/arena/matchmaking.py): pair weights, the item order, item priorities."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from protocols.arena import matchmaking
from protocols.kit import pairwise
from protocols.kit.pairwise.intervals import centring

MODELS = ("m-a", "m-b", "m-c", "m-d")
PAIRS = [(a, b) for n, a in enumerate(MODELS) for b in MODELS[n + 1 :]]


def votes_stream(seed: int, n: int, models=MODELS[:3]):
    """Seeded votes among ``models``: sides at random, every outcome present."""
    rng = np.random.default_rng(seed)
    a, b, outcome = [], [], []
    for _ in range(n):
        i, j = rng.choice(len(models), 2, replace=False)
        a.append(models[i])
        b.append(models[j])
        outcome.append(str(rng.choice(["a", "b", "tie", "both_bad"], p=[0.45, 0.3, 0.15, 0.1])))
    return a, b, outcome


def test_pair_key_is_in_name_order_and_refuses_one_model():
    assert matchmaking.pair_key("z", "a") == ("a", "z")
    assert matchmaking.pair_key("a", "z") == ("a", "z")
    with pytest.raises(ValueError, match="two different models; got 'x' twice"):
        matchmaking.pair_key("x", "x")


def test_pair_rule_is_eq9_on_a_closed_two_model_case():
    # Given two models: Davidson has three outcomes and two parameters there, so the fit's
    # probabilities are the observed shares with the pseudo-votes (1/3 each) added.
    # "m-b" shown as a and winning is a win of m-b: 2 for m-a, 6 for m-b, 1 tie, 1 both bad.
    a = ["m-b"] * 6 + ["m-a"] * 2 + ["m-a", "m-b"]
    b = ["m-a"] * 6 + ["m-b"] * 2 + ["m-b", "m-a"]
    outcome = ["a"] * 8 + ["tie", "both_bad"]
    weights = matchmaking.pair_weights([("m-b", "m-a")], a, b, outcome, rule="pair")
    n = 10 + 1.0
    p_first, p_tie = (2 + 1 / 3) / n, (2 + 1 / 3) / n  # m-a sorts first
    variance = p_first + p_tie / 4 - (p_first + p_tie / 2) ** 2
    assert weights.pairs == (("m-a", "m-b"),)
    assert weights.votes.tolist() == [10.0]
    assert weights.gain[0] == pytest.approx(np.sqrt(variance / n) - np.sqrt(variance / (n + 1)), rel=1e-8)
    assert weights.weight.tolist() == [1.0]


def test_rating_gain_equals_the_covariance_recomputed_with_one_more_vote():
    # Given votes among three models (the fourth has none)
    a, b, outcome = votes_stream(1, 200)
    models, rows, table = matchmaking.tally(PAIRS, a, b, outcome)
    fit = matchmaking._fit(models, rows, table, 1.0)
    k = len(models)
    i = np.array([models.index(x) for x, _ in PAIRS])
    j = np.array([models.index(y) for _, y in PAIRS])
    gain = matchmaking.rating_gain(fit, i, j)
    widest = matchmaking.rating_gain(fit, i, j, power=matchmaking.WIDEST_POWER)
    # Then each equals the drop of the summed rating standard errors (of their 8th powers for
    # "widest"), recomputed by inverting the
    # information with one expected vote's information added (no Woodbury).
    free = np.arange(1, k + 1)
    info = np.linalg.inv(fit.cov[np.ix_(free, free)])
    c = centring(k)
    sd_before = np.sqrt(np.diag(c @ fit.cov[:k, :k] @ c.T))
    for p in range(len(PAIRS)):
        d = 0.5 * (fit.theta[i[p]] - fit.theta[j[p]])
        den = np.exp(d) + np.exp(-d) + np.exp(fit.eta)
        pw, pl, pt = np.exp(d) / den, np.exp(-d) / den, np.exp(fit.eta) / den
        m = np.array([[pw + pl - (pw - pl) ** 2, -(pw - pl) * pt], [-(pw - pl) * pt, pt * (1 - pt)]])
        g = np.zeros((2, k + 1))
        g[0, i[p]], g[0, j[p]], g[1, k] = 0.5, -0.5, 1.0
        cov = np.zeros((k + 1, k + 1))
        cov[np.ix_(free, free)] = np.linalg.inv(info + (g.T @ m @ g)[np.ix_(free, free)])
        sd_after = np.sqrt(np.diag(c @ cov[:k, :k] @ c.T))
        assert gain[p] == pytest.approx(sd_before.sum() - sd_after.sum(), rel=1e-7)
        assert widest[p] == pytest.approx((sd_before**8).sum() - (sd_after**8).sum(), rel=1e-7)


@pytest.mark.parametrize("rule", matchmaking.RULES)
def test_weights_mix_the_gain_with_a_uniform_share(rule):
    a, b, outcome = votes_stream(2, 150)
    weights = matchmaking.pair_weights(PAIRS, a, b, outcome, rule=rule, uniform_share=0.3)
    assert weights.weight.sum() == pytest.approx(1.0)
    assert weights.weight == pytest.approx(0.7 * weights.gain / weights.gain.sum() + 0.3 / len(PAIRS))
    assert weights.weight.min() >= 0.3 / len(PAIRS)
    flat = matchmaking.pair_weights(PAIRS, a, b, outcome, rule=rule, uniform_share=1.0)
    assert flat.weight.tolist() == pytest.approx([1 / 6] * 6)


@pytest.mark.parametrize("rule", matchmaking.RULES)
def test_a_model_without_votes_gets_the_most_weight(rule):
    # Given 300 votes among m-a, m-b, m-c and none on m-d
    a, b, outcome = votes_stream(3, 300)
    weights = matchmaking.pair_weights(PAIRS, a, b, outcome, rule=rule).as_dict()
    new = [weights[p] for p in weights if "m-d" in p]
    old = [weights[p] for p in weights if "m-d" not in p]
    assert min(new) > 3 * max(old)


def test_close_pair_outweighs_a_lopsided_one_with_as_many_votes():
    # m-a beat m-b and m-c nearly always; m-b and m-c split evenly; 40 votes on each pair.
    a = ["m-a"] * 80 + ["m-b"] * 40
    b = ["m-b"] * 40 + ["m-c"] * 40 + ["m-c"] * 40
    outcome = (["a"] * 37 + ["b"] * 1 + ["tie"] * 2) * 2 + ["a"] * 18 + ["b"] * 18 + ["tie"] * 4
    pairs = [("m-a", "m-b"), ("m-a", "m-c"), ("m-b", "m-c")]
    w = matchmaking.pair_weights(pairs, a, b, outcome, rule="pair").as_dict()
    assert w[("m-b", "m-c")] > w[("m-a", "m-b")]
    assert w[("m-a", "m-b")] == pytest.approx(w[("m-a", "m-c")])


@pytest.mark.parametrize("rule", matchmaking.RULES)
def test_counts_give_the_same_weights_as_the_votes(rule):
    a, b, outcome = votes_stream(4, 120, models=MODELS)
    counts = pairwise.from_battles(list(MODELS), a, b, outcome)
    from_votes = matchmaking.pair_weights(PAIRS[::-1], a, b, outcome, rule=rule)
    from_counts = matchmaking.pair_weights_from_counts(PAIRS[::-1], counts, rule=rule)
    assert from_counts.pairs == from_votes.pairs
    assert from_counts.votes.tolist() == from_votes.votes.tolist()
    assert from_counts.weight == pytest.approx(from_votes.weight, rel=1e-9)


def test_votes_outside_the_candidates_inform_the_fit():
    a, b, outcome = votes_stream(5, 200)
    only = matchmaking.pair_weights([("m-a", "m-d"), ("m-b", "m-d")], rule="rating")
    informed = matchmaking.pair_weights([("m-a", "m-d"), ("m-b", "m-d")], a, b, outcome, rule="rating")
    assert only.votes.tolist() == informed.votes.tolist() == [0.0, 0.0]
    assert only.weight.tolist() == pytest.approx([0.5, 0.5])  # nothing tells the two apart
    assert informed.gain[0] != pytest.approx(informed.gain[1])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rule": "greedy"}, "matchmaking rule 'greedy' is not one of rating, widest, pair"),
        ({"uniform_share": 1.5}, "uniform_share must be between 0 and 1; got 1.5"),
        ({"prior_votes": 0}, "prior_votes must be above 0"),
    ],
)
def test_bad_options_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        matchmaking.pair_weights(PAIRS, **kwargs)


def test_bad_votes_and_no_pairs_are_refused():
    with pytest.raises(ValueError, match="outcome\\[1\\] is 'left'; expected one of a, b, tie, both_bad"):
        matchmaking.pair_weights(PAIRS, ["m-a", "m-b"], ["m-b", "m-c"], ["a", "left"])
    with pytest.raises(ValueError, match="differ in length \\(2, 1, 2\\)"):
        matchmaking.pair_weights(PAIRS, ["m-a", "m-b"], ["m-b"], ["a", "b"])
    with pytest.raises(ValueError, match="at least one candidate pair; got none"):
        matchmaking.pair_weights([])


def test_item_order_draws_items_by_their_pairs_weight():
    weights = matchmaking.PairWeights(
        pairs=(("m-a", "m-b"), ("m-a", "m-c")),
        weight=np.array([0.8, 0.2]),
        gain=np.array([0.8, 0.2]),
        votes=np.zeros(2),
        rule="rating",
        uniform_share=0.0,
    )
    # Two items of the heavy pair (0.4 each), one of the light pair (0.2).
    items = [("x1", "m-a", "m-b"), ("x2", "m-b", "m-a"), ("y1", "m-c", "m-a")]
    firsts = {"x1": 0, "x2": 0, "y1": 0}
    for seed in range(4000):
        order = matchmaking.item_order(items, weights, seed=seed)
        assert sorted(order) == ["x1", "x2", "y1"]
        firsts[order[0]] += 1
    # Binomial sd at 4000 draws: 0.008 (p 0.4) and 0.006 (p 0.2); 4 sd allowed.
    assert firsts["x1"] / 4000 == pytest.approx(0.4, abs=0.032)
    assert firsts["x2"] / 4000 == pytest.approx(0.4, abs=0.032)
    assert firsts["y1"] / 4000 == pytest.approx(0.2, abs=0.026)
    assert matchmaking.item_order(items, weights, seed=7) == matchmaking.item_order(items, weights, seed=7)
    with pytest.raises(ValueError, match="item 'z' compares 'm-b' with 'm-c', which is not one of the candidate"):
        matchmaking.item_order([("z", "m-b", "m-c")], weights, seed=0)


def _item(key: str, a: str, b: str):
    return SimpleNamespace(key=key, payload={"prompt": key, "model_a": a, "model_b": b})


def test_item_priorities_rank_the_open_items_and_favour_the_new_model():
    # Given done items with 3 votes each among m-a, m-b, m-c, and open items of every pair
    rng = np.random.default_rng(6)
    items, votes = [], {}
    for n in range(60):
        a, b = [MODELS[x] for x in rng.choice(3, 2, replace=False)]
        items.append(_item(f"done-{n}", a, b))
        votes[f"done-{n}"] = [(f"r{r}", {"winner": str(rng.choice(["a", "b", "tie"]))}) for r in range(3)]
    open_keys = []
    for a, b in PAIRS:
        items.append(_item(f"open-{a}-{b}", a, b))
        open_keys.append(f"open-{a}-{b}")
    new_first = 0
    for seed in range(300):
        ranks = matchmaking.item_priorities(items, votes, open_keys=open_keys, seed=seed)
        assert sorted(ranks) == sorted(open_keys)
        assert sorted(ranks.values()) == list(range(6))
        first = min(ranks, key=ranks.get)
        new_first += "m-d" in first
    # Then the three pairs with the unvoted m-d come first far more often than half the time.
    assert new_first / 300 > 0.8
    assert matchmaking.item_priorities(items, votes, open_keys=[]) == {}
