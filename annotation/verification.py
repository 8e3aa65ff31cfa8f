"""How a settled answer verifies an item: written into the item's payload, by a reviewer
(services.review_decide) or, when the annotators agree, by the submit that completes the item
(queue/submit.py). An item whose annotators disagree is marked for adjudication when it becomes
annotated (item_mark_disagreement), so a reviewer settles it first."""
from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from . import agreement
from .canonical import payload_answer
from .disagreement import find_disagreement, thresholds_from
from .models import Annotation, Item, ItemStatus, Review, ReviewDecision


def apply_result_to_payload(workflow: str, payload: dict, result: dict, *, protocol: str | None = None) -> dict:
    """The item payload after a reviewer (or agreeing annotators) settled its answer, in the
    import format (so a verified item exports and re-imports as it is)."""
    out = dict(payload or {})
    if workflow == "quintuplet":
        for name in agreement.QUINTUPLET_FIELDS:
            out[name] = result[name]
    elif workflow == "box":
        # The import format (PROTOCOLS.md, importing/formats.py) keeps both kinds of answer in
        # `bbox`: a box, or "nothing_to_label" / "cannot_determine", so a verified item exports
        # and re-imports as it is. ("outcome" is only the annotation result's key.)
        out.pop("outcome", None)
        if "bbox" in result:
            out["bbox"] = result["bbox"]
            out["state"] = result["state"]
        else:
            out["bbox"] = result["outcome"]
    elif workflow == "qa":
        for name in ("question", "options"):
            if name in result:
                out[name] = result[name]
        out["answer"] = result["answer"]
        if protocol:  # the known answer's stored form (an M3-Verse answer is a list of letters)
            out["answer"] = payload_answer(protocol, out)
    # Ratings stay as annotations: the item payload carries no answer.
    return out


def item_auto_verify(*, item: Item) -> None:
    """Verify an item that just got its last annotation when its annotators agree (the project's
    auto_verify setting): the consensus goes into the payload and an AUTO review records it."""
    workflow = item.project.workflow
    annotations = Annotation.objects.filter(item=item)
    if workflow == "qa" and annotations.filter(with_suggestion=True).exists():
        return  # annotators agreeing on a pre-filled model answer is no blind consensus: a reviewer decides
    results = list(annotations.order_by("pk").values_list("result", flat=True))
    if not agreement.results_agree(workflow, results):
        return
    merged = agreement.consensus_result(workflow, results)
    item.payload = apply_result_to_payload(workflow, item.payload, merged, protocol=item.project.protocol)
    item.status = ItemStatus.VERIFIED
    item.save(update_fields=["payload", "status", "updated_at"])
    Review.objects.create(item=item, reviewer=None, decision=ReviewDecision.AUTO, result=merged,
                          comment="Annotators agree.")


def items_mark_disagreement(*, project, item_ids: Iterable[int], chunk_size: int = 2000) -> int:
    """Store (or clear) `Item.disagreement` of those of these items that are annotated (gold items
    never are), from their annotations and the project's thresholds; returns how many are marked.
    Called when items become annotated by an import; a submit or an amendment marks its one item
    (item_mark_disagreement). Items already verified or discarded keep what they had."""
    ids = sorted(set(item_ids))
    thresholds = thresholds_from(project.settings)
    marked = 0
    for start in range(0, len(ids), chunk_size):
        open_ids = list(Item.objects.filter(pk__in=ids[start:start + chunk_size], project=project,
                                            status=ItemStatus.ANNOTATED, is_gold=False).values_list("pk", flat=True))
        per_item: dict[int, list[tuple[int, dict]]] = defaultdict(list)
        for item_id, pk, result in (Annotation.objects.filter(item_id__in=open_ids).order_by("item_id", "pk")
                                    .values_list("item_id", "pk", "result")):
            per_item[item_id].append((pk, result))
        rows, cleared = [], []
        for pk in open_ids:
            found = find_disagreement(project.workflow, per_item.get(pk, []), thresholds)
            if found is None:
                cleared.append(pk)
            else:
                rows.append(Item(pk=pk, disagreement=found))
        # Cleared with one UPDATE: SQL NULL (not the JSON null a bulk_update might write).
        Item.objects.filter(pk__in=cleared, disagreement__isnull=False).update(disagreement=None)
        Item.objects.bulk_update(rows, ["disagreement"], batch_size=1000)
        marked += len(rows)
    return marked


def item_mark_disagreement(*, item: Item) -> dict | None:
    """Mark one item as items_mark_disagreement does (the caller holds the item, locked, with its
    current status) and return what was stored: one read of its annotations, one write if changed."""
    found = None
    if item.status == ItemStatus.ANNOTATED and not item.is_gold:
        project = item.project
        annotations = list(Annotation.objects.filter(item_id=item.pk).order_by("pk").values_list("pk", "result"))
        found = find_disagreement(project.workflow, annotations, thresholds_from(project.settings))
    if found != item.disagreement:
        Item.objects.filter(pk=item.pk).update(disagreement=found)
        item.disagreement = found
    return found
