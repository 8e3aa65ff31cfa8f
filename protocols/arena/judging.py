"""How far an MLLM pairwise judge can be trusted (docs/protocols/arena.md, "MLLM judges"). Plain
Python, no Django: the evaluation app (evaluation/judges.py) reads the predictions and votes and
hands them here.

Words. A *verdict* is in the item's terms: "a", "b", "tie" or "both_bad" (fields.WINNERS). One
run of a judge asks each pair twice, sides swapped (prompts.JUDGE_KEYS); ``asks`` is, per item,
{ask key: verdict or None}, from the parsed replies by ``run_asks``.

- **Swap consistency**: of the items with both asks answered, the share whose two verdicts are
  equal.
- **Position bias**: of the answered asks that pick a side ("a" or "b"), the share that picked
  the output shown first; 0.5 is a judge without bias. With an exact two-sided binomial p against
  0.5.
- **Item verdict of a run**: the two asks' verdict where they agree; "tie" where they differ (a
  verdict that flips with the order is no preference); the one answered ask's verdict where the
  other has none.
- **K runs** of the same judge: on the ordinal scale b = -1 < tie = both bad = 0 < a = +1, the
  *median-of-K* verdict is the sign of the median of the runs' scores ("a" above 0, "b" below,
  otherwise "both_bad" where more runs said both bad than tie, else "tie"); *stability* is the
  mean over items of the per-item variance of the scores (population variance; 0 for a judge that
  never changes its mind, at most 1) and the *consistency rate*, the share of items all of whose
  runs gave the same verdict (items with at least two runs answered).
- **Against humans**: an item's human majority is the verdict more votes gave than any other
  (none on a tie for the most votes). *Accuracy* is the share of the items with a non-tie majority
  ("a" or "b") where the judge's verdict is that majority; *Cohen's κ* compares the judge's
  verdict with the human majority over the items that have both, on the four verdicts.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .fields import WINNERS
from .prompts import JUDGE_KEYS, SHOWN, verdict

SCORE = {"a": 1, "tie": 0, "both_bad": 0, "b": -1}
SIDES_WON = ("a", "b")
# Hooks of the shared judges page (evaluation/judges.py): what its list of disagreements shows of
# an item's payload, and where an item's two outputs are in its media.
PAIR_FIELDS = ("prompt", "model_a", "model_b")


def side_media(media: Mapping[str, Any]) -> dict[str, Any]:
    """side ("a", "b") -> the media key of that side's output (its video, else its image; None)."""
    return {side: media.get(f"video_{side}") or media.get(f"image_{side}") for side in SIDES_WON}


def run_asks(answers: Iterable[tuple[Any, str, Any]]) -> dict[Any, dict[str, str | None]]:
    """item -> {ask key: verdict or None} from one run's (item, query, parsed answer) rows; rows of
    other queries are left out, an unparsed or failed answer (None) is kept as None."""
    out: dict[Any, dict[str, str | None]] = {}
    for item, query, answer in answers:
        if query in SHOWN:
            out.setdefault(item, {})[query] = verdict(query, answer)
    return out


def item_verdict(asks: Mapping[str, str | None]) -> str | None:
    """One run's verdict on an item from its asks (see the module)."""
    given = [asks.get(key) for key in JUDGE_KEYS if asks.get(key) is not None]
    if not given:
        return None
    if len(given) == 1 or given[0] == given[1]:
        return given[0]
    return "tie"


def item_verdicts(asks: Mapping[Any, Mapping[str, str | None]]) -> dict[Any, str]:
    """item -> the run's verdict, items with no answered ask left out."""
    return {item: v for item, per in asks.items() if (v := item_verdict(per)) is not None}


def swap_consistency(asks: Mapping[Any, Mapping[str, str | None]]) -> dict[str, Any]:
    """{"rate", "consistent", "n"}: n items with both asks answered, ``consistent`` of them agree;
    rate None when n is 0."""
    n = consistent = 0
    for per in asks.values():
        both = [per.get(key) for key in JUDGE_KEYS]
        if None in both:
            continue
        n += 1
        consistent += both[0] == both[1]
    return {"rate": consistent / n if n else None, "consistent": consistent, "n": n}


def position_bias(asks: Mapping[Any, Mapping[str, str | None]]) -> dict[str, Any]:
    """{"first_share", "first", "n", "p"}: of n asks whose verdict picked a side, ``first`` picked
    the output shown first; p is the exact two-sided binomial p against 0.5 (None when n is 0)."""
    n = first = 0
    for per in asks.values():
        for key, v in per.items():
            if key in SHOWN and v in SIDES_WON:
                n += 1
                first += v == SHOWN[key][0]
    return {"first_share": first / n if n else None, "first": first, "n": n, "p": binomial_p(first, n)}


def binomial_p(k: int, n: int) -> float | None:
    """Exact two-sided binomial test of k successes in n against 0.5: the chance of a count at
    least as far from n/2 as k (the sum of the outcomes no more likely than k's)."""
    if n == 0:
        return None
    probs = [math.comb(n, i) / 2**n for i in range(n + 1)]
    own = probs[k] * (1 + 1e-7)
    return min(1.0, sum(p for p in probs if p <= own))


def median_of_k(runs: Sequence[Mapping[Any, str]]) -> dict[Any, str]:
    """item -> the median-of-K verdict of the runs' item verdicts (see the module); each item over
    the runs that gave it a verdict."""
    per_item: dict[Any, list[str]] = {}
    for run in runs:
        for item, v in run.items():
            if v in SCORE:
                per_item.setdefault(item, []).append(v)
    out = {}
    for item, verdicts in per_item.items():
        middle = statistics.median(SCORE[v] for v in verdicts)
        if middle > 0:
            out[item] = "a"
        elif middle < 0:
            out[item] = "b"
        else:
            counts = Counter(verdicts)
            out[item] = "both_bad" if counts["both_bad"] > counts["tie"] else "tie"
    return out


def stability(runs: Sequence[Mapping[Any, str]]) -> dict[str, Any]:
    """{"k", "n", "mean_variance", "consistency_rate", "variance"}: k runs; n items with a verdict
    in at least two of them; the mean per-item variance of the ordinal scores and the share of
    those items whose verdicts are all equal (None when n is 0); ``variance`` per item."""
    per_item: dict[Any, list[str]] = {}
    for run in runs:
        for item, v in run.items():
            if v in SCORE:
                per_item.setdefault(item, []).append(v)
    variance = {
        item: statistics.pvariance([SCORE[v] for v in verdicts])
        for item, verdicts in per_item.items()
        if len(verdicts) >= 2
    }
    same = sum(len(set(per_item[item])) == 1 for item in variance)
    n = len(variance)
    return {
        "k": len(runs),
        "n": n,
        "mean_variance": sum(variance.values()) / n if n else None,
        "consistency_rate": same / n if n else None,
        "variance": variance,
    }


def human_majority(votes: Iterable[str]) -> str | None:
    """The verdict more of ``votes`` gave than any other (votes outside WINNERS are left out);
    None without votes or when two verdicts share the most votes."""
    counts = Counter(v for v in votes if v in WINNERS).most_common()
    if not counts or (len(counts) > 1 and counts[0][1] == counts[1][1]):
        return None
    return counts[0][0]


def cohen_kappa(x: Sequence[str], y: Sequence[str], categories: Sequence[str] = WINNERS) -> float | None:
    """Cohen's κ of two equally long label sequences over ``categories``: (p_o − p_e) / (1 − p_e)
    with p_e from the two marginals; None without pairs or when p_e is 1 (both always gave one
    and the same label: κ is undefined)."""
    if len(x) != len(y):
        raise ValueError(f"kappa needs two equally long sequences, got {len(x)} and {len(y)}")
    n = len(x)
    if n == 0:
        return None
    observed = sum(a == b for a, b in zip(x, y, strict=True)) / n
    cx, cy = Counter(x), Counter(y)
    expected = sum(cx[c] * cy[c] for c in categories) / (n * n)
    if expected >= 1:
        return None
    return (observed - expected) / (1 - expected)


def human_agreement(judge: Mapping[Any, str], majority: Mapping[Any, str | None]) -> dict[str, Any]:
    """{"accuracy", "n_accuracy", "correct", "kappa", "n_kappa", "disagreements"}: the judge's
    verdicts against the human majorities (see the module). ``disagreements``: the items with both
    whose verdicts differ, in ``majority`` order."""
    both = [item for item, m in majority.items() if m is not None and judge.get(item) in SCORE]
    decisive = [item for item in both if majority[item] in SIDES_WON]
    correct = sum(judge[item] == majority[item] for item in decisive)
    return {
        "accuracy": correct / len(decisive) if decisive else None,
        "correct": correct,
        "n_accuracy": len(decisive),
        "kappa": cohen_kappa([judge[i] for i in both], [majority[i] for i in both]),
        "n_kappa": len(both),
        "disagreements": [item for item in both if judge[item] != majority[item]],
    }


def judge_report(runs: Sequence[Mapping[Any, Mapping[str, str | None]]], majority: Mapping[Any, str | None]):
    """Everything about one judge run K times (``runs``: each run's ``asks``, the newest last):
    {"k", "swap_consistency", "position_bias" (pooled over the runs' asks), "runs": [per run:
    swap_consistency, position_bias, agreement], "verdicts" (median-of-K), "stability" (K >= 2,
    else None), "agreement" (the median-of-K verdicts against the humans)}."""
    if not runs:
        raise ValueError("a judge report needs at least one run")
    per_run = []
    pooled_n = pooled_consistent = pooled_first = pooled_sided = 0
    verdict_runs = []
    for asks in runs:
        sc, pb = swap_consistency(asks), position_bias(asks)
        pooled_n += sc["n"]
        pooled_consistent += sc["consistent"]
        pooled_first += pb["first"]
        pooled_sided += pb["n"]
        verdicts = item_verdicts(asks)
        verdict_runs.append(verdicts)
        agreement = human_agreement(verdicts, majority)
        agreement.pop("disagreements")
        per_run.append({"swap_consistency": sc, "position_bias": pb, "agreement": agreement})
    combined = median_of_k(verdict_runs) if len(runs) > 1 else verdict_runs[0]
    return {
        "k": len(runs),
        "swap_consistency": {
            "rate": pooled_consistent / pooled_n if pooled_n else None,
            "consistent": pooled_consistent,
            "n": pooled_n,
        },
        "position_bias": {
            "first_share": pooled_first / pooled_sided if pooled_sided else None,
            "first": pooled_first,
            "n": pooled_sided,
            "p": binomial_p(pooled_first, pooled_sided),
        },
        "runs": per_run,
        "verdicts": combined,
        "stability": stability(verdict_runs) if len(runs) > 1 else None,
        "agreement": human_agreement(combined, majority),
    }


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's τ-b of two scorings of the same systems (ties in either counted as τ-b does);
    None for fewer than two systems or a scoring with every value equal."""
    if len(x) != len(y):
        raise ValueError(f"tau needs two equally long sequences, got {len(x)} and {len(y)}")
    concordant = discordant = ties_x = ties_y = 0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            dx, dy = x[i] - x[j], y[i] - y[j]
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                ties_x += 1
            elif dy == 0:
                ties_y += 1
            elif (dx > 0) == (dy > 0):
                concordant += 1
            else:
                discordant += 1
    denominator = math.sqrt((concordant + discordant + ties_x) * (concordant + discordant + ties_y))
    return (concordant - discordant) / denominator if denominator else None
