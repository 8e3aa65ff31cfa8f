"""VisualTrans's part of its lmms-eval task's utils.py: exact match per question; subtask accuracy;
dimension mean = mean of the printed subtask values (decimal arithmetic, half up) over the subtasks
present; overall over all questions (docs/protocols/visualtrans.md).

Standalone code (standard library only): the exporter appends this file to the generic part,
protocols/kit/lmms_utils.py, leaving out the import of it below, and lmms-eval loads the result
without StateLab (see that module's docstring). Answers are read and judged by the generic part,
by each question's format (choice, count or set).
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, localcontext

from protocols.kit.lmms_utils import mean_printed

DIMENSIONS = {
    "spatial_mean": ("fine_grained", "global"),
    "procedural_mean": ("intermediate", "causal", "planning"),
}
# The leaderboard's order: each dimension's subtasks, then its mean; then quantitative and overall.
METRICS = (
    *(key for dimension, subtasks in DIMENSIONS.items() for key in (*subtasks, dimension)),
    "quantitative",
    "overall",
)


def groups(meta: dict) -> list[str]:
    return ["overall", meta.get("subtask") or ""]


def printed(records: list[dict], key: str) -> Decimal | None:
    if key not in DIMENSIONS:
        return mean_printed(records, key)
    subs = [printed(records, s) for s in DIMENSIONS[key]]
    avail = [s for s in subs if s is not None]
    if not avail:
        return None
    with localcontext() as ctx:
        ctx.prec = 50
        return (sum(avail, Decimal(0)) / Decimal(len(avail))).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
