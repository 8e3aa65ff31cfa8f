"""Read paths of the annotation app."""
import statistics

from django.db import connection
from django.db.models import (
    Aggregate,
    BooleanField,
    Count,
    ExpressionWrapper,
    FloatField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
)

from . import agreement
from .disagreement import FIELD_LABELS, field_label, find_disagreement, thresholds_from
from .models import Annotation, Item, ItemReopening, ItemStatus, Project
from .permissions import projects_visible_to, role_in
from .project_setup import project_setting
from .protocols import OSC_CRITERIA, qa_shape
from .review_history import review_history


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
# What an annotator may see is built from an allow-list per protocol: ground truth and metadata
# (answers, subtasks, scenes, contexts, capabilities, generators, ...) never leave the server for
# an annotator, including on gold items, which look exactly like the others.

DEFAULT_OSC_RUBRIC = {
    "subject": "Does the video show the subject the prompt names (a person, a hand, an animal), looking like it should? 1 = missing or wrong, 5 = clearly right. N/A when the prompt names no subject.",
    "object": "Does the object that should change appear, recognisable and the right kind? 1 = missing or another object, 5 = clearly the right object.",
    "action": "Is the action of the prompt carried out on the object? 1 = no such action, 5 = the action as described.",
    "osc_accuracy": "Does the object end in the state the prompt asks for (sliced, melted, folded, ...)? 1 = no change or the wrong one, 5 = exactly the intended end state.",
    "osc_consistency": "Does the change unfold believably and stay put: no jumps back, no object swapping identity, no state appearing from nowhere? 1 = incoherent, 5 = smooth and stable.",
    "scene": "Does the setting match the place the prompt describes? 1 = wrong place, 5 = as described. N/A when the prompt names no scene.",
    "realism": "Would the video pass for real footage: physics, hands, textures, lighting? 1 = clearly synthetic and broken, 5 = convincing.",
    "aesthetics": "Is the video pleasant to watch: framing, sharpness, colour, no flicker? 1 = poor, 5 = excellent.",
}
OSC_CRITERION_LABELS = {
    "subject": "Subject",
    "object": "Object",
    "action": "Action",
    "osc_accuracy": "State change: accuracy",
    "osc_consistency": "State change: consistency",
    "scene": "Scene",
    "realism": "Realism",
    "aesthetics": "Aesthetics",
}


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
    rubric = dict(DEFAULT_OSC_RUBRIC)
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
    return project.workflow in ("quintuplet", "qa") and project_setting(project.settings, "suggestions", True,
                                                                              project=project.slug)


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


def result_context_for(*, item):
    """What results.validate_result needs to check a result for this item."""
    from .protocols import OSC_CRITERIA, OSC_NULLABLE
    from .results import BoxContext, QAContext, RatingContext

    project = item.project
    workflow = project.workflow
    if workflow == "box":
        image = _media_field(item, "image", media_urls_for(items=[item])) or {}
        return BoxContext(width=image.get("width"), height=image.get("height"),
                          labels=tuple(box_candidates(project=project, payload=item.payload)))
    if workflow == "qa":
        shape = qa_shape(protocol=project.protocol, payload=item.payload, project_settings=project.settings)
        return QAContext(format=shape["format"], n_options=shape["n_options"], multiple=shape["multiple"])
    if workflow == "rating":
        return RatingContext(criteria=OSC_CRITERIA, nullable=OSC_NULLABLE)
    return None


def annotator_item_payload(*, item) -> dict:
    """The annotator-safe view of an item (an allow-list per protocol)."""
    from .models import Suggestion
    from .protocols import LETTERS, OSC_CRITERIA, OSC_NULLABLE, QA_FLAGS

    project = item.project
    protocol, workflow = project.protocol, project.workflow
    payload = item.payload or {}
    assets = media_urls_for(items=[item])
    out: dict = {"id": item.pk, "workflow": workflow, "protocol": protocol}

    def suggestions():
        # Machine-made answers, newest first: the pages pre-fill from the first one. Built only for
        # the protocols that show them: a ChangeIt or OSC-Bench claim no longer builds a queryset.
        # None at all when the project turned them off (e.g. to keep QA answers blind).
        if not shows_suggestions(project=project):
            return Suggestion.objects.none()
        return Suggestion.objects.filter(item=item).order_by("-created_at", "-pk")

    if protocol == "status":
        out["image_a"] = _media_field(item, "image_a", assets)
        out["image_b"] = _media_field(item, "image_b", assets)
        out["suggestions"] = [{"source": s.source, "machine_made": True, "result": s.result} for s in suggestions()]
    elif protocol == "changeit":
        # Not blind: the annotator confirms the listed state or corrects it from the candidates.
        candidates = box_candidates(project=project, payload=payload)
        listed = payload.get("state")
        out["image"] = _media_field(item, "image", assets)
        out["object"] = payload.get("object")
        out["proposed_state"] = listed if listed in candidates else None
        out["candidates"] = candidates
        out["outcomes"] = ["nothing_to_label", "cannot_determine"]
    elif protocol in ("visualtrans", "m3verse"):
        if protocol == "visualtrans":
            out["images"] = _media_field(item, "images", assets) or []
        else:
            out["video_before"] = _media_field(item, "video_before", assets)
            out["video_after"] = _media_field(item, "video_after", assets)
        shape = qa_shape(protocol=protocol, payload=payload, project_settings=project.settings)
        out["question"] = payload.get("question")
        out["options"] = [{"letter": LETTERS[i], "text": t} for i, t in enumerate(payload.get("options") or [])]
        out["format"] = shape["format"]
        out["multiple"] = shape["multiple"]
        out["flags"] = list(QA_FLAGS)
        # Only the model's answer, in the form's shape; never anything from the item's payload.
        out["suggestions"] = [
            {"source": s.source, "machine_made": True, "result": {"answer": answer}}
            for s in suggestions()
            if (answer := qa_suggested_answer(shape=shape, answer=(s.result or {}).get("answer"))) is not None
        ]
    elif protocol == "oscbench":
        rubric = rubric_for(project=project)
        out["video"] = _media_field(item, "video", assets)
        out["prompt"] = payload.get("prompt")
        out["criteria"] = [
            {"key": c, "label": OSC_CRITERION_LABELS[c], "allows_na": c in OSC_NULLABLE, "rubric": rubric[c]}
            for c in OSC_CRITERIA
        ]
        out["rubric"] = rubric
        out["rubric_text"] = rubric_text_for(project=project)  # one text for the whole scale, if any
        out["scale"] = [1, 2, 3, 4, 5]
    return out


def task_view(*, task) -> dict:
    """The JSON an annotator gets for a held task."""
    return {
        "task": task.pk,
        "item": annotator_item_payload(item=task.item),
        "draft": task.draft or {},
        "version": task.draft_version,
        "lease_expires": task.lease_expires.isoformat(),
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


# --- review and agreement ----------------------------------------------------------------------

def item_counts(*, project: Project) -> dict:
    """Items per status, not counting gold items, and the number of gold items apart: a gold item
    stays pending for good (every annotator may get it), so counting it would keep progress from
    ever finishing."""
    counts = {s: 0 for s in ItemStatus.values}
    gold = 0
    rows = Item.objects.filter(project=project).values_list("status", "is_gold").annotate(n=Count("id")).order_by()
    for status, is_gold, n in rows:
        if is_gold:
            gold += n
        else:
            counts[status] = n
    return {"status_counts": counts, "gold_items": gold}


def item_status_counts(*, project) -> dict[str, int]:
    """Items per status, gold items not counted (they stay pending for good)."""
    return item_counts(project=project)["status_counts"]


def _reopened_reason():
    """The reason of the item's latest reopening (a verified item a participant's rejection sent
    back), for items in the review queue: an annotated item that has one was not reviewed since
    (a review makes it verified or discarded, and only a reopening makes it annotated again)."""
    return Subquery(ItemReopening.objects.filter(item=OuterRef("pk")).order_by("-created_at", "-pk").values("reason")[:1])


def review_queue_for(*, project, limit: int = 100, offset: int = 0) -> dict:
    """Items waiting for a reviewer (status annotated): those whose annotators disagree or that a
    rejection sent back to review first (to adjudicate), then oldest first; each with the fields in
    dispute (keys, and the annotation form's labels of them) and why it was sent back; and the
    project's counts."""
    rows = (
        Item.objects.filter(project=project, status=ItemStatus.ANNOTATED)
        .annotate(reopened=_reopened_reason())
        .alias(agreed=ExpressionWrapper(Q(disagreement__isnull=True) & Q(reopened__isnull=True),
                                        output_field=BooleanField()))
        .order_by("agreed", "id")
        .values("id", "external_id", "annotation_count", "is_gold", "updated_at", "disagreement",
                "reopened")[offset : offset + limit]
    )
    items = []
    for r in rows:
        fields = [f["field"] for f in (r["disagreement"] or {}).get("fields", [])]
        items.append({**r, "updated_at": r["updated_at"].isoformat(), "disagreement": fields,
                      "disagreement_labels": [field_label(project.workflow, f, OSC_CRITERION_LABELS) for f in fields]})
    return {"counts": item_status_counts(project=project), "items": items}


def review_field_labels(*, project) -> dict[str, str]:
    """Result field -> the annotation form's label, for the fields a reviewer compares."""
    if project.workflow == "rating":
        return {f"scores.{c}": OSC_CRITERION_LABELS[c] for c in OSC_CRITERIA}
    return dict(FIELD_LABELS.get(project.workflow, {}))


def item_review_detail(*, item) -> dict:
    """Everything a reviewer needs: the full payload (with truth), all annotations, disagreements."""
    from .agreement import field_disagreements

    project = item.project
    assets = media_urls_for(items=[item])
    media = {name: _media_field(item, name, assets) for name in (item.media or {})}
    annotations = list(item.annotations.select_related("annotator").order_by("pk"))
    disagreement = find_disagreement(project.workflow, [(a.pk, a.result) for a in annotations],
                                     thresholds_from(project.settings, project=project.slug))
    for entry in (disagreement or {}).get("fields", []):
        entry["label"] = field_label(project.workflow, entry["field"], OSC_CRITERION_LABELS)
    reopening = (ItemReopening.objects.filter(item=item).order_by("-created_at", "-pk").first()
                 if item.status == ItemStatus.ANNOTATED else None)
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
        "disagreements": field_disagreements(project.workflow, [(a.pk, a.result) for a in annotations]),
        # Beyond the project's thresholds (what marks the item for adjudication), computed afresh;
        # each field with the annotation form's label.
        "disagreement": disagreement,
        "field_labels": review_field_labels(project=project),
        # Why a verified item is back in review (a participant's rejection took what it rested on).
        "reopened": ({"reason": reopening.reason, "decision": reopening.decision, "at": reopening.created_at.isoformat()}
                     if reopening is not None else None),
        # Oldest first; an edit names the annotation it started from; a voided decision shows no answer.
        "reviews": review_history(item=item),
    }


# --- progress and agreement figures -------------------------------------------------------------
# Read-only aggregates behind the agreement page (project_agreement). The big counts are
# computed by PostgreSQL; the agreement statistics stream annotations item by item through
# agreement.ProjectAgreement, so a request never holds a project's annotations in memory.

class _Median(Aggregate):
    function = "percentile_cont"
    template = "%(function)s(0.5) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()


def _annotator_name(username: str | None, rater: str) -> str:
    return username or rater


def project_agreement(*, project: Project, chunk_size: int = 5000) -> dict:
    """Progress and agreement of a project: items per status (gold apart), per annotator
    (annotations and median time from SQL, gold accuracy, pairwise agreement) and per workflow."""
    workflow = project.workflow
    annotations = Annotation.objects.filter(item__project=project)
    if connection.vendor == "postgresql":
        workload = (annotations.values_list("annotator__username", "external_rater")
                    .annotate(n=Count("id"), median_ms=_Median("time_spent_ms")).order_by())
    else:  # the SQLite demo has no percentile_cont: medians in Python
        spent: dict[tuple, list[int]] = {}
        for username, rater, ms in annotations.values_list("annotator__username", "external_rater", "time_spent_ms").iterator():
            spent.setdefault((username, rater), []).append(ms or 0)
        workload = [(u, r, len(v), float(statistics.median(v))) for (u, r), v in spent.items()]

    figures = agreement.ProjectAgreement(workflow)
    verified = str(ItemStatus.VERIFIED)
    columns = ["item_id", "annotator__username", "external_rater", "result", "item__status"]
    if workflow == "qa":
        columns.append("item__payload__answer")
    scored = annotations.filter(item__is_gold=False)
    left_out = 0
    if workflow == "qa":
        # Blind figures: an answer given with a model suggestion on the form is not blind.
        left_out = scored.filter(with_suggestion=True).count()
        scored = scored.filter(with_suggestion=False)
    rows = (scored.order_by("item_id", "pk").values_list(*columns)
            .iterator(chunk_size=chunk_size))
    for _item_id, entries in agreement.group_by_item(rows):
        pairs = [(_annotator_name(e[1], e[2]), e[3]) for e in entries]
        if workflow == "qa" and entries[0][4] == verified:
            figures.add_item(pairs, truth=entries[0][5])
        else:
            figures.add_item(pairs)

    gold: dict[str, list[bool]] = {}
    gold_rows = (annotations.filter(item__is_gold=True)
                 .values_list("annotator__username", "external_rater", "result", "item__payload")
                 .iterator(chunk_size=chunk_size))
    for username, rater, result, payload in gold_rows:
        ok = agreement.gold_correct(workflow, payload, result)
        if ok is not None:
            gold.setdefault(_annotator_name(username, rater), []).append(ok)

    annotators = []
    for username, rater, n, median_ms in sorted(workload, key=lambda row: _annotator_name(row[0], row[1])):
        who = _annotator_name(username, rater)
        marks = gold.get(who, [])
        mean, pairs = figures.annotator_agreement(who)
        annotators.append({
            "annotator": who,
            "annotations": n,
            "median_seconds": None if median_ms is None else round(median_ms / 1000, 3),
            "gold_items": len(marks),
            "gold_accuracy": round(sum(marks) / len(marks), 4) if marks else None,
            "agreement": mean,
            "pairs": pairs,
        })
    summary = figures.summary()
    if workflow == "qa":
        summary["truth"] = "verified items only"
        summary["answers_with_suggestion_left_out"] = left_out
    summary["kind"] = str(workflow)
    counts = item_counts(project=project)
    return {
        "project": project.slug,
        "annotations_per_item": project.annotations_per_item,
        "status_counts": counts["status_counts"],
        "gold_items": counts["gold_items"],
        "annotators": annotators,
        "workflow": summary,
    }
