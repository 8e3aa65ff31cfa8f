"""M3-Verse's part of its lmms-eval task's utils.py: per question 0 if the predicted set has a wrong
letter, else |P|/|G|; question-weighted means overall, per context, per capability within a
context, hallucination vs factual (docs/protocols/m3verse.md).

Standalone code (standard library only): the exporter appends this file to the generic part,
protocols/kit/lmms_utils.py, and lmms-eval loads the result without StateLab (see that module's
docstring). Answers are read by the generic part (a set of letters); the means are its
question-weighted ones.
"""

from __future__ import annotations

import json
from typing import Any

CAPABILITIES = ("spatial", "temporal", "attribute", "reasoning")
# The paper's Table 2 order, as the leaderboard prints it: Overall; Intra-state average and its
# capabilities; Inter-state likewise; then hallucination and factual (not in Table 2).
METRICS = (
    ("overall",)
    + tuple(key for c in ("intra", "inter") for key in (c, *(f"{c}_{cap}" for cap in CAPABILITIES)))
    + ("hallucination", "factual")
)


def credit(doc: dict, parsed: Any) -> tuple[int, int]:
    """Partial credit |P|/|G|, nothing for a set with a wrong letter."""
    g = {str(t).upper() for t in json.loads(doc["target"])}
    if not parsed:
        return 0, len(g)
    p = {str(x).upper() for x in parsed}
    return (0, len(g)) if p - g else (len(p), len(g))


def groups(meta: dict) -> list[str]:
    context = meta.get("context") or ""
    out = ["overall", context] + [f"{context}_{cap}" for cap in meta.get("capabilities") or []]
    out.append("hallucination" if meta.get("hallucination") else "factual")
    return out
