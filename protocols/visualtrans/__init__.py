"""VisualTrans: questions on an object's transformation, verified blind by annotators (QA form).

Spec: docs/protocols/visualtrans.md. Prompts: prompts.py; scoring: scoring.py (this folder).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from protocols.base import Protocol

from .fields import ITEM_FIELDS
from .fields import SUBTASKS as SUBTASKS  # re-exported: protocols/visualtrans/scoring.py

DIMENSIONS = {
    "spatial": ("fine_grained", "global"),
    "procedural": ("intermediate", "causal", "planning"),
    "quantitative": ("quantitative",),
}

METRICS = {
    "fine_grained": (
        "Fine-grained",
        "Accuracy on fine-grained spatial questions (details of the objects that changed).",
    ),
    "global": ("Global", "Accuracy on global spatial questions (the scene as a whole)."),
    "spatial_mean": (
        "Spatial (mean)",
        "Spatial dimension: mean of the fine-grained and global accuracies, each as printed (two decimals).",
    ),
    "intermediate": (
        "Intermediate",
        "Accuracy on intermediate-state questions (what lies between the initial and final images).",
    ),
    "causal": ("Causal", "Accuracy on causal questions (what made the change happen)."),
    "planning": ("Planning", "Accuracy on planning questions (the steps that lead from initial to final)."),
    "procedural_mean": (
        "Procedural (mean)",
        "Procedural dimension: mean of the intermediate, causal and planning accuracies the model could answer.",
    ),
    "quantitative": ("Quantitative", "Accuracy on quantitative questions (counts and amounts)."),
    "overall": ("Overall", "Correct answers over all questions; a subtask the model cannot answer counts as wrong."),
}


class VisualTrans(Protocol):
    name = "visualtrans"
    label = "VisualTrans (image QA)"
    workflow = "qa"
    media_fields = {"images": "images"}
    item_fields = ITEM_FIELDS
    annotator_fields = ("question",)
    answer_kind = "qa"
    query_keys = ("qa",)
    settings_keys = ("suggestions",)
    metrics = METRICS
    # Overall accuracy: the last column of the paper's Table 2, the figure its text compares.
    ranking = ("overall", "spatial_mean", "procedural_mean", "quantitative")
    human_row = True
    cluster_key = "scene"  # the questions of one scene share its images
    spec = "docs/protocols/visualtrans.md"
    lmms_module = "lmms"  # its lmms-eval task: lmms.py, scoring in lmms_utils.py
    formats_module = "formats"  # the authors' files, read and written back: formats.py

    def known_answer_form(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        return {"fmt": payload.get("format") or "choice"}

    def resolve_queries(
        self, item_id: str, payload: Mapping[str, Any], *, seed: int, vocabulary: Any = None
    ) -> dict[str, dict[str, Any]]:
        return {
            "qa": {
                "options": list(payload.get("options") or []),
                "answer": payload.get("answer"),
                "format": payload.get("format"),
            }
        }


protocol = VisualTrans()
