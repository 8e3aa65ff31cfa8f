"""OSCBench: people rate text-to-video generations on eight 1–5 criteria; MLLM judges are compared
to them. Rows of its boards are the generators, not models.

Spec: docs/protocols/oscbench.md. Judge prompt: prompts.py; scoring: scoring.py (this folder).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from protocols.base import Protocol

from .fields import CRITERIA, ITEM_FIELDS, NULLABLE, SCENARIOS  # noqa: F401 (scoring.py reads SCENARIOS here)

# A rating of a gold item (its known answer: `gold_scores`, criterion -> expected 1..5 or null for
# N/A) is right when every criterion given is within this many points of the expected score, and
# N/A exactly where N/A is expected. Raters differ by a point on a Likert scale without either
# being wrong; two points apart is a different judgement (the disagreement view's default spread).
GOLD_TOLERANCE = 1

CRITERION_LABELS = {
    "subject": "Subject",
    "object": "Object",
    "action": "Action",
    "osc_accuracy": "State change: accuracy",
    "osc_consistency": "State change: consistency",
    "scene": "Scene",
    "realism": "Realism",
    "aesthetics": "Aesthetics",
}
# The project ships its own wording; a project replaces it with settings["rubric"].
DEFAULT_RUBRIC = {
    "subject": (
        "Does the video show the subject the prompt names (a person, a hand, an animal), looking like it "
        "should? 1 = missing or wrong, 5 = clearly right. N/A when the prompt names no subject."
    ),
    "object": (
        "Does the object that should change appear, recognisable and the right kind? 1 = missing or another "
        "object, 5 = clearly the right object."
    ),
    "action": "Is the action of the prompt carried out on the object? 1 = no such action, 5 = the action as described.",
    "osc_accuracy": (
        "Does the object end in the state the prompt asks for (sliced, melted, folded, ...)? 1 = no change or the "
        "wrong one, 5 = exactly the intended end state."
    ),
    "osc_consistency": (
        "Does the change unfold believably and stay put: no jumps back, no object swapping identity, no state "
        "appearing from nowhere? 1 = incoherent, 5 = smooth and stable."
    ),
    "scene": (
        "Does the setting match the place the prompt describes? 1 = wrong place, 5 = as described. N/A when the "
        "prompt names no scene."
    ),
    "realism": (
        "Would the video pass for real footage: physics, hands, textures, lighting? 1 = clearly synthetic and "
        "broken, 5 = convincing."
    ),
    "aesthetics": "Is the video pleasant to watch: framing, sharpness, colour, no flicker? 1 = poor, 5 = excellent.",
}

METRICS = {
    "subject": (
        "Subject",
        "Semantic adherence: the subject the prompt names is shown (mean 1–5 rating, "
        "normalised to 0–1; N/A is left out).",
    ),
    "object": ("Object", "Semantic adherence: the object the prompt names is shown (normalised mean rating)."),
    "action": ("Action", "Semantic adherence: the action the prompt names is performed (normalised mean rating)."),
    "osc_accuracy": (
        "State-change accuracy",
        "The object ends in the state the prompt asks for (normalised mean rating).",
    ),
    "osc_consistency": (
        "State-change consistency",
        "The change unfolds coherently, without jumps or reversals (normalised mean rating).",
    ),
    "scene": ("Scene", "The scene the prompt names is shown (normalised mean rating; N/A when none is named)."),
    "realism": ("Realism", "Physical and visual plausibility (normalised mean rating)."),
    "aesthetics": ("Aesthetics", "Visual quality (normalised mean rating)."),
    "criteria_mean": (
        "Mean of criteria",
        "Mean of the eight criteria's normalised mean ratings (over the criteria "
        "rated; N/A never counts as 0): the overall score the paper's Figure 3 "
        "ranks generators by, and the correlation page's system level.",
    ),
    "state_change": ("State-change score", "Mean of state-change accuracy and consistency (normalised, 0–1)."),
}


class OSCBench(Protocol):
    name = "oscbench"
    label = "OSCBench (video rating)"
    workflow = "rating"
    media_fields = {"video": "video"}
    item_fields = ITEM_FIELDS
    annotator_fields = ("prompt",)
    answer_kind = "judge"
    query_keys = ("judge",)
    # Video ratings are noisy: three raters per video.
    default_annotations_per_item = 3
    settings_keys = ("rubric",)
    criteria = CRITERIA
    nullable = NULLABLE
    criterion_labels = CRITERION_LABELS
    default_rubric = DEFAULT_RUBRIC
    gold_tolerance = GOLD_TOLERANCE
    metrics = METRICS
    # The state-change score (the benchmark's subject, its Table 4); or the mean of the eight
    # criteria, as the paper's Figure 3 and the correlation page's system level rank generators.
    ranking = ("state_change", "osc_accuracy", "osc_consistency")
    alternative_rankings = {"criteria_mean": ("criteria_mean", "state_change", "osc_accuracy", "osc_consistency")}
    places = 3
    percent = False
    board = "generators"
    cluster_key = "prompt"  # every generator's video of one prompt
    # The authors' prompt splits and videos, rating files and judge output (formats.py).
    formats_module = "formats"
    spec = "docs/protocols/oscbench.md"

    def resolve_queries(
        self, item_id: str, payload: Mapping[str, Any], *, seed: int, vocabulary: Any = None
    ) -> dict[str, dict[str, Any]]:
        return {"judge": {"options": list(CRITERIA), "answer": None}}


protocol = OSCBench()
