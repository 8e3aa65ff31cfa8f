"""Arena: people compare two outputs of one prompt (videos or images, from two models) and vote
which is better, or a tie, or both bad; the board rates the models from the votes (Bradley–Terry
with Davidson ties). Rows of its board are the models whose outputs were compared, not models
answering questions: the arena needs no predictions.

Spec: docs/protocols/arena.md. The form: workflow.py; the votes made elsewhere: formats.py; the
board: scoring.py (this folder).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from protocols.base import Protocol

from .fields import CRITERION_LABELS, ITEM_FIELDS, VOTE_CRITERIA

METRICS = {
    "rating": (
        "Rating",
        "Bradley–Terry rating with Davidson ties on the Elo scale (400/ln 10 per unit of log-strength), the "
        "models' mean 1000, from the votes on the outputs as a whole; 95 % sandwich interval.",
    ),
    "win_rate": ("Win rate", "Share of the model's battles it won, ties and “both bad” counted as half a win."),
    "battles": ("Battles", "Votes on a pair the model was part of."),
    "ties": ("Ties", "Votes of the model's battles that called the two outputs equally good."),
    "both_bad": ("Both bad", "Votes of the model's battles that found both outputs bad (a tie for the fit)."),
}


class Arena(Protocol):
    name = "arena"
    label = "Arena (pairwise votes)"
    workflow = "pairwise"
    # The form of its own (workflow.py): the apps reach it through annotation/protocols.py.
    workflow_module = "workflow"
    matchmaking_module = "matchmaking"  # the queue hands out the most informative pairs first
    judging_module = "judging"  # the statistics of pairwise MLLM judges (the "Judges" page)
    media_fields = {"video_a": "video", "video_b": "video", "image_a": "image", "image_b": "image"}
    item_fields = ITEM_FIELDS
    annotator_fields = ("prompt",)
    default_annotations_per_item = 3
    criteria = VOTE_CRITERIA
    criterion_labels = CRITERION_LABELS
    metrics = METRICS
    ranking = ("rating", "win_rate")
    places = 2
    percent = False
    board = "votes"
    cluster_key = "prompt"
    formats_module = "formats"
    # An MLLM judge asks each pair twice, sides swapped (prompts.py JUDGE_KEYS; judging.py reads them).
    query_keys = ("judge_ab", "judge_ba")
    spec = "docs/protocols/arena.md"
    # Its own project settings (project_settings.py): the raters a researcher left out of the board
    # (integrity.py, evaluation/rater_exclusion.py) and the least viewing time of a vote (viewing.py).
    settings_keys = ("arena_excluded_raters", "arena_min_view_seconds")
    settings_module = "project_settings"
    rater_screen_module = "integrity"  # the per-rater consistency screen and exclusions of the board

    def resolve_queries(
        self, item_id: str, payload: Mapping[str, Any], *, seed: int, vocabulary: Any = None
    ) -> dict[str, dict[str, Any]]:
        from .prompts import resolved_queries  # the judge's options; loaded on first use only

        return resolved_queries()


protocol = Arena()
