"""What a participant's rejection does to items a reviewer already settled: the verified decisions
that rested on one of the rejected annotations and that the remaining annotations no longer
support go back to review; an item frozen in a release keeps its decision and is reported.

What a decision (the item's latest review) rests on:
- accept: the annotation the reviewer accepted (Review.accepted_annotation); in a rating project
  every annotation, since there accepting keeps the raters' mean as the item's Human score;
- auto (the annotators agreed, settings["auto_verify"]): every annotation;
- edit: the reviewer's own answer; discard: no answer at all. Both stand. An edit that started
  from a rejected annotation (Review.source_annotation_id) stands too: the reviewer saved every
  field of it as their own answer, and the page names the annotation selected when the edit was
  saved, whether or not its values were kept (the box editor starts from the annotators' mean box),
  so it says where the form was filled from, not what the answer rests on. Such items are listed
  in the rejection's audit event (`edits_started_from`), for a researcher who wants to look again.

A decision that rested on a removed annotation stands when the remaining annotations support it
the way the project's rules would have: for an accept, another remaining annotation within the
project's disagreement thresholds of the accepted one (annotation/disagreement.py); for a decision
on every annotation, still `annotations_per_item` annotations left, within the thresholds of one
another. So a verified answer never stands on fewer human answers than it was verified with.

Otherwise the item goes back to review: status annotated (it keeps its count of remaining
annotations; it is not offered to annotators again), re-marked for disagreement, an ItemReopening
row saying why (the review queue shows it first, with the reason) and a `review_reopen` audit event.
The fields the voided decision wrote into its payload are set back to what they were before
(Review.payload_before; the ItemReopening keeps the voided payload), so neither a reviewer
("Current item") nor an annotator (a box item's proposed state) is shown an answer that no
longer stands; a decision older than that record has its answer fields taken out instead
(verification.payload_before_decision).
When no annotation remains at all (one annotation per item, the rejected one accepted), there is
nothing to review: the item goes back to the annotation queue instead (pending, with the same row
and event), and comes to review marked once it is complete again.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from ..audit.record import audit_record
from ..disagreement import find_disagreement, thresholds_from
from ..models import (
    Annotation,
    AuditAction,
    Item,
    ItemReopening,
    ItemStatus,
    Project,
    ReleaseItem,
    Review,
    ReviewDecision,
    StudyParticipant,
)
from ..verification import item_mark_disagreement, payload_before_decision


@dataclass(frozen=True)
class RestingDecision:
    """A verified item's latest review that rests on a rejected annotation."""

    review: Review
    annotation: Annotation  # the rejected annotation it rests on
    on_every_annotation: bool  # auto, or accept in a rating project


@dataclass
class Settled:
    kept: list[int] = field(default_factory=list)  # still supported by the remaining annotations
    back_to_review: list[int] = field(default_factory=list)
    back_to_queue: list[int] = field(default_factory=list)  # no annotation left to review
    released: list[dict] = field(default_factory=list)  # {"item", "external_id", "releases"}: unchanged


def _verified_by_item(items: dict[int, Item], annotations: list[Annotation]) -> dict[int, Annotation]:
    return {
        a.item_id: a
        for a in annotations
        if a.item_id in items and items[a.item_id].status == ItemStatus.VERIFIED and not items[a.item_id].is_gold
    }


def _latest_reviews(item_ids) -> dict[int, Review]:
    latest: dict[int, Review] = {}
    for review in Review.objects.filter(item_id__in=list(item_ids)).order_by("item_id", "-created_at", "-pk"):
        latest.setdefault(review.item_id, review)
    return latest


def edits_started_from(*, items: dict[int, Item], annotations: list[Annotation]) -> list[int]:
    """Verified items whose decision is an edit that started from one of `annotations`: they stand
    (see the module), and the rejection lists them."""
    by_item = _verified_by_item(items, annotations)
    return sorted(
        item_id
        for item_id, review in _latest_reviews(by_item).items()
        if review.decision == ReviewDecision.EDIT and review.source_annotation_id == by_item[item_id].pk
    )


def decisions_resting_on(
    *, project: Project, items: dict[int, Item], annotations: list[Annotation]
) -> dict[int, RestingDecision]:
    """item id -> the decision of each verified item that rests on one of `annotations`. Read
    before the annotations are deleted (deleting one clears the review's link to it)."""
    by_item = _verified_by_item(items, annotations)
    latest = _latest_reviews(by_item)
    out = {}
    for item_id, review in latest.items():
        annotation = by_item[item_id]
        on_every = review.decision == ReviewDecision.AUTO or (
            review.decision == ReviewDecision.ACCEPT and project.workflow == "rating"
        )
        if on_every or (review.decision == ReviewDecision.ACCEPT and review.accepted_annotation_id == annotation.pk):
            out[item_id] = RestingDecision(review, annotation, on_every)
    return out


def _still_supported(project: Project, decision: RestingDecision, remaining: list[tuple[int, dict]]) -> bool:
    thresholds = thresholds_from(project.settings, project=project.slug)
    if decision.on_every_annotation:
        return (
            len(remaining) >= project.annotations_per_item
            and find_disagreement(project.workflow, remaining, thresholds) is None
        )
    accepted = (decision.annotation.pk, decision.annotation.result)
    return any(find_disagreement(project.workflow, [accepted, other], thresholds) is None for other in remaining)


def decisions_settle(
    *,
    project: Project,
    participant: StudyParticipant,
    actor,
    items: dict[int, Item],
    resting: dict[int, RestingDecision],
) -> Settled:
    """After the rejected annotations are gone (the items locked by the caller): keep, report or
    send back to review each decision of `resting`, as the module says."""
    out = Settled()
    if not resting:
        return out
    remaining: dict[int, list[tuple[int, dict]]] = defaultdict(list)
    for item_id, pk, result in (
        Annotation.objects.filter(item_id__in=list(resting))
        .order_by("item_id", "pk")
        .values_list("item_id", "pk", "result")
    ):
        remaining[item_id].append((pk, result))
    releases: dict[int, list[str]] = defaultdict(list)
    for item_id, version in (
        ReleaseItem.objects.filter(item_id__in=list(resting))
        .order_by("item_id", "release__created_at")
        .values_list("item_id", "release__version")
    ):
        releases[item_id].append(version)
    study = participant.study
    reason = f"needs re-review: participant {participant.external_id} rejected"
    for item_id in sorted(resting):
        decision, item = resting[item_id], items[item_id]
        if _still_supported(project, decision, remaining[item_id]):
            out.kept.append(item_id)
            continue
        if releases[item_id]:
            # A release is immutable and this item is part of its record: it keeps its decision.
            out.released.append({"item": item_id, "external_id": item.external_id, "releases": releases[item_id]})
            continue
        to_review = bool(remaining[item_id])
        voided = item.payload
        restore = "recorded" if decision.review.payload_before is not None else "labels_removed"
        item.payload = payload_before_decision(project.workflow, voided, decision.review, protocol=project.protocol)
        item.project = project
        item.status = ItemStatus.ANNOTATED if to_review else ItemStatus.PENDING
        item.save(update_fields=["payload", "status", "updated_at"])
        item_mark_disagreement(item=item)
        ItemReopening.objects.create(
            item=item,
            participant=participant,
            review=decision.review,
            decision=decision.review.decision,
            annotation_id=decision.annotation.pk,
            reason=reason,
            voided_payload=voided,
            payload_restore=restore,
            created_by=actor if getattr(actor, "is_authenticated", False) else None,
        )
        audit_record(
            action=AuditAction.REVIEW_REOPEN,
            actor=actor,
            project=project,
            obj=item,
            details={
                "reason": reason,
                "study": study.pk,
                "participant": participant.external_id,
                "review": decision.review.pk,
                "decision": decision.review.decision,
                "annotation": decision.annotation.pk,
                "back_to": "review" if to_review else "queue",
                "payload": restore,
            },
        )
        (out.back_to_review if to_review else out.back_to_queue).append(item_id)
    return out
