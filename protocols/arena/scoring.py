"""The arena's board: ratings of the models from the human votes on its items, by Bradley–Terry
with Davidson ties (protocols/kit/pairwise/; definitions in docs/statistics.md). Plain Python.

A board whose rows come from votes rather than from model answers (``Protocol.board == "votes"``)
is built by ``vote_board(items, votes)``: every annotation of an item is one battle between the
item's ``model_a`` and ``model_b``, its ``winner`` the outcome ("both bad" a tie for the fit,
counted apart). The headline ratings are from the votes on the outputs as a whole; each further
criterion voted on gets its own ratings as a breakdown (``criterion:<name>:rating``), where its
votes admit a finite fit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from protocols.kit import pairwise

from .fields import HEADLINE_CRITERION, VOTE_CRITERIA, WINNERS

# The main table's columns (leaderboard rows' "metrics"), the headline first.
KEYS = ("rating", "win_rate", "battles", "ties", "both_bad")


def battles(
    items: Iterable[Any], votes: Mapping[Any, Sequence[tuple[str, Mapping[str, Any]]]], criterion: str
) -> tuple[list[str], list[str], list[str]]:
    """(model_a, model_b, outcome) per vote on ``criterion`` of the items (``item.key`` ->
    [(rater, stored answer)]); a vote in the item's terms, so "a" is a win of the item's model_a."""
    a, b, outcome = [], [], []
    for item in items:
        payload = item.payload
        for _rater, result in votes.get(item.key, ()):
            vote = (
                result.get("winner")
                if criterion == HEADLINE_CRITERION
                else (result.get("criteria") or {}).get(criterion)
            )
            if vote in WINNERS:
                a.append(str(payload["model_a"]))
                b.append(str(payload["model_b"]))
                outcome.append(vote)
    return a, b, outcome


def ratings(model_a: Sequence[str], model_b: Sequence[str], outcome: Sequence[str], **options: Any):
    """The kit's Ratings of one set of battles (its models in name order); ValueError when the
    votes admit no finite rating, naming why."""
    models = sorted(set(model_a) | set(model_b))
    return pairwise.rate(pairwise.from_battles(models, list(model_a), list(model_b), list(outcome)), **options)


def _counts_only(model_a, model_b, outcome) -> list[dict[str, Any]]:
    """Rows without ratings (the votes admit no fit): battles, win rates and ties per model."""
    counts = pairwise.from_battles(sorted(set(model_a) | set(model_b)), list(model_a), list(model_b), list(outcome))
    per_model, rates = counts.per_model(), counts.win_rates()
    return [
        {
            "model": model,
            "n": int(per_model["battles"][m]),
            "metrics": {
                "rating": None,
                "win_rate": round(float(rates[m]), 4),
                "battles": int(per_model["battles"][m]),
                "ties": int(per_model["ties"][m]),
                "both_bad": int(per_model["both_bad"][m]),
            },
            "ci": {"rating": None},
        }
        for m, model in enumerate(counts.models)
    ]


def vote_board(
    items: Sequence[Any],
    votes: Mapping[Any, Sequence[tuple[str, Mapping[str, Any]]]],
    *,
    criteria: Sequence[str] = VOTE_CRITERIA,
) -> dict[str, Any]:
    """{"rows": leaderboard rows, "pairwise": the fit's figures (tie parameter, win-rate and battle
    matrices, method), "notes": [...]} (see the module). Rows carry ``model``, ``n`` (battles),
    ``metrics`` (rating, win_rate, battles, ties, both_bad), ``ci`` (rating) and ``breakdowns``."""
    a, b, outcome = battles(items, votes, HEADLINE_CRITERION)
    notes: list[str] = []
    if len(set(a) | set(b)) < 2:
        return {"rows": [], "pairwise": None, "notes": ["no votes on verified items yet"]}
    try:
        fitted = ratings(a, b, outcome, flip=True)
    except ValueError as exc:
        notes.append(f"no ratings: {exc}")
        rows, figures = _counts_only(a, b, outcome), None
    else:
        rows = fitted.rows()
        figures = {k: v for k, v in fitted.to_json().items() if k != "rows"}
        flip = fitted.flip
        if flip is not None and flip.votes is not None:
            notes.append(
                f"{flip.votes} vote{'s' if flip.votes != 1 else ''} would have to change for {flip.challenger} "
                f"to rate above {flip.top}"
            )
    by_model = {row["model"]: row for row in rows}
    for row in rows:
        row.update(parse_failures=0, se={}, se_clustered={}, design_effect={}, breakdowns={})
    for criterion in criteria:
        if criterion == HEADLINE_CRITERION:
            continue
        ca, cb, co = battles(items, votes, criterion)
        if not co:
            continue
        try:
            per = ratings(ca, cb, co)
        except ValueError as exc:
            notes.append(f"no {criterion} ratings: {exc}")
            continue
        for row in per.rows():
            if row["model"] in by_model:
                by_model[row["model"]]["breakdowns"][f"criterion:{criterion}:rating"] = {
                    "value": row["metrics"]["rating"],
                    "ci": row["ci"]["rating"],
                }
    return {"rows": rows, "pairwise": figures, "notes": notes}
