"""STATUS's part of its lmms-eval task's utils.py: Acc / RAcc for OSI, IR, SCI, OA and ROA over
the six queries of each item (docs/protocols/status.md).

Standalone code (standard library only): the exporter appends this file to the generic part,
protocols/kit/lmms_utils.py, leaving out the import of it below, and lmms-eval loads the result
without StateLab (see that module's docstring). Answers are read and judged by the generic part
(a letter each).
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

from protocols.kit.lmms_utils import percent

# Per metric, what one item adds (from its six queries' credit) and out of how many; the metric is
# the sum over items divided by that many times the item count.
_PER_ITEM = {
    "acc_osi": (lambda x: x["osi_a"] + x["osi_b"], 2),
    "acc_ir": (lambda x: x["ir_a"] + x["ir_b"], 2),
    "acc_sci": (lambda x: x["sci2"], 1),
    "oa": (lambda x: x["osi_a"] + x["osi_b"] + x["ir_a"] + x["ir_b"] + 2 * x["sci2"], 6),
    "racc_osi": (lambda x: x["osi_a"] & x["osi_b"], 1),
    "racc_ir": (lambda x: x["ir_a"] & x["ir_b"], 1),
    "racc_sci": (lambda x: x["sci4"], 1),
    "roa": (lambda x: x["osi_a"] & x["osi_b"] & x["ir_a"] & x["ir_b"] & x["sci4"], 1),
}
METRICS = tuple(_PER_ITEM)
QUERIES = ("osi_a", "osi_b", "ir_a", "ir_b", "sci2", "sci4")


def item_share(records: list[dict], key: str) -> Fraction | None:
    items: dict[str, dict[str, int]] = {}
    for r in records:
        items.setdefault(r["id"], {})[r["query"]] = r["num"]
    if not items:
        return None
    per_item, out_of = _PER_ITEM[key]  # an unknown key raises KeyError(key)
    credits = [{q: row.get(q, 0) for q in QUERIES} for row in items.values()]
    return Fraction(sum(per_item(x) for x in credits), out_of * len(items))


def printed(records: list[dict], key: str) -> Decimal | None:
    value = item_share(records, key)
    return None if value is None else percent(value)
