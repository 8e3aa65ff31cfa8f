"""How a settled answer verifies an item: written into the item's payload, by a reviewer
(services.review_decide) or, when the annotators agree, by the submit that completes the item
(queue/submit.py); the decision's Review keeps the payload from before (`payload_before`), which a
reopening puts back (studies/reopen.py). An item whose annotators disagree is marked for
adjudication when it becomes annotated (item_mark_disagreement), so a reviewer settles it first."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence

from django.db import connection
from psycopg.types.numeric import Int8

from . import agreement, db
from .canonical import payload_answer
from .disagreement import find_disagreement, thresholds_from
from .fill_form import fill_merge
from .models import (
    Annotation,
    AuditAction,
    AuditEvent,
    ImportRun,
    Item,
    ItemStatus,
    Project,
    Review,
    ReviewDecision,
)


def apply_result_to_payload(workflow: str, payload: dict, result: dict, *, protocol: str | None = None) -> dict:
    """The item payload after a reviewer (or agreeing annotators) settled its answer, in the
    import format (so a verified item exports and re-imports as it is)."""
    out = dict(payload or {})
    if workflow == "quintuplet":
        for name in agreement.QUINTUPLET_FIELDS:
            if name in result:  # a labelling pass's answer holds only the fields it asked (fill_form.py)
                out[name] = result[name]
    elif workflow == "box":
        # The import format (the box protocol's spec page, importing/formats.py) keeps both kinds of answer in
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
        if protocol:  # the known answer's stored form (a multi-answer question stores a list of letters)
            out["answer"] = payload_answer(protocol, out)
    # Ratings stay as annotations: the item payload carries no answer.
    return out


# What apply_result_to_payload may write into a payload, and of that what a raw item (imported
# without labels) never carries: a box item's state and a QA question and options define the task.
# A protocol's own form (annotation/protocols.py) writes nothing: its answers stay as annotations.
DECISION_FIELDS = {
    "quintuplet": agreement.QUINTUPLET_FIELDS,
    "box": ("bbox", "outcome", "state"),
    "qa": ("answer", "question", "options"),
    "rating": (),
}
ANSWER_FIELDS = {"quintuplet": agreement.QUINTUPLET_FIELDS, "box": ("bbox", "outcome"), "qa": ("answer",), "rating": ()}


def payload_before_decision(workflow: str, payload: dict, review, *, protocol: str | None = None) -> dict:
    """The payload with what `review` (an accept or auto decision) wrote into it undone, for a
    reopening (studies/reopen.py): each field its answer changed as Review.payload_before had it
    (absent where it had none); every other field as it is now, so a later change elsewhere in the
    payload stays. Without payload_before (a decision older than that record) the answer fields are
    taken out, as a raw item has them; a task field the decision overwrote (a box item's state)
    cannot be recovered then."""
    payload = payload or {}
    before = review.payload_before
    if before is None:
        return {k: v for k, v in payload.items() if k not in ANSWER_FIELDS.get(workflow, ())}
    applied = apply_result_to_payload(workflow, before, review.result, protocol=protocol)
    written = {
        k for k in DECISION_FIELDS.get(workflow, ()) if (k in before, before.get(k)) != (k in applied, applied.get(k))
    }
    out = {k: v for k, v in payload.items() if k not in written}
    out.update({k: before[k] for k in written if k in before})
    return out


def item_auto_verify(*, item: Item) -> None:
    """Verify an item that just got its last annotation when its annotators agree (the project's
    auto_verify setting): the consensus goes into the payload and an AUTO review records it. An
    item marked as a disagreement under the project's thresholds (item_mark_disagreement, called
    first) is never auto-verified, even where the fixed agreement rule would pass it: a stricter
    threshold (rating_spread 1, box_iou 0.9) asks a reviewer to look."""
    if item.disagreement:
        return
    workflow = item.project.workflow
    annotations = Annotation.objects.filter(item=item)
    if workflow == "qa" and annotations.filter(with_suggestion=True).exists():
        return  # annotators agreeing on a pre-filled model answer is no blind consensus: a reviewer decides
    results = list(annotations.order_by("pk").values_list("result", flat=True))
    if not agreement.results_agree(workflow, results, protocol=item.project.protocol):
        return
    merged = agreement.consensus_result(workflow, results)
    before = item.payload
    if item.fill_fields:  # a labelling pass: the fields it asked join the payload (fill_form.py)
        item.payload = fill_merge(item.payload, merged, item.fill_fields)
    else:
        item.payload = apply_result_to_payload(workflow, item.payload, merged, protocol=item.project.protocol)
    item.status = ItemStatus.VERIFIED
    item.save(update_fields=["payload", "status", "updated_at"])
    Review.objects.create(
        item=item,
        reviewer=None,
        decision=ReviewDecision.AUTO,
        result=merged,
        payload_before=before,
        comment="Annotators agree.",
    )


# --- the marking lock of a project -----------------------------------------------------------------
# A threshold change re-marks the items waiting for review (project_setup.project_thresholds_changed)
# while a submit may be completing an item and marking it (queue/submit.py). One must see the other:
# the submit marks under the thresholds the change wrote, or the change finds the item the submit
# completed. On PostgreSQL a per-project advisory lock orders them: a change holds it exclusively
# from before it lists the waiting items until it commits; a completing submit holds it shared from
# before it reads the thresholds until it commits, so completing submits never wait for each other.
# Whichever comes second reads after the first committed (READ COMMITTED: a new snapshot per
# statement, so the read is a statement of its own after the lock's).
#
# Not the project row: rejections, member and study changes lock it (a rejection before the items
# it takes), so a submit holding its item while it waited for the row FOR SHARE would queue behind
# them and could deadlock with a rejection. FOR KEY SHARE would not
# even wait for a change: it conflicts with neither the change's FOR NO KEY UPDATE nor the plain
# UPDATE of the admin's project form.
#
# Lock order. A completing submit: its item row, its task row (queue/task_ops.lock_own_task), then this
# lock, shared. A threshold change: the project row (FOR NO KEY UPDATE, or the admin form's UPDATE),
# then this lock, exclusive, then the rows of the items waiting for review. Neither waits for a row
# the other holds: the items a change re-marks were annotated before it listed them, the item a
# submit completes was not, and after taking this lock a submit writes only its own item's rows.
# An amendment and an annotation import take this lock shared before any item row (they may write
# items a change is re-marking, so they must not hold one while they wait); a review locks its item
# row only (not the project row: the change holds that while it waits for items).
MARKING_LOCK_CLASS = 0x53544C4D  # "STLM", the first key; the second is the project id (as IMPORT_LOCK_CLASS)


def project_settings_to_mark(*, project: Project) -> dict:
    """The project's settings as committed now, for a submit about to mark the item it completed:
    read under the project's marking lock, held shared until the transaction ends (see above)."""
    project_marking_lock_shared(project_id=project.pk)
    return Project.objects.filter(pk=project.pk).values_list("settings", flat=True).get()


def project_marking_lock_shared(*, project_id: int) -> None:
    """Take the project's marking lock shared until the transaction ends (see above): a completing
    submit after its item lock; an amendment before its item lock (the item it amends may be one a
    change is re-marking, so it must not hold that item while it waits). The settings are then read
    in a statement of their own."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock_shared(%s, %s)", [MARKING_LOCK_CLASS, project_id])


def project_marking_lock(*, project: Project) -> None:
    """Take the project's marking lock exclusively until the transaction ends: a threshold change,
    before it lists the items to re-mark (see above)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [MARKING_LOCK_CLASS, project.pk])


def items_mark_disagreement(*, project, item_ids: Iterable[int], chunk_size: int = 2000) -> int:
    """Store (or clear) `Item.disagreement` of those of these items that are annotated (gold items
    never are), from their annotations and the project's thresholds; returns how many are marked.
    Called when items become annotated by an import; a submit or an amendment marks its one item
    (item_mark_disagreement). Items already verified or discarded keep what they had."""
    ids = sorted(set(item_ids))
    thresholds = thresholds_from(project.settings, project=project.slug)
    marked = 0
    for start in range(0, len(ids), chunk_size):
        # Locked (pk order) while they are marked: a review settling one meanwhile waits, and one
        # settled before is no longer annotated here, so a verified item is never stamped.
        open_ids = list(
            Item.objects.select_for_update(of=("self",))
            .filter(pk__in=ids[start : start + chunk_size], project=project, status=ItemStatus.ANNOTATED, is_gold=False)
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        per_item: dict[int, list[tuple[int, dict]]] = defaultdict(list)
        for item_id, pk, result in (
            Annotation.objects.filter(item_id__in=open_ids)
            .order_by("item_id", "pk")
            .values_list("item_id", "pk", "result")
        ):
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


# item_mark_disagreement's statements, prepared (annotation/db.py): a completing submit runs them
# many times a second, and the ORM built and compiled its queries on every call.
ITEM_ANSWERS_SQL = """
SELECT (SELECT json_agg(json_build_array(a.id, a.result) ORDER BY a.id)::text
        FROM annotation_annotation a WHERE a.item_id = %(item)s)
"""
ITEM_DISAGREEMENT_SQL = """
UPDATE annotation_item SET disagreement = %(found)s::jsonb WHERE id = %(item)s RETURNING id
"""


def item_answers(text: str | None) -> list[tuple[int, dict]]:
    """(annotation id, result) in id order, from ITEM_ANSWERS_SQL's column (also read by the
    submit's statement after the marking lock, queue/sql.py MARK_READ_SQL)."""
    return [(pk, result) for pk, result in json.loads(text)] if text else []


def item_mark_disagreement(*, item: Item, answers: Sequence[tuple[int, dict]] | None = None) -> dict | None:
    """Mark one item as items_mark_disagreement does (the caller holds the item, locked, with its
    current status, and item.project with the settings in force: a submit reads them, with the
    item's `answers`, after the marking lock, an amendment or a reopening under the project row's
    lock) and return what was stored: one read of its annotations (none when the caller passes
    `answers`: (annotation id, result) in id order), one write if changed."""
    found = None
    if item.status == ItemStatus.ANNOTATED and not item.is_gold:
        project = item.project
        if answers is None:
            ((text,),) = db.rows(ITEM_ANSWERS_SQL, {"item": Int8(item.pk)})
            answers = item_answers(text)
        found = find_disagreement(
            project.workflow, list(answers), thresholds_from(project.settings, project=project.slug)
        )
    if found != item.disagreement:
        # None is SQL NULL (as the ORM's update wrote it), never a JSON null.
        db.rows(ITEM_DISAGREEMENT_SQL, {"item": Int8(item.pk), "found": None if found is None else json.dumps(found)})
        item.disagreement = found
    return found


def imported_result(workflow: str, payload: dict) -> dict | None:
    """The labels an item brought with its import (status annotated without any annotation: the
    import format's labels, annotation/importing/formats.py), in an annotation result's shape, so
    a reviewer can accept them as they are (services.review_decide); None where the payload carries
    none (a raw item, a rating item: ratings stay as annotations)."""
    payload = payload or {}
    if workflow == "quintuplet":
        if not all(payload.get(name) not in (None, "", []) for name in agreement.QUINTUPLET_FIELDS):
            return None
        return {name: payload[name] for name in agreement.QUINTUPLET_FIELDS}
    if workflow == "box":
        bbox = payload.get("bbox")
        if isinstance(bbox, list):
            return {"bbox": bbox, "state": payload.get("state")}
        return {"outcome": bbox} if isinstance(bbox, str) and bbox else None
    if workflow == "qa":
        answer = payload.get("answer")
        return None if answer in (None, "", []) else {"answer": answer}
    return None


def item_imported_labels(*, item: Item) -> dict | None:
    """The imported labels of an annotated item no one annotated, as the review page shows them:
    one source beside the annotations, {"source" (a sentence naming the import's file and
    format), "file", "format", "result"}; None for any other item. Never an annotation: the agreement figures and the
    annotators' queue do not see it. The file is the one of the project's item import that
    created the item (the first recorded at or after the item was written; the latest before
    it where none is)."""
    if item.status != ItemStatus.ANNOTATED:
        return None
    result = imported_result(item.project.workflow, item.payload)
    # Only an item annotated by nobody: one with annotations is settled from them (its payload's
    # labels show as the current item beside them on the review page).
    if result is None or Annotation.objects.filter(item_id=item.pk).exists():
        return None
    from .importing.conversion import OWN_FORMAT  # the import machinery, loaded only when asked

    imports = AuditEvent.objects.filter(project=item.project, action=AuditAction.IMPORT, details__kind="items").only(
        "object_repr", "details"
    )
    event = imports.filter(at__gte=item.created_at).order_by("at", "pk").first()
    event = event or imports.filter(at__lt=item.created_at).order_by("-at", "-pk").first()
    file_name, fmt = "", OWN_FORMAT
    if event is not None:
        run = (event.details or {}).get("run")
        uploaded = ImportRun.objects.filter(pk=run).values_list("file_name", flat=True).first() if run else None
        file_name = uploaded or event.object_repr
        fmt = (event.details or {}).get("format") or OWN_FORMAT
    source = f"from the import {file_name} ({fmt})" if file_name else f"from the import ({fmt})"
    return {"source": source, "file": file_name, "format": fmt, "result": result}
