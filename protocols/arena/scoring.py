"""The arena's board: ratings of the models from the human votes on its items, by Bradley–Terry
with Davidson ties (protocols/kit/pairwise/; definitions in docs/statistics.md). Plain Python.

A board whose rows come from votes rather than from model answers (``Protocol.board == "votes"``)
is built by ``vote_board(items, votes)``: every annotation of an item is one battle between the
item's ``model_a`` and ``model_b``, its ``winner`` the outcome ("both bad" a tie for the fit,
counted apart). The headline ratings are from the votes on the outputs as a whole; each further
criterion voted on gets its own ratings as a breakdown (``criterion:<name>:rating``), where its
votes admit a finite fit.

Intervals: by default the cluster-robust sandwich, the votes clustered by the protocol's
``cluster_key`` (the prompt: every vote on one prompt's outputs in one cluster, a vote whose item
has no prompt a cluster of its own); each row also carries ``se`` (the plain sandwich, votes
independent), ``se_clustered`` and ``design_effect`` of its rating. ``ci="bootstrap"`` asks for the
multinomial bootstrap instead (``rounds`` redraws of the battle counts, seed 0), which treats votes
as independent. Definitions: docs/statistics.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from protocols.kit import clustered, pairwise
from protocols.kit.bootstrap import N_BOOT

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


def battle_clusters(
    items: Iterable[Any],
    votes: Mapping[Any, Sequence[tuple[str, Mapping[str, Any]]]],
    criterion: str,
    key: clustered.ClusterKey,
) -> list[Any]:
    """The cluster label of every vote ``battles`` returns, in its order: the vote's item's value
    under ``key`` (clustered.cluster_labels: an item without one is a cluster of its own)."""
    labels = []
    for item in items:
        label = clustered.cluster_labels([item.payload], [item.key], key)[0]
        for _rater, result in votes.get(item.key, ()):
            vote = (
                result.get("winner")
                if criterion == HEADLINE_CRITERION
                else (result.get("criteria") or {}).get(criterion)
            )
            if vote in WINNERS:
                labels.append(label)
    return labels


def ratings(
    model_a: Sequence[str],
    model_b: Sequence[str],
    outcome: Sequence[str],
    *,
    clusters: Sequence[Any] | None = None,
    **options: Any,
):
    """The kit's Ratings of one set of battles (its models in name order), with the cluster-robust
    sandwich when ``clusters`` gives each vote's cluster label; ValueError when the votes admit no
    finite rating, naming why."""
    models = sorted(set(model_a) | set(model_b))
    a, b, o = list(model_a), list(model_b), list(outcome)
    counts = pairwise.from_battles(models, a, b, o)
    grouped = None if clusters is None else pairwise.vote_clusters(counts, a, b, o, list(clusters))
    return pairwise.rate(counts, clusters=grouped, **options)


def _default_cluster_key() -> clustered.ClusterKey:
    from . import protocol  # the package is loaded before its submodules

    return protocol.cluster_key


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
    ci: str = "sandwich",
    rounds: int = N_BOOT,
    cluster_key: clustered.ClusterKey | str = "protocol",
) -> dict[str, Any]:
    """{"rows": leaderboard rows, "pairwise": the fit's figures (tie parameter, win-rate and battle
    matrices, method, clusters), "notes": [...]} (see the module). Rows carry ``model``, ``n``
    (battles), ``metrics`` (rating, win_rate, battles, ties, both_bad), ``ci`` (rating), ``se``,
    ``se_clustered``, ``design_effect`` (rating) and ``breakdowns``. ``ci``: "sandwich" or
    "bootstrap" (``rounds``); ``cluster_key``: the payload field clustering the votes (the
    protocol's by default; None: votes independent)."""
    key = _default_cluster_key() if cluster_key == "protocol" else cluster_key
    options: dict[str, Any] = {"method": ci}
    if ci == "bootstrap":
        options["rounds"] = rounds
    a, b, outcome = battles(items, votes, HEADLINE_CRITERION)
    notes: list[str] = []
    if len(set(a) | set(b)) < 2:
        return {"rows": [], "pairwise": None, "notes": ["no votes on verified items yet"]}
    labels = None if key is None else battle_clusters(items, votes, HEADLINE_CRITERION, key)
    try:
        fitted = ratings(a, b, outcome, clusters=labels, flip=True, **options)
    except ValueError as exc:
        notes.append(f"no ratings: {exc}")
        rows, figures = _counts_only(a, b, outcome), None
    else:
        rows = [{**row, **fitted.errors(row["model"])} for row in fitted.rows()]
        figures = {k: v for k, v in fitted.to_json().items() if k != "rows"}
        flip = fitted.flip
        if flip is not None and flip.votes is not None:
            notes.append(
                f"{flip.votes} vote{'s' if flip.votes != 1 else ''} would have to change for {flip.challenger} "
                f"to rate above {flip.top}"
            )
    by_model = {row["model"]: row for row in rows}
    for row in rows:
        row.update(parse_failures=0, breakdowns={})
        for errors in ("se", "se_clustered", "design_effect"):
            row.setdefault(errors, {})
    for criterion in criteria:
        if criterion == HEADLINE_CRITERION:
            continue
        ca, cb, co = battles(items, votes, criterion)
        if not co:
            continue
        try:
            per = ratings(
                ca, cb, co, clusters=None if key is None else battle_clusters(items, votes, criterion, key), **options
            )
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
