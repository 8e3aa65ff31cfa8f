"""An annotator's own recent work: their submissions in a project, newest first, and amending one
while its item is not reviewed yet (an annotator may correct a mistake until a reviewer has seen it).

An amendment goes through the submit's validation (results.validate_result with the item's
context) and replaces the annotation's result in place, so agreement, review, auto-verification,
releases and exports read the amended answer with no change of theirs; what it replaced is kept
as an AnnotationRevision row. Once a reviewer (or auto-verification) settled the item, the answer
is part of a decision and an amendment is refused with a message.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Count, Exists, OuterRef
from django.utils import timezone

from .audit.record import audit_record
from .models import Annotation, AnnotationRevision, AuditAction, Item, ItemStatus, Project, Review, Suggestion
from .project_setup import project_setting
from .protocols import custom_workflow, rating_criteria
from .queue.errors import TaskConflict, TaskNotFound
from .results import validate_result
from .selectors import annotator_item_payload, result_context_for, shows_suggestions
from .verification import item_auto_verify, item_mark_disagreement, project_marking_lock_shared

OPEN_STATUSES = (ItemStatus.PENDING, ItemStatus.ANNOTATED)
RECENT_LIMIT = 20


def _summary(workflow: str, result: dict, criteria: tuple[str, ...] = ()) -> str:
    """One line a person recognises their answer by (criteria: a rating form's, in its order)."""
    if workflow == "quintuplet":
        return f"{result.get('state_a', '')} → {result.get('state_b', '')}"
    if workflow == "box":
        return result.get("outcome") or f"{result.get('state', '')} {result.get('bbox', '')}"
    if workflow == "qa":
        answer = result.get("answer")
        text = ", ".join(map(str, answer)) if isinstance(answer, list) else ("—" if answer is None else str(answer))
        flags = result.get("flags") or []
        return text + (f" (flags: {', '.join(flags)})" if flags else "")
    if workflow == "rating":
        scores = result.get("scores") or {}
        ordered = [scores[c] for c in criteria if c in scores]  # (jsonb keeps its own key order)
        return " ".join("N/A" if v is None else str(v) for v in ordered)
    custom = custom_workflow(workflow)  # a protocol's own form (annotation/protocols.py)
    return custom.summary(result) if custom is not None else ""


def own_recent_annotations(*, user, project: Project, limit: int = RECENT_LIMIT) -> list[dict]:
    """The user's own annotations in `project`, newest first, each saying whether it can still be
    amended. Only their own: never another annotator's answer or the item's known answer."""
    reviewed = Review.objects.filter(item=OuterRef("item"))
    rows = (
        Annotation.objects.filter(annotator=user, item__project=project)
        .annotate(reviewed=Exists(reviewed), n_revisions=Count("revisions"))
        .select_related("item")
        .order_by("-created_at", "-pk")[:limit]
    )
    workflow = project.workflow
    criteria = rating_criteria(project.protocol) if workflow == "rating" else ()
    return [
        {
            "id": a.pk,
            "item": a.item_id,
            "submitted_at": a.created_at,
            "revisions": a.n_revisions,
            "summary": _summary(workflow, a.result, criteria)[:120],
            "amendable": a.item.status in OPEN_STATUSES and not a.reviewed,
            "amend_url": f"/projects/{project.slug}/my-work/{a.pk}/",
        }
        for a in rows
    ]


def own_annotation_for_amending(*, user, annotation_id: int) -> dict:
    """What the amend page shows: the annotator-safe item (as a claim gives it) and their own answer.
    TaskNotFound unless the annotation is the user's."""
    annotation = Annotation.objects.filter(pk=annotation_id, annotator=user).select_related("item__project").first()
    if annotation is None:
        raise TaskNotFound("No such annotation of yours.")
    item = annotation.item
    return {
        "id": annotation.pk,
        "item": annotator_item_payload(item=item, annotator=user),
        "result": annotation.result,
        "submitted_at": annotation.created_at,
        "amendable": item.status in OPEN_STATUSES and not item.reviews.exists(),
        "revisions": [
            {"result": r.result, "submitted_at": r.submitted_at, "replaced_at": r.replaced_at}
            for r in annotation.revisions.all()
        ],
    }


@dataclass
class Amended:
    annotation: Annotation
    changed: bool
    warnings: dict[str, str] = field(default_factory=dict)


def _refuse_reviewed(item: Item) -> None:
    if item.status in OPEN_STATUSES and not item.reviews.exists():
        return
    state = {ItemStatus.VERIFIED: "verified", ItemStatus.DISCARDED: "discarded"}.get(item.status, "reviewed")
    raise TaskConflict(f"This item was reviewed already (it is {state}), so your answer can no longer be changed.")


@transaction.atomic
def annotation_amend(*, annotation_id: int, user, result, time_spent_ms: int = 0) -> Amended:
    """Replace the result of the user's own annotation while its item is not reviewed.

    The item row is locked first (the queue's locking rule), so a reviewer deciding at the same
    moment either sees the amendment or makes this one wait and be refused. The same answer again
    changes nothing (changed=False). The annotation's time stays what its submit measured: an
    amendment adds none (`time_spent_ms`, the client's count, is not used). Raises TaskNotFound
    (not theirs), TaskConflict (reviewed) or results.ResultInvalid (nothing written)."""
    found, project_id = Annotation.objects.filter(pk=annotation_id, annotator=user).values_list(
        "item_id", "item__project_id"
    ).first() or (None, None)
    if found is None:
        raise TaskNotFound("No such annotation of yours.")
    # Lock order (verification.py's marking lock): the marking lock shared, before the item (a
    # threshold change holding it may be re-marking this very item), then the item row only, whose
    # statement reads the project's settings as committed after any change that went first.
    project_marking_lock_shared(project_id=project_id)
    item = Item.objects.select_for_update(of=("self",)).select_related("project").get(pk=found)
    annotation = Annotation.objects.select_for_update().get(pk=annotation_id)
    _refuse_reviewed(item)
    project = item.project
    validated = validate_result(project.workflow, result, result_context_for(item=item, annotator=user))
    if json.loads(json.dumps(validated.result)) == annotation.result:
        return Amended(annotation, False, validated.warnings)
    last = annotation.revisions.order_by("-replaced_at", "-pk").values_list("replaced_at", flat=True).first()
    now = timezone.now()
    revision = AnnotationRevision.objects.create(
        annotation=annotation,
        result=annotation.result,
        time_spent_ms=annotation.time_spent_ms,
        with_suggestion=annotation.with_suggestion,
        submitted_at=last or annotation.created_at,
        replaced_at=now,
    )
    annotation.result = validated.result
    # Not blind if either version was given with a model suggestion on the form (as submit decides).
    annotation.with_suggestion = annotation.with_suggestion or (
        shows_suggestions(project=project) and Suggestion.objects.filter(item=item).exists()
    )
    annotation.save(update_fields=["result", "with_suggestion"])
    audit_record(
        action=AuditAction.AMEND,
        actor=user,
        project=project,
        obj=annotation,
        details={"item": item.pk, "revision": revision.pk},
    )
    if item.status == ItemStatus.ANNOTATED and not item.is_gold:
        item_mark_disagreement(item=item)  # the amendment may start or settle a disagreement
    if (
        item.status == ItemStatus.ANNOTATED
        and not item.is_gold
        and project_setting(project.settings, "auto_verify", False, project=project.slug)
    ):
        item_auto_verify(item=item)  # the amendment may be what makes the annotators agree
    return Amended(annotation, True, validated.warnings)
