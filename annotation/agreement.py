"""Agreement statistics for the four workflows, and for a protocol's own form the values its module
compares (annotation/protocols.py, "A workflow of its own"). Plain Python, no Django.

Inputs are plain results as stored in `Annotation.result` (see annotation/results.py). Every
function here is deterministic and side-effect free so the same numbers can be recomputed from
an export in a notebook.

A quintuplet's fields, and which of them are closed, are the protocol's (protocols/base.py:
result_fields, result_choices): a function takes the project's protocol name as `protocol`;
left out, those of every registered quintuplet protocol (annotation.protocols.quintuplet_fields).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Sequence
from itertools import combinations, groupby
from typing import Any

from protocols.normalize import answer_text, description_text

from .protocols import (
    compared_values,
    custom_workflow,
    quintuplet_choices,
    quintuplet_fields,
    rating_criteria,
    rating_gold_tolerance,
)
from .reliability import CoincidenceMatrix


def median(values: Sequence[float]) -> float | None:
    ordered = sorted(values)
    n = len(ordered)
    if not n:
        return None
    mid = n // 2
    return float(ordered[mid]) if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def median_seconds(milliseconds: Iterable[int]) -> float | None:
    value = median([ms / 1000 for ms in milliseconds])
    return None if value is None else round(value, 3)


# --- boxes --------------------------------------------------------------------------------


def box_iou(a: Sequence[float], b: Sequence[float]) -> float:
    """Intersection over union of two [x, y, width, height] boxes."""
    ax0, ay0, aw, ah = a
    bx0, by0, bw, bh = b
    iw = min(ax0 + aw, bx0 + bw) - max(ax0, bx0)
    ih = min(ay0 + ah, by0 + bh) - max(ay0, by0)
    inter = max(0.0, iw) * max(0.0, ih)
    union = aw * ah + bw * bh - inter
    return inter / union if union > 0 else 0.0


BOX_CONSISTENT_IOU = 0.5


def box_pair(r1: dict, r2: dict) -> tuple[float | None, bool]:
    """(IoU or None when not both drew a box, consistent?) for two box results.

    Two boxes are consistent at IoU >= 0.5 with the same state label; two answers without a box
    are consistent when they give the same outcome; a box against an outcome never is.
    """
    if "bbox" in r1 and "bbox" in r2:
        iou = box_iou(r1["bbox"], r2["bbox"])
        return iou, iou >= BOX_CONSISTENT_IOU and r1.get("state") == r2.get("state")
    if "bbox" in r1 or "bbox" in r2:
        return 0.0, False
    return None, r1.get("outcome") == r2.get("outcome")


def box_summary(items: Iterable[Sequence[dict]]) -> dict[str, Any]:
    """Mean IoU over annotator pairs that both drew a box; share of items whose pairs all agree."""
    return _summarize("box", items)


# --- blind QA -----------------------------------------------------------------------------


def normalize_qa_answer(answer: Any) -> Hashable:
    """The key two answers are compared by: letters upper-cased, integers parsed, texts and sets
    as sorted tuples of their ``answer_text`` forms (protocols.normalize: the answer rule that
    scoring uses too, so a blind answer that agrees with the truth here is right on the board).

    Stored answers share one form (annotation.canonical), but a comparison still needs a key: a
    truth stored as a list of letters (multi-answer questions) meets a single-answer submit of one
    letter, and set answers match whatever their order and case. Raw spellings ("b", "A, C", "07")
    are still read alike, so the figures recomputed in a notebook from a frozen release's export
    (which keeps the spelling it was frozen with) are the platform's."""
    if answer is None:
        return None
    if isinstance(answer, bool):
        return str(answer)
    if isinstance(answer, int):
        return answer
    if isinstance(answer, str):
        text = answer.strip()
        if re.fullmatch(r"-?\d+", text):
            return int(text)
        if re.fullmatch(r"[A-Za-z]", text):
            return (text.upper(),)
        if "," in text:
            return normalize_qa_answer(text.split(","))
        return normalize_qa_answer([text])
    if isinstance(answer, (list, tuple)):
        parts = [str(v).strip() for v in answer if str(v).strip()]
        if parts and all(re.fullmatch(r"[A-Za-z]", p) for p in parts):
            return tuple(sorted(p.upper() for p in parts))
        return tuple(sorted(t for t in (answer_text(p) for p in parts) if t))
    return repr(answer)


def qa_correct(answer: Any, truth: Any) -> bool:
    return answer is not None and normalize_qa_answer(answer) == normalize_qa_answer(truth)


def qa_answers_agree(a: Any, b: Any) -> bool:
    """Two blind answers agree when both are given and equal after normalization. A missing
    answer (None) agrees with nothing, not even another missing one: the one rule for the
    summary, the per-annotator rows, auto-verification and the review highlights."""
    return a is not None and b is not None and normalize_qa_answer(a) == normalize_qa_answer(b)


def qa_summary(items: Iterable[tuple[Any, Sequence[Any]]]) -> dict[str, Any]:
    """items: (final truth or None, blind answers). Accuracy vs truth and pairwise agreement."""
    acc = ProjectAgreement("qa")
    for truth, answers in items:
        acc.add_item([(str(n), {"answer": a}) for n, a in enumerate(answers)], truth=truth)
    return acc.summary()


# --- quintuplets --------------------------------------------------------------------------

QUINTUPLET_TEXT_FIELDS = ("state_a", "state_b", "change")


def quintuplet_field_value(result: dict, field: str) -> Hashable:
    value = result.get(field)
    if field == "change_distractors":
        return tuple(sorted(description_text(v) for v in value or []))
    if field in QUINTUPLET_TEXT_FIELDS:
        return description_text(value)
    return value


def quintuplet_summary(items: Iterable[Sequence[dict]]) -> dict[str, Any]:
    """Per field: share of annotator pairs whose normalized values are equal."""
    return _summarize("quintuplet", items)


# --- ratings: Krippendorff's alpha (annotation.reliability) ---------------------------------


def rating_summary(items: Iterable[Sequence[dict]], criteria: Sequence[str] | None = None) -> dict[str, Any]:
    """Per criterion: ordinal alpha over the items with at least two numeric scores, and n
    (criteria: the project's protocol's; by default the rating form's, protocols.rating_criteria)."""
    return _summarize("rating", items, criteria)


# --- pairs, consensus, disagreements ------------------------------------------------------


def __getattr__(name: str) -> Any:
    # QUINTUPLET_FIELDS: the quintuplet form's fields over the registry as it is now.
    if name == "QUINTUPLET_FIELDS":
        return quintuplet_fields()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _quintuplet_agreement(r1: dict, r2: dict, fields: Sequence[str]) -> float | None:
    # Only the fields both answers hold: a labelling pass's answers hold just the fields it asked.
    fields = [f for f in fields if f in r1 and f in r2]
    if not fields:
        return None
    return sum(quintuplet_field_value(r1, f) == quintuplet_field_value(r2, f) for f in fields) / len(fields)


def pair_agreement(workflow: str, r1: dict, r2: dict, *, protocol: str | None = None) -> float | None:
    """0..1 agreement of two annotators on one item (None when there is nothing to compare)."""
    if workflow == "box":
        return 1.0 if box_pair(r1, r2)[1] else 0.0
    if workflow == "qa":
        return 1.0 if qa_answers_agree(r1.get("answer"), r2.get("answer")) else 0.0
    if workflow == "quintuplet":
        return _quintuplet_agreement(r1, r2, quintuplet_fields(protocol))
    if workflow == "rating":
        s1, s2 = r1.get("scores") or {}, r2.get("scores") or {}
        diffs = [abs(s1[c] - s2[c]) for c in s1 if s1.get(c) is not None and s2.get(c) is not None]
        return 1 - sum(diffs) / (4 * len(diffs)) if diffs else None
    if custom_workflow(workflow) is not None:
        return _custom_agreement(workflow, r1, r2, protocol)
    raise ValueError(f"unknown workflow {workflow!r}")


def _custom_agreement(workflow: str, r1: dict, r2: dict, protocol: str | None) -> float | None:
    """A protocol's own form: the share of the values both gave (its ``compared``) that are equal."""
    v1, v2 = compared_values(workflow, r1, protocol), compared_values(workflow, r2, protocol)
    both = [k for k in v1 if v1[k] is not None and v2.get(k) is not None]
    return sum(v1[k] == v2[k] for k in both) / len(both) if both else None


def results_agree(workflow: str, results: Sequence[dict], *, protocol: str | None = None) -> bool:
    """Whether every annotator pair agrees fully (the condition for auto-verification)."""
    if len(results) < 2:
        return False
    if workflow == "qa" and any(r.get("flags") for r in results):
        return False
    if workflow == "rating":
        # Raters agree when no criterion spreads more than one point and N/A is unanimous.
        for c in {c for r in results for c in (r.get("scores") or {})}:
            vals = [(r.get("scores") or {}).get(c) for r in results]
            if any(v is None for v in vals) and not all(v is None for v in vals):
                return False
            nums = [v for v in vals if v is not None]
            if nums and max(nums) - min(nums) > 1:
                return False
        return True
    return all(pair_agreement(workflow, a, b, protocol=protocol) == 1.0 for a, b in combinations(results, 2))


def consensus_result(workflow: str, results: Sequence[dict]) -> dict:
    """The merged answer of agreeing annotators: boxes averaged, otherwise the first result."""
    first = dict(results[0])
    if workflow == "box" and "bbox" in first:
        boxes = [r["bbox"] for r in results]
        first["bbox"] = [round(sum(b[i] for b in boxes) / len(boxes), 2) for i in range(4)]
    return first


def _field_values(workflow: str, result: dict, protocol: str | None = None) -> dict[str, Any]:
    if workflow == "quintuplet":
        return {f: result.get(f) for f in quintuplet_fields(protocol)}
    if workflow == "box":
        if "bbox" in result:
            return {"bbox": result["bbox"], "state": result.get("state"), "outcome": None}
        return {"bbox": None, "state": None, "outcome": result.get("outcome")}
    if workflow == "qa":
        return {"answer": result.get("answer"), "flags": result.get("flags", [])}
    if workflow == "rating":
        return {f"scores.{c}": v for c, v in (result.get("scores") or {}).items()}
    if custom_workflow(workflow) is not None:
        return compared_values(workflow, result, protocol)
    raise ValueError(f"unknown workflow {workflow!r}")


def field_disagreements(
    workflow: str, annotations: Sequence[tuple[int, dict]], *, protocol: str | None = None
) -> dict[str, Any]:
    """Per field: each annotation's value and whether they all agree (after normalization).

    Boxes agree when every pair has IoU >= 0.5 (min_iou is given); ratings agree when they
    spread at most one point; text fields compare after `description_text` (protocols.normalize).
    """
    per_field: dict[str, list[tuple[int, Any]]] = defaultdict(list)
    for annotation_id, result in annotations:
        for field, value in _field_values(workflow, result, protocol).items():
            per_field[field].append((annotation_id, value))
    out: dict[str, Any] = {}
    for field, pairs in per_field.items():
        values = [v for _, v in pairs]
        entry: dict[str, Any] = {"values": [{"annotation": a, "value": v} for a, v in pairs]}
        if workflow == "box" and field == "bbox":
            boxes = [v for v in values if v is not None]
            ious = [box_iou(a, b) for a, b in combinations(boxes, 2)]
            entry["min_iou"] = round(min(ious), 4) if ious else None
            agree = (len(boxes) == len(values)) and all(i >= BOX_CONSISTENT_IOU for i in ious) if boxes else True
        elif workflow == "rating":
            nums = [v for v in values if v is not None]
            agree = (not nums or max(nums) - min(nums) <= 1) and (len(nums) in (0, len(values)))
        elif workflow == "quintuplet":
            agree = len({quintuplet_field_value({field: v}, field) for v in values}) <= 1
        elif workflow == "qa" and field == "answer":
            agree = all(qa_answers_agree(a, b) for a, b in combinations(values, 2))
        else:
            agree = len({repr(v) for v in values}) <= 1
        entry["agree"] = bool(agree)
        out[field] = entry
    return out


# --- gold ---------------------------------------------------------------------------------


def gold_correct(
    workflow: str, payload: dict, result: dict, *, tolerance: int | None = None, protocol: str | None = None
) -> bool | None:
    """Whether an annotation matches a gold item's known answer (None when the item has none).
    tolerance: how far a rating may lie from an expected score (the project's protocol's
    gold_tolerance; by default protocols.rating_gold_tolerance)."""
    if workflow == "qa":
        if payload.get("answer") is None:
            return None
        return qa_correct(result.get("answer"), payload["answer"])
    if workflow == "box":
        if isinstance(payload.get("bbox"), str):  # the import format's "nothing_to_label" / "cannot_determine"
            return result.get("outcome") == payload["bbox"]
        if "bbox" in payload:
            return "bbox" in result and box_pair(result, {"bbox": payload["bbox"], "state": payload.get("state")})[1]
        if payload.get("outcome"):
            return result.get("outcome") == payload["outcome"]
        if payload.get("state"):
            return result.get("state") == payload["state"]
        return None
    if workflow == "quintuplet":
        known = [f for f in quintuplet_fields(protocol) if payload.get(f) is not None]
        if not known:
            return None
        # Free text is written differently by every annotator; gold checks the closed fields.
        closed = [f for f in quintuplet_choices(protocol) if f in known] or known
        return all(quintuplet_field_value(result, f) == quintuplet_field_value(payload, f) for f in closed)
    if workflow == "rating":
        gold = payload.get("gold_scores")
        if not gold:
            return None
        scores = result.get("scores") or {}
        tolerance = rating_gold_tolerance() if tolerance is None else tolerance
        return all(
            (v is None and scores.get(c) is None)
            or (v is not None and scores.get(c) is not None and abs(scores[c] - v) <= tolerance)
            for c, v in gold.items()
        )
    if (custom := custom_workflow(workflow)) is not None:
        # A protocol's own form checks its gold answers if it has any (its module's gold_correct).
        check = getattr(custom, "gold_correct", None)
        return None if check is None else check(payload, result)
    raise ValueError(f"unknown workflow {workflow!r}")


# --- a whole project, streamed item by item -------------------------------------------------

NO_TRUTH = object()


class ProjectAgreement:
    """The workflow summary and each annotator's pairwise agreement of one project, built one item
    at a time so a caller can stream annotations (ordered by item) without holding them all.

    add_item(entries, truth): entries are (annotator, result) of one item; truth is the item's
    final QA answer (verified items only) or left out. The *_summary functions above are this
    class fed from a list, so both give the same numbers.
    """

    def __init__(self, workflow: str, criteria: Sequence[str] | None = None, *, protocol: str | None = None):
        # A protocol's own form: nominal α per value its module compares (annotation/protocols.py).
        self.custom = None if workflow in ("box", "qa", "quintuplet", "rating") else custom_workflow(workflow)
        if workflow not in ("box", "qa", "quintuplet", "rating") and self.custom is None:
            raise ValueError(f"unknown workflow {workflow!r}")
        self.protocol = protocol
        self.workflow = workflow
        if self.custom is not None and criteria is None:
            criteria = tuple(compared_values(workflow, {}, protocol))
        # A quintuplet project's fields: its protocol's; by default every quintuplet protocol's.
        self.fields = quintuplet_fields(protocol) if workflow == "quintuplet" else ()
        # A rating project's criteria: its protocol's; by default the rating form's (every rating protocol's).
        self.criteria = tuple(rating_criteria() if criteria is None else criteria)
        self.items = 0  # items with at least two annotations
        self.pairs = 0
        self.agree = 0  # qa: pairs that agree
        self.field_agree: Counter = Counter()  # quintuplet
        self.iou_sum, self.iou_n, self.consistent = 0.0, 0, 0  # box
        self.scored = self.correct = 0  # qa against the final truth
        self.coincidences = {c: CoincidenceMatrix() for c in self.criteria}  # rating
        self.rated_items: Counter = Counter()  # rating: items with >= 2 scores per criterion
        self._annotator_sum: dict[str, float] = defaultdict(float)
        self._annotator_pairs: Counter = Counter()

    def add_item(self, entries: Sequence[tuple[str, dict]], truth: Any = NO_TRUTH) -> None:
        workflow = self.workflow
        results = [r for _, r in entries]
        for (a, ra), (b, rb) in combinations(entries, 2):
            if workflow == "quintuplet":
                score = _quintuplet_agreement(ra, rb, self.fields)
            else:
                score = pair_agreement(workflow, ra, rb, protocol=self.protocol)
            if score is not None:
                self._annotator_sum[a] += score
                self._annotator_sum[b] += score
                self._annotator_pairs[a] += 1
                self._annotator_pairs[b] += 1
        if workflow == "qa":
            answers = [r.get("answer") for r in results]
            if truth is not NO_TRUTH and truth is not None:
                self.scored += len(answers)
                self.correct += sum(qa_correct(answer, truth) for answer in answers)
            for a, b in combinations(answers, 2):
                self.pairs += 1
                self.agree += qa_answers_agree(a, b)
        elif workflow == "box":
            if len(results) < 2:
                return
            self.items += 1
            pairs = [box_pair(a, b) for a, b in combinations(results, 2)]
            for iou, _ok in pairs:
                if iou is not None:
                    self.iou_sum += iou
                    self.iou_n += 1
            self.consistent += all(ok for _, ok in pairs)
        elif workflow == "quintuplet":
            for a, b in combinations(results, 2):
                self.pairs += 1
                for name in self.fields:
                    self.field_agree[name] += quintuplet_field_value(a, name) == quintuplet_field_value(b, name)
        else:
            custom = self.custom
            values = [compared_values(workflow, r, self.protocol) for r in results] if custom else None
            for criterion in self.criteria:
                if values is not None:
                    unit = [v.get(criterion) for v in values]
                else:
                    unit = [(r.get("scores") or {}).get(criterion) for r in results]
                if sum(v is not None for v in unit) >= 2:
                    self.rated_items[criterion] += 1
                    self.coincidences[criterion].add_unit(unit)

    def annotator_agreement(self, annotator: str) -> tuple[float | None, int]:
        """(mean pairwise agreement rounded to 4 places or None, number of pairs) of one annotator."""
        pairs = self._annotator_pairs[annotator]
        return (round(self._annotator_sum[annotator] / pairs, 4) if pairs else None), pairs

    def summary(self) -> dict[str, Any]:
        if self.workflow == "box":
            return {
                "items": self.items,
                "pairs_with_boxes": self.iou_n,
                "mean_iou": round(self.iou_sum / self.iou_n, 4) if self.iou_n else None,
                "consistent_share": round(self.consistent / self.items, 4) if self.items else None,
                "consistent_at": BOX_CONSISTENT_IOU,
            }
        if self.workflow == "qa":
            return {
                "answers_scored": self.scored,
                "accuracy": round(self.correct / self.scored, 4) if self.scored else None,
                "pairs": self.pairs,
                "pairwise_agreement": round(self.agree / self.pairs, 4) if self.pairs else None,
            }
        if self.workflow == "quintuplet":
            pairs = self.pairs
            return {
                "pairs": pairs,
                "fields": {f: (round(self.field_agree[f] / pairs, 4) if pairs else None) for f in self.fields},
            }
        out: dict[str, Any] = {}
        level = "nominal" if self.custom is not None else "ordinal"
        for criterion in self.criteria:
            alpha = self.coincidences[criterion].alpha(level)
            out[criterion] = {
                "alpha": None if alpha is None else round(alpha, 4),
                "n_items": self.rated_items[criterion],
            }
        return {"criteria": out}


def _summarize(workflow: str, items: Iterable[Sequence[dict]], criteria: Sequence[str] | None = None) -> dict[str, Any]:
    acc = ProjectAgreement(workflow, criteria)
    for results in items:
        acc.add_item([(str(n), r) for n, r in enumerate(results)])
    return acc.summary()


def group_by_item(rows: Iterable[Sequence[Any]]) -> Iterable[tuple[Any, list[Sequence[Any]]]]:
    """(item id, its rows) from rows ordered by item id (first column), one item in memory at a time."""
    for item_id, group in groupby(rows, key=lambda row: row[0]):
        yield item_id, list(group)
