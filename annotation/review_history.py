"""An item's decisions as the review page lists them (selectors.item_review_detail): who decided
what and when; for an edit, the annotation it started from (Review.source_annotation_id), named
even after that annotation left the analysis; for a decision that a participant's rejection voided
(an ItemReopening names it), that it was voided and why, without its answer: that answer no
longer stands (it was the rejected participant's, or rested on it), and the item's payload no
longer carries it either (studies/reopen.py)."""

from __future__ import annotations

from .models import Annotation, ExcludedAnnotation, ItemReopening


def _annotators(item, ids: set[int]) -> dict[int, dict]:
    """annotation id -> {"annotator", "excluded"}: the item's annotations, and those excluded."""
    if not ids:
        return {}
    out = {
        pk: {"annotator": username or rater, "excluded": False}
        for pk, username, rater in Annotation.objects.filter(item=item, pk__in=ids).values_list(
            "pk", "annotator__username", "external_rater"
        )
    }
    out.update(
        {
            pk: {"annotator": username, "excluded": True}
            for pk, username in ExcludedAnnotation.objects.filter(item=item, annotation_id__in=ids).values_list(
                "annotation_id", "participant__user__username"
            )
        }
    )
    return out


def review_history(*, item) -> list[dict]:
    """The item's reviews, oldest first."""
    reviews = list(item.reviews.select_related("reviewer").order_by("created_at", "pk"))
    voided = {r.review_id: r for r in ItemReopening.objects.filter(item=item, review__isnull=False)}
    names = _annotators(item, {r.source_annotation_id for r in reviews if r.source_annotation_id is not None})
    out = []
    for r in reviews:
        reopening = voided.get(r.pk)
        source = r.source_annotation_id
        out.append(
            {
                "decision": r.decision,
                "reviewer": r.reviewer.username if r.reviewer else None,
                "annotation": r.accepted_annotation_id,
                "started_from": None
                if source is None
                else {"annotation": source, **names.get(source, {"annotator": None, "excluded": None})},
                "result": None if reopening else r.result,
                "voided": None
                if reopening is None
                else {"reason": reopening.reason, "at": reopening.created_at.isoformat()},
                "comment": r.comment,
                "created_at": r.created_at.isoformat(),
            }
        )
    return out
