"""Read paths of the annotation app (the progress and agreement figures: selectors_agreement.py)."""

import json

from django.db.models import (
    BooleanField,
    Count,
    ExpressionWrapper,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
)

from protocols import registry
from protocols.fields import BOX_OUTCOMES

from .agreement import field_disagreements
from .disagreement import FIELD_LABELS, field_label, find_disagreement, thresholds_from
from .fill_form import fill_annotator_view, fill_context, fill_review_form
from .models import Item, ItemReopening, ItemStatus, Project
from .permissions import projects_visible_to, role_in
from .project_setup import project_setting
from .protocols import LETTERS, QA_FLAGS, custom_workflow, qa_shape, workflow_context
from .review_history import review_history
from .selectors_agreement import item_status_counts
from .verification import item_imported_labels


def project_list_for(*, user) -> list[dict]:
    projects: QuerySet[Project] = projects_visible_to(user).annotate(n_items=Count("items"))
    return [
        {
            "slug": p.slug,
            "name": p.name,
            "protocol": p.protocol,
            "workflow": p.workflow,
            "role": role_in(user, p),
            "items": p.n_items,
            "annotations_per_item": p.annotations_per_item,
        }
        for p in projects
    ]


# --- annotator payloads ----------------------------------------------------------------------
# What an annotator may see is built from an allow-list: the protocol's media fields and the
# payload fields it declares shown (Protocol.annotator_fields), plus what the workflow's form
# derives. Ground truth and metadata (answers, subtasks, scenes, contexts, capabilities,
# generators, ...) never leave the server for an annotator, including on gold items, which look
# exactly like the others.


def media_urls_for(*, items) -> dict[str, dict]:
    """sha256 -> {"url", "width", "height", "kind"} for every asset the items reference.

    Videos also carry "fps" and "duration" (null when the import could not read them), which the
    rating page needs to step exactly one frame.
    """
    from django.conf import settings

    from .models import MediaAsset

    hashes: set[str] = set()
    for item in items:
        for value in (item.media or {}).values():
            hashes.update(value if isinstance(value, list) else [value])
    if not hashes:
        return {}
    assets = MediaAsset.objects.filter(sha256__in=hashes).only(
        "sha256", "file", "width", "height", "kind", "fps", "duration"
    )
    out: dict[str, dict] = {}
    for a in assets:
        entry = {"url": settings.MEDIA_URL + a.file.name, "width": a.width, "height": a.height, "kind": a.kind}
        if a.kind == "video":
            entry.update(fps=a.fps, duration=a.duration)
        out[a.sha256] = entry
    return out


def _media_field(item, name: str, assets: dict[str, dict]):
    value = (item.media or {}).get(name)
    if isinstance(value, list):
        return [assets.get(h) for h in value]
    return assets.get(value) if value else None


def box_candidates(*, project, payload: dict) -> list[str]:
    """State labels to choose from, in a neutral (alphabetical) order that does not single out the truth."""
    labels = {payload.get("state")} | set(payload.get("distractors") or [])
    extra = project_setting(project.settings, "state_labels", {}, project=project.slug)
    labels |= set(extra.get(payload.get("object"), []))
    return sorted((x for x in labels if isinstance(x, str) and x), key=lambda s: (s.lower(), s))


def rubric_for(*, project) -> dict[str, str]:
    """Per-criterion rubric: the project's own wording (settings["rubric"]) over the default."""
    rubric = dict(registry.get(project.protocol).default_rubric)
    custom = project_setting(project.settings, "rubric", None, project=project.slug)
    if isinstance(custom, dict):
        rubric.update({k: str(v) for k, v in custom.items() if k in rubric and v})
    return rubric


def rubric_text_for(*, project) -> str | None:
    """The project's rubric when it is one text for the whole scale (settings["rubric"] a string)."""
    custom = project_setting(project.settings, "rubric", None, project=project.slug)
    if isinstance(custom, str):
        return custom
    return None


def shows_suggestions(*, project) -> bool:
    """Whether the annotation form offers model suggestions (quintuplet and QA; settings["suggestions"])."""
    return project.workflow in ("quintuplet", "qa") and project_setting(
        project.settings, "suggestions", True, project=project.slug
    )


def qa_suggested_answer(*, shape: dict, answer):
    """A model's answer in the shape the QA form takes, or None when it does not fit the item.

    Suggestions are model output (never the item's truth); one that the form could not show
    (a letter outside the options, a count that is not a whole number) is dropped.
    """
    from .protocols import LETTERS

    fmt = shape["format"]
    if fmt == "count":
        if isinstance(answer, bool):
            return None
        if isinstance(answer, str) and answer.strip().isdigit():
            answer = int(answer.strip())
        return answer if isinstance(answer, int) and answer >= 0 else None
    if fmt == "set":
        values = answer.split(",") if isinstance(answer, str) else answer
        if not isinstance(values, list):
            return None
        values = [v.strip() for v in values if isinstance(v, str) and v.strip()]
        return values or None
    letters_allowed = set(LETTERS[: shape["n_options"]])
    values = answer.split(",") if isinstance(answer, str) else answer
    if not isinstance(values, list):
        return None
    letters = []
    for v in values:
        letter = v.strip().upper() if isinstance(v, str) else None
        if letter not in letters_allowed:
            return None
        if letter not in letters:
            letters.append(letter)
    if not letters:
        return None
    if shape["multiple"]:
        return sorted(letters)
    return letters[0] if len(letters) == 1 else None


def result_context_for(*, item, annotator=None):
    """What results.validate_result needs to check a result for this item."""
    from .results import BoxContext, QAContext, QuintupletContext, RatingContext

    if (fill := fill_context(item)) is not None:  # a labelling pass asks only its fields
        return fill
    project = item.project
    workflow = project.workflow
    if workflow == "quintuplet":
        proto = registry.get(project.protocol)
        return QuintupletContext(fields=tuple(proto.result_fields), choices=dict(proto.result_choices))
    if workflow == "box":
        image = _media_field(item, _media_names(project)[0], media_urls_for(items=[item])) or {}
        return BoxContext(
            width=image.get("width"),
            height=image.get("height"),
            labels=tuple(box_candidates(project=project, payload=item.payload)),
        )
    if workflow == "qa":
        shape = qa_shape(protocol=project.protocol, payload=item.payload, project_settings=project.settings)
        return QAContext.of(shape)
    if workflow == "rating":
        proto = registry.get(project.protocol)
        return RatingContext(criteria=proto.criteria, nullable=proto.nullable)
    if custom_workflow(workflow) is not None:  # a protocol's own form (annotation/protocols.py)
        assignment = None
        if annotator is not None:  # the annotator's own answer: checked against what they were shown
            assignment = {"seed": project.option_seed, "item_id": str(item.pk), "annotator": str(annotator.pk)}
        return workflow_context(project.protocol, item.payload or {}, assignment=assignment)
    return None


def _media_label(field: str, kind: str) -> str:
    """A media field's caption on the forms: its name without the kind ("video_before" -> "Before")."""
    prefix = "video_" if kind == "video" else "image_"
    return (field[len(prefix) :] if field.startswith(prefix) else field).replace("_", " ").capitalize()


def workflow_form(*, project, review: bool = False) -> dict:
    """What a project's workflow form and its review and agreement pages show alike, from the
    protocol: the media fields in order ({field, kind, label}) and, for a rating form, the criteria
    ({key, label, allows_na}); for a quintuplet form the result's fields. Project-wide facts only
    (never an item's), so a page carrying them cannot tell a gold item from another. ``review``:
    the review page's, with what a protocol's own form adds for reviewers (its ``review_form``)."""
    proto = registry.get(project.protocol)
    form: dict = {
        "workflow": project.workflow,
        "media": [{"field": f, "kind": k, "label": _media_label(f, k)} for f, k in proto.media_fields.items()],
    }
    if project.workflow == "rating":
        form["criteria"] = [
            {"key": c, "label": proto.criterion_labels[c], "allows_na": c in proto.nullable} for c in proto.criteria
        ]
    elif project.workflow == "quintuplet":
        form["fields"] = list(proto.result_fields)
    elif (custom := custom_workflow(project.workflow)) is not None:
        form.update(custom.form(proto))
        if review and hasattr(custom, "review_form"):
            form.update(custom.review_form(proto))
    return form


def _media_names(project) -> tuple[str, ...]:
    return tuple(registry.get(project.protocol).media_fields)


def annotator_item_payload(*, item, annotator=None) -> dict:
    """The annotator-safe view of an item: an allow-list of the protocol's media fields and shown
    fields, and what the workflow's form needs. ``annotator``: whose assignment it is (a protocol's
    own form may draw per assignment, e.g. the order of two outputs)."""
    from .models import Suggestion

    project = item.project
    protocol, workflow = project.protocol, project.workflow
    proto = registry.get(protocol)
    payload = item.payload or {}
    assets = media_urls_for(items=[item])
    out: dict = {"id": item.pk, "workflow": workflow, "protocol": protocol}
    for name, kind in proto.media_fields.items():
        value = _media_field(item, name, assets)
        out[name] = (value or []) if kind == "images" else value
    for name in proto.annotator_fields:
        out[name] = payload.get(name)
    if (custom := custom_workflow(workflow)) is not None:  # a protocol's own form: what replaces the media
        media = {name: out.pop(name, None) for name in proto.media_fields}
        who = None if annotator is None else str(annotator.pk)
        return out | custom.annotator_view(
            payload, media, seed=project.option_seed, item_id=str(item.pk), annotator=who
        )

    def suggestions():
        # Machine-made answers, newest first: the pages pre-fill from the first one. Built only for
        # the workflows that show them: a box or rating claim builds no queryset.
        # None at all when the project turned them off (e.g. to keep QA answers blind).
        if not shows_suggestions(project=project):
            return Suggestion.objects.none()
        return Suggestion.objects.filter(item=item).order_by("-created_at", "-pk")

    if item.fill_fields:  # a labelling pass: the fields asked and the item's texts, no suggestion
        out["fill"], out["suggestions"] = fill_annotator_view(item), []
    elif workflow == "quintuplet":
        out["suggestions"] = [{"source": s.source, "machine_made": True, "result": s.result} for s in suggestions()]
    elif workflow == "box":
        # Not blind: the annotator confirms the listed state or corrects it from the candidates.
        candidates = box_candidates(project=project, payload=payload)
        listed = payload.get("state")
        out["proposed_state"] = listed if listed in candidates else None
        out["candidates"] = candidates
        out["outcomes"] = list(BOX_OUTCOMES)
    elif workflow == "qa":
        shape = qa_shape(protocol=protocol, payload=payload, project_settings=project.settings)
        out["options"] = [{"letter": LETTERS[i], "text": t} for i, t in enumerate(payload.get("options") or [])]
        out["format"] = shape["format"]
        out["multiple"] = shape["multiple"]
        # The option saying none of the others is correct, if the item lists one: the form then
        # offers no flag for it (annotation/results.py, validate_qa). An option, never the answer.
        out["none_option"] = shape.get("none_option")
        out["flags"] = list(QA_FLAGS)
        # Only the model's answer, in the form's shape; never anything from the item's payload.
        out["suggestions"] = [
            {"source": s.source, "machine_made": True, "result": {"answer": answer}}
            for s in suggestions()
            if (answer := qa_suggested_answer(shape=shape, answer=(s.result or {}).get("answer"))) is not None
        ]
    elif workflow == "rating":
        rubric = rubric_for(project=project)
        out["criteria"] = [
            {"key": c, "label": proto.criterion_labels[c], "allows_na": c in proto.nullable, "rubric": rubric[c]}
            for c in proto.criteria
        ]
        out["rubric"] = rubric
        out["rubric_text"] = rubric_text_for(project=project)  # one text for the whole scale, if any
        out["scale"] = [1, 2, 3, 4, 5]
    return out


PROGRESS_CAP = 1_000


def annotator_progress(*, project, user, current_item_id: int) -> dict:
    """Where an annotator stands, as the annotate page says it ("3 of 20 left"): `done`, the
    annotations they gave in the project, and `left`, the item shown plus the other items still
    open to them (pending and short of annotations, not answered by them). Where the project mixes
    gold items in, they count as any other, so a submit always moves one item from left to done
    and the figures never tell a gold item apart (near the end `left` may hold gold items the
    draw does not offer again). A crowd participant has at most their study's tasks left
    (annotation/queue/quota.py)."""
    # Counted up to PROGRESS_CAP items: every claim asks, so a project of a million pending items
    # must not pay a full count; beyond the cap the page says "1000+ left". The count probes the
    # annotator's answers once per open item it passes: 0.9 ms of PostgreSQL per claim at 1,000
    # against 3.6 ms at 10,000 (1M pending items, warm cache). One prepared statement
    # (annotation/queue/progress.py).
    from .queue.progress import annotator_progress as progress

    return progress(project=project, user=user, current_item_id=current_item_id, cap=PROGRESS_CAP)


def task_view(*, task) -> dict:
    """The JSON an annotator gets for a held task."""
    return {
        "task": task.pk,
        "item": annotator_item_payload(item=task.item, annotator=task.annotator),
        "draft": task.draft or {},
        "version": task.draft_version,
        "lease_expires": task.lease_expires.isoformat(),
        # The claim's statement may have read it already (annotation/queue/claim.py).
        "progress": getattr(task, "claim_progress", None)
        or annotator_progress(project=task.item.project, user=task.annotator, current_item_id=task.item_id),
    }


def annotation_view(*, annotation, warnings: dict | None = None) -> dict:
    return {
        "id": annotation.pk,
        "task": annotation.task_id,
        "item": annotation.item_id,
        "result": annotation.result,
        "time_spent_ms": annotation.time_spent_ms,
        "created_at": annotation.created_at.isoformat(),
        "warnings": warnings or {},
    }


# --- review ----------------------------------------------------------------------------------


def _reopened_reason():
    """The reason of the item's latest reopening (a verified item a participant's rejection sent
    back), for items in the review queue: an annotated item that has one was not reviewed since
    (a review makes it verified or discarded, and only a reopening makes it annotated again)."""
    return Subquery(
        ItemReopening.objects.filter(item=OuterRef("pk")).order_by("-created_at", "-pk").values("reason")[:1]
    )


def review_queue_for(*, project, limit: int = 100, offset: int = 0) -> dict:
    """Items waiting for a reviewer (status annotated): those whose annotators disagree or that a
    rejection sent back to review first (to adjudicate), then oldest first; each with the fields in
    dispute (keys, and the annotation form's labels of them) and why it was sent back; and the
    project's counts."""
    rows = (
        Item.objects.filter(project=project, status=ItemStatus.ANNOTATED)
        .annotate(reopened=_reopened_reason())
        .alias(
            agreed=ExpressionWrapper(
                Q(disagreement__isnull=True) & Q(reopened__isnull=True), output_field=BooleanField()
            )
        )
        .order_by("agreed", "id")
        .values("id", "external_id", "annotation_count", "is_gold", "updated_at", "disagreement", "reopened")[
            offset : offset + limit
        ]
    )
    items = []
    for r in rows:
        fields = [f["field"] for f in (r["disagreement"] or {}).get("fields", [])]
        items.append(
            {
                **r,
                "updated_at": r["updated_at"].isoformat(),
                "disagreement": fields,
                "disagreement_labels": [
                    field_label(project.workflow, f, registry.get(project.protocol).criterion_labels) for f in fields
                ],
            }
        )
    return {"counts": item_status_counts(project=project), "items": items}


def review_field_labels(*, project) -> dict[str, str]:
    """Result field -> the annotation form's label, for the fields a reviewer compares."""
    if project.workflow == "rating":
        proto = registry.get(project.protocol)
        return {f"scores.{c}": proto.criterion_labels[c] for c in proto.criteria}
    return dict(FIELD_LABELS.get(project.workflow, {}))


# Longest value text the review page shows of one kept field (the JSON API has it whole).
KEPT_VALUE_CHARS = 500


def item_kept_fields(*, project, item_id: int) -> list[tuple[str, str]]:
    """The fields an import kept that the protocol does not know (the payload's ``extra``,
    annotation/importing/formats.py), as (name, value as JSON text) for the review page; never
    part of what an annotator receives (`annotator_item_payload` is an allow-list). None of a
    pending item, as the review API shows nothing of it: a reviewer may still answer it blind."""
    extra = (
        Item.objects.filter(project=project, pk=item_id)
        .exclude(status=ItemStatus.PENDING)
        .values_list("payload__extra", flat=True)
        .first()
    )
    if not isinstance(extra, dict):
        return []
    out = []
    for name, value in extra.items():
        text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
        out.append((name, text if len(text) <= KEPT_VALUE_CHARS else text[: KEPT_VALUE_CHARS - 1] + "…"))
    return out


def item_review_detail(*, item) -> dict:
    """Everything a reviewer needs: the full payload (with truth), all annotations, disagreements."""
    project = item.project
    assets = media_urls_for(items=[item])
    media = {name: _media_field(item, name, assets) for name in (item.media or {})}
    annotations = list(item.annotations.select_related("annotator").order_by("pk"))
    disagreement = find_disagreement(
        project.workflow,
        [(a.pk, a.result) for a in annotations],
        thresholds_from(project.settings, project=project.slug),
    )
    for entry in (disagreement or {}).get("fields", []):
        entry["label"] = field_label(project.workflow, entry["field"], registry.get(project.protocol).criterion_labels)
    reopening = (
        ItemReopening.objects.filter(item=item).order_by("-created_at", "-pk").first()
        if item.status == ItemStatus.ANNOTATED
        else None
    )
    return {
        "item": {
            "id": item.pk,
            "external_id": item.external_id,
            "status": item.status,
            "is_gold": item.is_gold,
            "annotation_count": item.annotation_count,
            "workflow": project.workflow,
            "protocol": project.protocol,
            "payload": item.payload,
            "media": media,
            "candidates": box_candidates(project=project, payload=item.payload) if project.workflow == "box" else None,
        },
        "annotations": [
            {
                "id": a.pk,
                "annotator": a.annotator.username if a.annotator else a.external_rater,
                "result": a.result,
                "time_spent_ms": a.time_spent_ms,
                "created_at": a.created_at.isoformat(),
            }
            for a in annotations
        ],
        "disagreements": field_disagreements(
            project.workflow, [(a.pk, a.result) for a in annotations], protocol=project.protocol
        ),
        # Beyond the project's thresholds (what marks the item for adjudication), computed afresh;
        # each field with the annotation form's label.
        "disagreement": disagreement,
        "field_labels": review_field_labels(project=project),
        # The form's shape for this item (a reviewer sees the truth anyway): media, criteria,
        # fields, and for a QA item the answer it takes ({format, n_options, multiple}).
        "form": {
            **(form := workflow_form(project=project, review=True)),
            **(
                qa_shape(protocol=project.protocol, payload=item.payload, project_settings=project.settings)
                if project.workflow == "qa"
                else {}
            ),
            # A labelling pass's item: reviewed as choices of the fields it asked (fill_form.py).
            **({"review": fill_review_form(item, form["media"])} if item.fill_fields else {}),
        },
        # Why a verified item is back in review (a participant's rejection took what it rested on).
        "reopened": (
            {"reason": reopening.reason, "decision": reopening.decision, "at": reopening.created_at.isoformat()}
            if reopening is not None
            else None
        ),
        # Oldest first; an edit names the annotation it started from; a voided decision shows no answer.
        "reviews": review_history(item=item),
        # Labels the item came with from its import, acceptable as they are; not an annotation.
        "imported": item_imported_labels(item=item),
    }
