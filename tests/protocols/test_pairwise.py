"""Pairwise ratings (protocols.kit.pairwise), against independent computations: docs/statistics.md.

The oracles here share no code with the module: Hunter's MM algorithm for plain Bradley–Terry,
Davidson's own fixed-point equations for ties, the two-model closed form, and brute force for the
flip count. Pure numpy; no database.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from protocols.kit import pairwise

ELO = 400 / np.log(10)


def all_pairs(k: int) -> tuple[np.ndarray, np.ndarray]:
    first, second = zip(*itertools.combinations(range(k), 2), strict=True)
    return np.array(first), np.array(second)


def centred(log_strength: np.ndarray) -> np.ndarray:
    return 1000 + ELO * (log_strength - log_strength.mean())


# --- independent fits ------------------------------------------------------------------------------


def mm_bradley_terry(k, first, second, wins, losses) -> np.ndarray:
    """Hunter (2004), MM for plain Bradley–Terry: gamma_i <- W_i / sum_j n_ij / (gamma_i + gamma_j),
    iterated until no log-strength moves by 1e-13. Returns centred Elo ratings."""
    gamma = np.ones(k)
    won = np.bincount(first, wins, k) + np.bincount(second, losses, k)
    n = wins + losses
    for _ in range(200_000):
        per_pair = n / (gamma[first] + gamma[second])
        new = won / (np.bincount(first, per_pair, k) + np.bincount(second, per_pair, k))
        new /= np.exp(np.log(new).mean())
        if np.max(np.abs(np.log(new / gamma))) < 1e-13:
            return centred(np.log(new))
        gamma = new
    raise AssertionError("MM did not converge")


def davidson_fixed_point(k, first, second, wins, losses, ties) -> tuple[np.ndarray, float]:
    """Davidson (1970)'s likelihood equations, solved by fixed-point iteration in the strengths pi:
    d/d log pi_i:  W_i + T_i / 2 = sum_j n_ij (pi_i + nu sqrt(pi_i pi_j) / 2) / D_ij
    d/d log nu:    T = sum_ij n_ij nu sqrt(pi_i pi_j) / D_ij,     D_ij = pi_i + pi_j + nu sqrt(pi_i pi_j)
    so pi_i <- (W_i + T_i/2) / sum_j n_ij (1 + nu/2 sqrt(pi_j/pi_i)) / D_ij and
    nu <- T / sum n_ij sqrt(pi_i pi_j) / D_ij. Returns (centred Elo ratings, nu)."""
    pi, nu = np.ones(k), 1.0
    n = wins + losses + ties
    score = np.bincount(first, wins + ties / 2, k) + np.bincount(second, losses + ties / 2, k)
    for _ in range(200_000):
        den = pi[first] + pi[second] + nu * np.sqrt(pi[first] * pi[second])
        to_first = n * (1 + 0.5 * nu * np.sqrt(pi[second] / pi[first])) / den
        to_second = n * (1 + 0.5 * nu * np.sqrt(pi[first] / pi[second])) / den
        new_pi = score / (np.bincount(first, to_first, k) + np.bincount(second, to_second, k))
        new_pi /= np.exp(np.log(new_pi).mean())
        root = np.sqrt(new_pi[first] * new_pi[second])
        new_nu = ties.sum() / np.sum(n * root / (new_pi[first] + new_pi[second] + nu * root))
        change = max(np.max(np.abs(np.log(new_pi / pi))), abs(np.log(new_nu / nu)))
        pi, nu = new_pi, new_nu
        if change < 1e-13:
            return centred(np.log(pi)), nu
    raise AssertionError("fixed point did not converge")


# --- (a) the fit agrees with independent computations --------------------------------------------


def test_plain_bradley_terry_matches_hunters_mm():
    rng = np.random.default_rng(7)
    k = 7
    first, second = all_pairs(k)
    wins, losses = rng.integers(1, 40, first.size), rng.integers(1, 40, first.size)
    names = [f"m{i}" for i in range(k)]

    board = pairwise.rate(pairwise.from_counts(names, first, second, wins, losses, np.zeros_like(wins)))

    expected = mm_bradley_terry(k, first, second, wins, losses)
    assert np.max(np.abs(board.rating - expected)) < 0.01
    assert board.rating.mean() == pytest.approx(1000, abs=1e-9)
    assert board.nu == 0.0 and board.nu_ci is None  # no tie in the data: plain Bradley–Terry


def test_davidson_two_models_closed_form():
    """Two models, W votes for A, L for B, T ties (both bad included), N = W + L + T. With
    a = (theta_A - theta_B) / 2 the log-likelihood is W a - L a + T log nu - N log(e^a + e^-a + nu);
    setting its derivatives to zero gives W - L = N (p_A - p_B) and T = N p_tie, i.e. the fitted
    probabilities equal the observed shares. Then p_A / p_B = e^(2a) = W / L and
    p_tie / sqrt(p_A p_B) = nu = T / sqrt(W L). On the centred Elo scale:
    rating_A = 1000 + (400 / ln 10) / 2 * ln(W / L), rating_B = 2000 - rating_A."""
    wins, losses, ties, both_bad = 30, 12, 6, 3
    battles = ["a"] * 20 + ["b"] * 12 + ["tie"] * 6 + ["both_bad"] * 3
    model_a = ["A"] * len(battles)
    model_b = ["B"] * len(battles)
    # ten of A's wins recorded with B shown first
    battles += ["b"] * 10
    model_a += ["B"] * 10
    model_b += ["A"] * 10

    board = pairwise.rate(pairwise.from_battles(["A", "B"], model_a, model_b, battles))

    rating_a = 1000 + ELO / 2 * np.log(wins / losses)
    assert board.rating[0] == pytest.approx(rating_a, abs=1e-6)
    assert board.rating[1] == pytest.approx(2000 - rating_a, abs=1e-6)
    assert board.nu == pytest.approx((ties + both_bad) / np.sqrt(wins * losses), rel=1e-9)


def test_davidson_matches_the_fixed_point_equations():
    rng = np.random.default_rng(11)
    k = 6
    first, second = all_pairs(k)
    wins, losses = rng.integers(1, 50, first.size), rng.integers(0, 50, first.size)
    ties, both_bad = rng.integers(0, 12, first.size), rng.integers(0, 4, first.size)
    names = [f"m{i}" for i in range(k)]

    board = pairwise.rate(pairwise.from_counts(names, first, second, wins, losses, ties, both_bad))

    expected, nu = davidson_fixed_point(k, first, second, wins, losses, ties + both_bad)
    assert np.max(np.abs(board.rating - expected)) < 0.01
    assert board.nu == pytest.approx(nu, rel=1e-8)


def test_both_bad_counts_as_a_tie_in_the_fit_and_is_reported_apart():
    names = ["A", "B", "C"]
    first, second = np.array([0, 0, 1]), np.array([1, 2, 2])
    wins, losses = np.array([9, 7, 5]), np.array([4, 6, 5])
    apart = pairwise.rate(pairwise.from_counts(names, first, second, wins, losses, [2, 1, 0], [1, 0, 3]))
    merged = pairwise.rate(pairwise.from_counts(names, first, second, wins, losses, [3, 1, 3], [0, 0, 0]))

    assert np.array_equal(apart.rating, merged.rating) and apart.nu == merged.nu
    assert apart.per_model["both_bad"].tolist() == [1, 4, 3]
    assert apart.per_model["ties"].tolist() == [3, 2, 1]
    row_c = next(r for r in apart.rows() if r["model"] == "C")
    assert row_c["metrics"]["both_bad"] == 3 and row_c["metrics"]["ties"] == 1


def test_votes_per_row_and_counts_per_pair_give_the_same_table():
    names = ["x", "y", "z"]
    # x-y: x won shown first, y won shown first; x-z: x won shown second, z won shown second;
    # y-z: a tie and a "both bad"
    board = pairwise.from_battles(
        names, [0, 1, 2, 2, 1, 0], [1, 0, 1, 0, 2, 2], ["a", "a", "tie", "b", "both_bad", "b"]
    )
    counts = pairwise.from_counts(
        names, [1, 0, 2, 0], [0, 2, 1, 1], [1, 1, 0, 1], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 1, 0]
    )

    for field in ("first", "second", "wins", "losses", "ties", "both_bad"):
        assert getattr(board, field).tolist() == getattr(counts, field).tolist(), field
    assert board.wins.tolist() == [1, 1, 0] and board.losses.tolist() == [1, 1, 0]
    assert board.ties.tolist() == [0, 0, 1] and board.both_bad.tolist() == [0, 0, 1]


def test_win_rate_matrix_and_battles_count_ties_as_half():
    names = ["A", "B", "C"]
    counts = pairwise.from_counts(names, [0, 0, 1], [1, 2, 2], [3, 1, 2], [1, 1, 0], [0, 1, 1], [0, 1, 1])
    board = pairwise.rate(counts)
    rate, battles = board.win_rate_matrix, board.battle_matrix

    assert battles.tolist() == [[0, 4, 4], [4, 0, 4], [4, 4, 0]]
    assert rate[0, 1] == 3 / 4 and rate[1, 0] == 1 / 4
    assert rate[0, 2] == (1 + 1) / 4 and rate[2, 0] == (1 + 1) / 4
    assert rate[1, 2] == (2 + 1) / 4 and np.isnan(rate[0, 0])
    assert board.win_rate.tolist() == [(4 + 1) / 8, (3 + 1) / 8, (1 + 2) / 8]
    assert board.per_model["battles"].tolist() == [8, 8, 8]


# --- (b) the sandwich interval against the bootstrap, and against the truth -------------------------


def simulate_counts(rng, theta, nu, per_pair):
    k = theta.size
    first, second = all_pairs(k)
    pa, pb = np.exp(theta[first]), np.exp(theta[second])
    tie = nu * np.sqrt(pa * pb)
    probs = np.stack([pa, pb, tie], axis=1) / (pa + pb + tie)[:, None]
    draws = rng.multinomial(per_pair, probs)
    return pairwise.from_counts(
        [f"m{i}" for i in range(k)], first, second, draws[:, 0], draws[:, 1], draws[:, 2], np.zeros(first.size, int)
    )


THETA = np.array([0.9, 0.5, 0.2, 0.0, -0.4, -1.1])
NU = 0.6


def test_sandwich_intervals_are_close_to_the_bootstraps():
    counts = simulate_counts(np.random.default_rng(5), THETA, NU, 300)

    sandwich = pairwise.rate(counts)
    boot = pairwise.rate(counts, method="bootstrap", rounds=1000, seed=3)

    assert np.array_equal(sandwich.rating, boot.rating)
    half_s = (sandwich.ci[:, 1] - sandwich.ci[:, 0]) / 2
    half_b = (boot.ci[:, 1] - boot.ci[:, 0]) / 2
    assert np.all(np.abs(half_b / half_s - 1) < 0.12)
    centre_b = (boot.ci[:, 1] + boot.ci[:, 0]) / 2
    assert np.all(np.abs(centre_b - sandwich.rating) < 0.2 * half_s)
    assert boot.unbounded_rounds == 0
    assert abs((boot.nu_ci[1] - boot.nu_ci[0]) / (sandwich.nu_ci[1] - sandwich.nu_ci[0]) - 1) < 0.15


def test_sandwich_matches_numerical_derivatives_on_votes_the_model_does_not_fit():
    """H^-1 B H^-1 built here from finite differences of each vote's log-probability, written in the
    strengths pi (Davidson's form), at the fixed-point estimate. The votes are intransitive (A beats B,
    B beats C, C beats A, each 85 % of decided votes), so the meat B differs from the information H
    and an interval that used H^-1 alone would be off by 1-2 %, a hundred times the tolerance."""
    names = ["A", "B", "C", "D"]
    first, second = np.array([0, 0, 0, 1, 1, 2]), np.array([1, 2, 3, 2, 3, 3])
    wins, losses = np.array([1200, 180, 40, 1100, 35, 45]), np.array([210, 1150, 38, 200, 41, 30])
    ties = np.array([500, 450, 22, 480, 19, 25])
    board = pairwise.rate(pairwise.from_counts(names, first, second, wins, losses, ties))

    ratings, nu = davidson_fixed_point(4, first, second, wins, losses, ties)
    # free parameters: log pi of B, C, D (A's pinned at 0) and log nu
    phi = np.append((ratings[1:] - ratings[0]) / ELO, np.log(nu))

    def log_probs(params, i, j):
        log_pi = np.concatenate([[0.0], params[:3]])
        pi_i, pi_j, tie = np.exp(log_pi[i]), np.exp(log_pi[j]), np.exp(params[3] + (log_pi[i] + log_pi[j]) / 2)
        return np.log(np.array([pi_i, pi_j, tie]) / (pi_i + pi_j + tie))

    counts = np.stack([wins, losses, ties], axis=1)

    def total(params):
        return sum(counts[p] @ log_probs(params, first[p], second[p]) for p in range(first.size))

    h, eye = 1e-5, np.eye(4)
    meat = np.zeros((4, 4))
    for p in range(first.size):
        grads = np.stack(
            [
                (log_probs(phi + h * e, first[p], second[p]) - log_probs(phi - h * e, first[p], second[p])) / (2 * h)
                for e in eye
            ],
            axis=1,
        )  # (outcome, parameter)
        meat += grads.T @ (counts[p][:, None] * grads)
    g = 1e-4
    hessian = np.array(
        [
            [
                (
                    total(phi + g * a + g * b)
                    - total(phi + g * a - g * b)
                    - total(phi - g * a + g * b)
                    + total(phi - g * a - g * b)
                )
                / (4 * g * g)
                for b in eye
            ]
            for a in eye
        ]
    )
    bread = np.linalg.inv(-hessian)
    cov = bread @ meat @ bread
    to_rating = ELO * (np.eye(4) - 0.25)[:, 1:]  # centred ratings from (log pi_B, log pi_C, log pi_D)
    se = np.sqrt(np.diag(to_rating @ cov[:3, :3] @ to_rating.T))
    model_se = np.sqrt(np.diag(to_rating @ bread[:3, :3] @ to_rating.T))

    assert np.max(np.abs(board.rating - ratings)) < 0.01
    assert board.se == pytest.approx(se, rel=1e-4)
    assert np.min(np.abs(model_se / se - 1)) > 0.01  # the check tells the sandwich from H^-1 alone
    z = 1.959963984540054
    assert board.nu_ci == pytest.approx(
        [nu * np.exp(-z * np.sqrt(cov[3, 3])), nu * np.exp(z * np.sqrt(cov[3, 3]))], rel=1e-4
    )


def test_sandwich_intervals_cover_the_true_ratings_95_percent_of_the_time():
    rng = np.random.default_rng(2024)
    truth = centred(THETA)
    covered, nu_covered, datasets = 0, 0, 300
    for _ in range(datasets):
        board = pairwise.rate(simulate_counts(rng, THETA, NU, 150))
        covered += int(np.sum((board.ci[:, 0] <= truth) & (truth <= board.ci[:, 1])))
        nu_covered += int(board.nu_ci[0] <= NU <= board.nu_ci[1])
    # 1,800 intervals: the binomial standard error of a 95 % coverage is about half a point
    assert 0.93 <= covered / (datasets * THETA.size) <= 0.97
    assert 0.92 <= nu_covered / datasets <= 0.98


def test_bootstrap_is_seeded_and_counts_rounds_without_a_finite_fit():
    # A beat B 3 times and lost once: a redraw with no loss (chance (3/4)^4) leaves A unbounded.
    counts = pairwise.from_counts(["A", "B"], [0], [1], [3], [1], [0])

    one = pairwise.rate(counts, method="bootstrap", rounds=1000, seed=9)
    two = pairwise.rate(counts, method="bootstrap", rounds=1000, seed=9)

    assert np.array_equal(one.ci, two.ci)
    assert 250 <= one.unbounded_rounds <= 380  # expected 316
    assert np.all(np.isfinite(one.ci))
    assert one.to_json()["bootstrap"] == {"rounds": 1000, "seed": 9, "unbounded_rounds": one.unbounded_rounds}


# --- (c) ranks by interval overlap -----------------------------------------------------------------


def test_rank_counts_the_models_whose_lower_bound_is_above_this_upper_bound():
    lo = np.array([10.0, 15.0, 30.0, 5.0, 26.0, 40.0])
    hi = np.array([20.0, 25.0, 40.0, 8.0, 29.0, 50.0])
    # [40,50]: nobody above; [30,40]: nobody (40 touches 40, not above); [26,29]: 30 and 40 above;
    # [15,25] and [10,20]: 30, 26 and 40 above (15 is not above 20); [5,8]: all five others above.
    assert pairwise.overlap_ranks(lo, hi).tolist() == [4, 4, 1, 6, 3, 1]


def test_board_rows_are_ordered_by_rating_with_overlap_ranks():
    # m0 and m1 are 9 points apart (their intervals overlap), m2 and m3 far below
    counts = simulate_counts(np.random.default_rng(1), np.array([1.5, 1.45, 0.0, -1.5]), NU, 400)
    board = pairwise.rate(counts)
    rows = board.rows()

    assert {r["model"] for r in rows[:2]} == {"m0", "m1"} and [r["model"] for r in rows[2:]] == ["m2", "m3"]
    assert [r["metrics"]["rating"] for r in rows] == sorted((round(x, 2) for x in board.rating), reverse=True)
    assert [r["rank"] for r in rows] == [1, 1, 3, 4]
    top = rows[0]
    assert set(top) == {"model", "n", "rank", "metrics", "ci"}
    assert set(top["metrics"]) == {"rating", "win_rate", "battles", "ties", "both_bad"}
    assert top["n"] == top["metrics"]["battles"] == 1200
    lo, hi = top["ci"]["rating"]
    assert lo < top["metrics"]["rating"] < hi


# --- (d) the votes that would have to change to flip #1 ---------------------------------------------


def test_flip_two_models_by_hand():
    """A won 4, B won 2, 2 ties. One changed vote moves W - L by at most 2 (a win of A becomes a win
    of B): 4-2 -> 3-3 leaves them level, not B above. Two changes (3-3 -> 2-4) put B above. So 2."""
    counts = pairwise.from_counts(["A", "B"], [0], [1], [4], [2], [2])

    flip = pairwise.rate(counts, flip=True).flip

    assert (flip.votes, flip.top, flip.challenger) == (2, "A", "B")
    assert sum(c["votes"] for c in flip.changes) == 2


def test_flip_three_models_by_hand():
    """A beat B 2-1 and C 2-1, B and C split 1-1: A is #1 with 4-2. Turning one of A's wins over B
    into a win of B gives A 3-3 and B 3-2 (B's wins over A and C; losses to A and C): B now rates
    above A (checked here with Hunter's MM), so one vote flips #1."""
    names = ["A", "B", "C"]
    first, second = np.array([0, 0, 1]), np.array([1, 2, 2])
    counts = pairwise.from_counts(names, first, second, [2, 2, 1], [1, 1, 1], [0, 0, 0])

    flip = pairwise.rate(counts, flip=True).flip

    assert (flip.votes, flip.top, flip.challenger) == (1, "A", "B")
    assert flip.changes == [{"between": ["A", "B"], "from": "A won", "to": "B won", "votes": 1}]
    after = mm_bradley_terry(3, first, second, np.array([1, 2, 1]), np.array([2, 1, 1]))
    assert after[1] > after[0]


def test_flip_count_is_the_minimum_on_a_small_case_by_brute_force():
    names = ["A", "B", "C"]
    first, second = np.array([0, 0, 1]), np.array([1, 2, 2])
    table = np.array([[5, 4, 3], [2, 1, 3], [1, 1, 1], [0, 1, 0]])  # rows: wins, losses, ties, both bad
    counts = pairwise.from_counts(names, first, second, *table)

    flip = pairwise.rate(counts, flip=True).flip
    assert flip.votes is not None and flip.votes >= 1

    def flips(changed: np.ndarray) -> bool:
        try:
            board = pairwise.rate(pairwise.from_counts(names, first, second, *changed))
        except ValueError:
            return False  # no finite rating: no model is rated above #1
        return bool(np.max(np.delete(board.rating, 0)) > board.rating[0])

    moves = [(p, s, d) for p in range(3) for s in range(4) for d in range(4) if s != d]
    for size in range(1, flip.votes):
        for combo in itertools.combinations_with_replacement(moves, size):
            changed = table.copy()
            for p, s, d in combo:
                changed[s, p] -= 1
                changed[d, p] += 1
            if np.all(changed >= 0):
                assert not flips(changed), combo
    # and the reported changes do flip it
    changed = table.copy()
    pairs = [(names[i], names[j]) for i, j in zip(first, second, strict=True)]
    for change in flip.changes:
        one, two = change["between"]
        column = {f"{one} won": 0, f"{two} won": 1, "tie": 2, "both bad": 3}
        p = pairs.index((one, two))
        changed[column[change["from"]], p] -= change["votes"]
        changed[column[change["to"]], p] += change["votes"]
    assert flips(changed)


# --- (e) bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda: pairwise.from_counts(["A"], [], [], [], [], []), "at least two models; got 1 ('A')"),
        (lambda: pairwise.from_counts(["A", "A"], [0], [1], [1], [1], [0]), "model 'A' is listed twice"),
        (
            lambda: pairwise.from_counts(["A", "B", "C"], [0], [1], [2], [1], [0]),
            "model 'C' never compared with another model",
        ),
        (
            lambda: pairwise.from_counts(["A", "B"], [0], [1], [2], [-1], [0]),
            "losses of ('A', 'B') is -1; counts cannot be negative",
        ),
        (lambda: pairwise.from_counts(["A", "B"], [0], [1], [2.5], [1], [0]), "wins of ('A', 'B') is 2.5"),
        (lambda: pairwise.from_counts(["A", "B"], [0], [0], [2], [1], [0]), "pairs 'A' with itself"),
        (lambda: pairwise.from_battles(["A", "B"], ["A"], ["D"], ["a"]), "model_b[0] is 'D'"),
        (lambda: pairwise.from_battles(["A", "B"], [0, 1], [1, 0], ["a", "draw"]), "outcome[1] is 'draw'"),
        (lambda: pairwise.from_battles(["A", "B"], [0, 0], [1, 0], ["a", "b"]), "battle 1 compares 'A' with itself"),
        (lambda: pairwise.from_battles(["A", "B"], [0, 5], [1, 0], ["a", "b"]), "model_a[1] is 5"),
        (lambda: pairwise.from_battles(["A", "B"], [0], [1], ["a", "b"]), "differ in length (1, 1, 2)"),
    ],
)
def test_bad_counts_are_refused_naming_what_is_wrong(call, message):
    with pytest.raises(ValueError) as raised:
        call()
    assert message in str(raised.value)


def refusal(names, first, second, wins, losses, ties) -> str:
    with pytest.raises(ValueError) as raised:
        pairwise.rate(pairwise.from_counts(names, first, second, wins, losses, ties))
    return str(raised.value)


def test_models_in_groups_never_compared_are_refused():
    message = refusal(["A", "B", "C", "D"], [0, 2], [1, 3], [3, 2], [1, 2], [0, 0])
    assert (
        message
        == "the comparisons split the models into groups never compared with each other: {'A', 'B'} and {'C', 'D'}"
    )


def test_a_model_that_never_lost_is_refused():
    # pairs A-B, A-C, B-C, C-D; A won all five of its votes
    message = refusal(["A", "B", "C", "D"], [0, 0, 1, 2], [1, 2, 2, 3], [3, 2, 1, 1], [0, 0, 1, 1], [0] * 4)
    assert message == (
        "model 'A' never lost to or tied with another model: its rating has no finite"
        " maximum-likelihood value (more votes are needed)"
    )


def test_a_model_that_never_won_is_refused():
    # pairs A-B, A-C, B-C, C-D; D lost its three votes, the others beat each other both ways
    message = refusal(["A", "B", "C", "D"], [0, 0, 1, 2], [1, 2, 2, 3], [3, 2, 1, 3], [1, 1, 1, 0], [0] * 4)
    assert message == (
        "model 'D' never beat or tied another model: its rating has no finite"
        " maximum-likelihood value (more votes are needed)"
    )


def test_a_group_that_never_lost_is_refused():
    # A and B beat each other, and both beat C and D, who beat each other: {A, B} run off upwards.
    message = refusal(["A", "B", "C", "D"], [0, 0, 1, 2], [1, 2, 3, 3], [1, 2, 2, 1], [1, 0, 0, 1], [0] * 4)
    assert message == (
        "models {'A', 'B'} never lost to or tied with a model outside them: their ratings have no finite"
        " maximum-likelihood value (more votes are needed)"
    )


def test_only_ties_are_refused_but_ties_do_bound_ratings():
    names, first, second = ["A", "B", "C"], [0, 0, 1], [1, 2, 2]
    assert refusal(names, first, second, [0, 0, 0], [0, 0, 0], [2, 1, 1]) == (
        "every vote is a tie or both bad: the tie parameter has no finite estimate"
    )
    # A never lost, but tied B: a tie bounds a rating from both sides, so a finite fit exists
    board = pairwise.rate(pairwise.from_counts(names, first, second, [0, 2, 1], [0, 0, 1], [2, 0, 0]))
    assert board.nu > 0 and np.all(np.isfinite(board.ci))


def test_bad_options_are_refused():
    counts = pairwise.from_counts(["A", "B"], [0], [1], [2], [1], [1])
    with pytest.raises(ValueError, match="interval method 'exact' is not one of sandwich, bootstrap"):
        pairwise.rate(counts, method="exact")
    with pytest.raises(ValueError, match="bootstrap rounds must be at least 1; got 0"):
        pairwise.rate(counts, method="bootstrap", rounds=0)
    with pytest.raises(ValueError, match="interval level must be between 0 and 1; got 95"):
        pairwise.rate(counts, level=95)
