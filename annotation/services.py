"""Write paths of reviewing: a reviewer settles an annotated item (accept, edit or discard).

The annotators' work queue (claim, renew, autosave, skip, submit) is annotation/queue/; what a settled answer does
to the item's payload is annotation/verification.py.
"""

from __future__ import annotations

from django.db import transaction

from protocols import registry

from .audit.record import audit_record
from .canonical import payload_answer
from .fill_form import fill_merge
from .models import Annotation, AuditAction, ExcludedAnnotation, Item, ItemStatus, Review, ReviewDecision
from .protocols import qa_shape
from .queue.errors import TaskConflict, TaskNotFound
from .results import QAContext, ResultInvalid, validate_result
from .selectors import result_context_for
from .verification import apply_result_to_payload, item_imported_labels


def _validate_review_edit(item: Item, result) -> dict:
    workflow = item.project.workflow
    if not isinstance(result, dict):
        raise ResultInvalid({"result": "An edit needs the merged result as a JSON object."})
    if workflow == "qa":
        errors: dict[str, str] = {}
        fixes: dict = {}
        if "question" in result:
            if not isinstance(result["question"], str) or not result["question"].strip():
                errors["question"] = "The question cannot be empty."
            else:
                fixes["question"] = result["question"].strip()
        if "options" in result:
            opts = result["options"]
            if not isinstance(opts, list) or len(opts) < 2 or not all(isinstance(o, str) and o.strip() for o in opts):
                errors["options"] = "Give at least two non-empty options."
            else:
                fixes["options"] = [o.strip() for o in opts]
        if errors:
            raise ResultInvalid(errors)
        # The item as edited (its options may be fixed too) says what answer it takes.
        shape = qa_shape(
            protocol=item.project.protocol, payload={**item.payload, **fixes}, project_settings=item.project.settings
        )
        # A protocol whose known answers are lists keeps a list here (one letter too).
        known = registry.get(item.project.protocol).known_answer_form(item.payload) or {}
        ctx = QAContext.of({**shape, "multiple": shape["multiple"] or bool(known.get("multiple"))})
        answer_part = {k: v for k, v in result.items() if k in ("answer", "flags")}
        clean = validate_result("qa", answer_part, ctx).result
        if clean["answer"] is None:
            raise ResultInvalid({"answer": "A verified item needs an answer."})
        # The item's known answer in its stored form (a multi-answer question stores a list of letters).
        clean["answer"] = payload_answer(item.project.protocol, {**item.payload, **fixes, "answer": clean["answer"]})
        return {**fixes, "answer": clean["answer"]}
    # A box edit's state is one of the item's candidate labels (its state, its distractors, the
    # project's state_labels for its object), as for annotators: no free text enters a release.
    return validate_result(workflow, result, result_context_for(item=item)).result


def _settled_payload(item: Item, applied: dict) -> dict:
    """The payload once `applied` settled the item: a labelling pass's item takes the fields it
    asked (fill_form.py), any other its workflow's answer (verification.apply_result_to_payload)."""
    if item.fill_fields:
        return fill_merge(item.payload, applied, item.fill_fields)
    return apply_result_to_payload(item.project.workflow, item.payload, applied, protocol=item.project.protocol)


def _edit_source(item: Item, annotation_id: int | None) -> int | None:
    """The annotation an edit started from, when the page names one: one of the item's annotations
    (an excluded one left the analysis and no answer may start from it)."""
    if annotation_id is None:
        return None
    if Annotation.objects.filter(pk=annotation_id, item=item).exists():
        return annotation_id
    if ExcludedAnnotation.objects.filter(annotation_id=annotation_id, item=item).exists():
        raise ResultInvalid(
            {
                "annotation": f"Annotation {annotation_id} left the analysis (its participant was "
                "rejected): start the edit from one of the item's annotations."
            }
        )
    raise ResultInvalid({"annotation": f"Annotation {annotation_id} is not one of this item's annotations."})


@transaction.atomic
def review_decide(
    *,
    item_id: int,
    reviewer,
    decision: str,
    annotation_id: int | None = None,
    result: dict | None = None,
    comment: str = "",
    imported: bool = False,
) -> Review:
    """Settle an annotated item: accept one annotation, save an edited answer, or discard.

    An accept with `imported` (and no annotation) accepts the labels the item came with from its
    import as they are (verification.item_imported_labels): the item is verified with them, and
    the audit's verify event says {"accepted": "as imported"}.

    An edit records the annotation it started from (`annotation_id`, optional; the review page
    sends the selected one) as Review.source_annotation_id; the decision's Review keeps the payload
    from before it wrote its answer (payload_before). The item row lock makes a second reviewer
    wait and then get TaskConflict. Raises ResultInvalid for a bad decision/annotation/result
    (nothing written).
    """
    # The item row only (of=self): locking the project row too, as select_related would, made a
    # review deadlock with a threshold change (which holds the project row, then re-marks items).
    item = Item.objects.select_for_update(of=("self",)).select_related("project").filter(pk=item_id).first()
    if item is None:
        raise TaskNotFound("No such item.")
    if item.status != ItemStatus.ANNOTATED:
        if item.status in (ItemStatus.VERIFIED, ItemStatus.DISCARDED):
            last = item.reviews.order_by("-created_at").select_related("reviewer").first()
            who = f" by {last.reviewer.username}" if last and last.reviewer else ""
            raise TaskConflict(f"This item was already reviewed{who}: it is {item.status}.")
        raise TaskConflict("This item is still waiting for annotations.")
    workflow = item.project.workflow
    accepted = None
    source = None
    applied: dict = {}
    before = item.payload
    if imported and decision != ReviewDecision.ACCEPT:
        raise ResultInvalid({"imported": f"Imported labels can only be accepted, not given with {decision!r}."})
    if imported and annotation_id:
        raise ResultInvalid({"imported": "Accept either the imported labels or one annotation, not both."})
    if imported:
        labels = item_imported_labels(item=item)
        if labels is None:
            raise ResultInvalid({"imported": "This item carries no imported labels to accept."})
        applied = labels["result"]
        item.payload = _settled_payload(item, applied)
        item.status = ItemStatus.VERIFIED
    elif decision == ReviewDecision.ACCEPT:
        accepted = Annotation.objects.filter(pk=annotation_id, item=item).first() if annotation_id else None
        if accepted is None:
            raise ResultInvalid({"annotation": "Choose one of this item's annotations to accept."})
        applied = dict(accepted.result)
        if workflow == "qa":
            if applied.get("answer") is None:
                raise ResultInvalid({"annotation": "This annotation has no answer; edit the answer instead."})
            applied = {"answer": applied["answer"]}
        item.payload = _settled_payload(item, applied)
        item.status = ItemStatus.VERIFIED
    elif decision == ReviewDecision.EDIT:
        errors: dict[str, str] = {}
        try:
            applied = _validate_review_edit(item, result)
        except ResultInvalid as exc:
            errors.update(exc.errors)
        try:
            source = _edit_source(item, annotation_id)
        except ResultInvalid as exc:
            errors.update(exc.errors)
        if errors:  # a bad result and a bad annotation are named in one answer
            raise ResultInvalid(errors)
        item.payload = _settled_payload(item, applied)
        item.status = ItemStatus.VERIFIED
    elif decision == ReviewDecision.DISCARD:
        item.status = ItemStatus.DISCARDED
    else:
        raise ResultInvalid({"decision": "Choose accept, edit or discard."})
    item.save(update_fields=["payload", "status", "updated_at"])
    review = Review.objects.create(
        item=item,
        reviewer=reviewer,
        decision=decision,
        accepted_annotation=accepted,
        source_annotation_id=source,
        result=applied,
        comment=(comment or "")[:5000],
        payload_before=None if decision == ReviewDecision.DISCARD else before,
    )
    # The reviewer is the actor: the audit trail records who verified, edited or discarded the item.
    details = {"review": review.pk, "annotation": accepted.pk if accepted else None}
    if decision == ReviewDecision.EDIT:
        details["started_from"] = source
    if imported:
        details["accepted"] = "as imported"
    audit_record(action=_AUDIT_ACTION[decision], actor=reviewer, project=item.project, obj=item, details=details)
    return review


_AUDIT_ACTION = {
    ReviewDecision.ACCEPT: AuditAction.VERIFY,
    ReviewDecision.EDIT: AuditAction.EDIT,
    ReviewDecision.DISCARD: AuditAction.DISCARD,
}
