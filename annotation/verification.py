"""How a settled answer verifies an item: written into the item's payload, by a reviewer
(services.review_decide) or, when the annotators agree, by the submit that completes the item
(queue/submit.py)."""
from __future__ import annotations

from . import agreement
from .canonical import payload_answer
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
