"""Read paths of the annotation app."""
from django.db.models import Count, QuerySet

from .models import Project
from .permissions import projects_visible_to, role_in


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
    """sha256 -> {"url", "width", "height", "kind"} for every asset the items reference."""
    from django.conf import settings

    from .models import MediaAsset

    hashes: set[str] = set()
    for item in items:
        for value in (item.media or {}).values():
            hashes.update(value if isinstance(value, list) else [value])
    if not hashes:
        return {}
    assets = MediaAsset.objects.filter(sha256__in=hashes).only("sha256", "file", "width", "height", "kind")
    return {
        a.sha256: {"url": settings.MEDIA_URL + a.file.name, "width": a.width, "height": a.height, "kind": a.kind}
        for a in assets
    }


def _media_field(item, name: str, assets: dict[str, dict]):
    value = (item.media or {}).get(name)
    if isinstance(value, list):
        return [assets.get(h) for h in value]
    return assets.get(value) if value else None


def box_candidates(*, project, payload: dict) -> list[str]:
    """State labels to choose from, in a neutral (alphabetical) order that does not single out the truth."""
    labels = {payload.get("state")} | set(payload.get("distractors") or [])
    labels |= set((project.settings.get("state_labels") or {}).get(payload.get("object"), []))
    return sorted((x for x in labels if isinstance(x, str) and x), key=lambda s: (s.lower(), s))


def qa_shape(*, protocol: str, payload: dict) -> dict:
    """The answer format an annotator is asked for (the same facts a model's prompt states)."""
    if protocol == "m3verse":
        answer = payload.get("answer") or []
        multiple = payload.get("multiple")
        if multiple is None:
            multiple = len(answer) > 1
        return {"format": "choice", "n_options": len(payload.get("options") or []), "multiple": bool(multiple)}
    fmt = payload.get("format") or "choice"
    return {"format": fmt, "n_options": len(payload.get("options") or []), "multiple": False}


def rubric_for(*, project) -> dict[str, str]:
    """Per-criterion rubric: the project's own wording (settings["rubric"]) over the default."""
    rubric = dict(DEFAULT_OSC_RUBRIC)
    custom = project.settings.get("rubric")
    if isinstance(custom, dict):
        rubric.update({k: str(v) for k, v in custom.items() if k in rubric and v})
    return rubric


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
        shape = qa_shape(protocol=project.protocol, payload=item.payload)
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
    if protocol == "status":
        out["image_a"] = _media_field(item, "image_a", assets)
        out["image_b"] = _media_field(item, "image_b", assets)
        out["suggestions"] = [
            {"source": s.source, "machine_made": True, "result": s.result}
            for s in Suggestion.objects.filter(item=item).order_by("created_at", "pk")
        ]
    elif protocol == "changeit":
        out["image"] = _media_field(item, "image", assets)
        out["object"] = payload.get("object")
        out["candidates"] = box_candidates(project=project, payload=payload)
        out["outcomes"] = ["nothing_to_label", "cannot_determine"]
    elif protocol in ("visualtrans", "m3verse"):
        if protocol == "visualtrans":
            out["images"] = _media_field(item, "images", assets) or []
        else:
            out["video_before"] = _media_field(item, "video_before", assets)
            out["video_after"] = _media_field(item, "video_after", assets)
        shape = qa_shape(protocol=protocol, payload=payload)
        out["question"] = payload.get("question")
        out["options"] = [{"letter": LETTERS[i], "text": t} for i, t in enumerate(payload.get("options") or [])]
        out["format"] = shape["format"]
        out["multiple"] = shape["multiple"]
        out["flags"] = list(QA_FLAGS)
    elif protocol == "oscbench":
        rubric = rubric_for(project=project)
        out["video"] = _media_field(item, "video", assets)
        out["prompt"] = payload.get("prompt")
        out["criteria"] = [
            {"key": c, "label": OSC_CRITERION_LABELS[c], "allows_na": c in OSC_NULLABLE, "rubric": rubric[c]}
            for c in OSC_CRITERIA
        ]
        out["rubric"] = rubric
        if isinstance(project.settings.get("rubric"), str):  # one text for the whole scale
            out["rubric_text"] = project.settings["rubric"]
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

def item_status_counts(*, project) -> dict[str, int]:
    from .models import Item, ItemStatus

    counts = {s: 0 for s in ItemStatus.values}
    for row in Item.objects.filter(project=project).values("status").annotate(n=Count("id")).order_by():
        counts[row["status"]] = row["n"]
    return counts


def review_queue_for(*, project, limit: int = 100, offset: int = 0) -> dict:
    """Items waiting for a reviewer (status annotated), oldest first, with the project's counts."""
    from .models import Item, ItemStatus

    rows = (
        Item.objects.filter(project=project, status=ItemStatus.ANNOTATED)
        .order_by("id")
        .values("id", "external_id", "annotation_count", "is_gold", "updated_at")[offset : offset + limit]
    )
    return {
        "counts": item_status_counts(project=project),
        "items": [{**r, "updated_at": r["updated_at"].isoformat()} for r in rows],
    }


def item_review_detail(*, item) -> dict:
    """Everything a reviewer needs: the full payload (with truth), all annotations, disagreements."""
    from .agreement import field_disagreements

    project = item.project
    assets = media_urls_for(items=[item])
    media = {name: _media_field(item, name, assets) for name in (item.media or {})}
    annotations = list(item.annotations.select_related("annotator").order_by("pk"))
    reviews = item.reviews.select_related("reviewer").order_by("created_at", "pk")
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
        "reviews": [
            {
                "decision": r.decision,
                "reviewer": r.reviewer.username if r.reviewer else None,
                "annotation": r.accepted_annotation_id,
                "result": r.result,
                "comment": r.comment,
                "created_at": r.created_at.isoformat(),
            }
            for r in reviews
        ],
    }


def project_agreement(*, project) -> dict:
    """Progress and agreement of a project: per status, per annotator and per workflow."""
    from collections import defaultdict
    from itertools import combinations

    from . import agreement
    from .models import Annotation, Item, ItemStatus

    workflow = project.workflow
    rows = (
        Annotation.objects.filter(item__project=project)
        .order_by("item_id", "pk")
        .values_list("item_id", "annotator__username", "external_rater", "result", "time_spent_ms", "item__is_gold")
        .iterator(chunk_size=5000)
    )
    by_item: dict[int, list[tuple[str, dict]]] = defaultdict(list)
    gold_rows: list[tuple[int, str, dict]] = []
    times: dict[str, list[int]] = defaultdict(list)
    counts: dict[str, int] = defaultdict(int)
    for item_id, username, rater, result, ms, is_gold in rows:
        who = username or rater
        counts[who] += 1
        times[who].append(ms)
        if is_gold:
            gold_rows.append((item_id, who, result))
        else:
            by_item[item_id].append((who, result))

    # Payloads only where needed: gold items (known answers) and, for QA, the verified truth.
    gold: dict[str, list[bool]] = defaultdict(list)
    if gold_rows:
        payloads = dict(Item.objects.filter(pk__in={i for i, _, _ in gold_rows}).values_list("id", "payload"))
        for item_id, who, result in gold_rows:
            ok = agreement.gold_correct(workflow, payloads[item_id], result)
            if ok is not None:
                gold[who].append(ok)

    pair_scores: dict[str, list[float]] = defaultdict(list)
    for entries in by_item.values():
        for (a, ra), (b, rb) in combinations(entries, 2):
            score = agreement.pair_agreement(workflow, ra, rb)
            if score is not None:
                pair_scores[a].append(score)
                pair_scores[b].append(score)

    results_per_item = [[r for _, r in entries] for entries in by_item.values()]
    if workflow == "box":
        summary = agreement.box_summary(results_per_item)
    elif workflow == "qa":
        truth = dict(Item.objects.filter(project=project, status=ItemStatus.VERIFIED, pk__in=list(by_item))
                     .values_list("id", "payload__answer"))
        summary = agreement.qa_summary([(truth[i], [r.get("answer") for _, r in e]) for i, e in by_item.items() if i in truth])
        everything = agreement.qa_summary([(None, [r.get("answer") for _, r in e]) for e in by_item.values()])
        summary["pairs"] = everything["pairs"]
        summary["pairwise_agreement"] = everything["pairwise_agreement"]
        summary["truth"] = "verified items only"
    elif workflow == "quintuplet":
        summary = agreement.quintuplet_summary(results_per_item)
    else:
        summary = agreement.rating_summary(results_per_item)
    summary["kind"] = str(workflow)

    annotators = []
    for who in sorted(counts):
        scores = pair_scores.get(who, [])
        marks = gold.get(who, [])
        annotators.append({
            "annotator": who,
            "annotations": counts[who],
            "median_seconds": agreement.median_seconds(times[who]),
            "gold_items": len(marks),
            "gold_accuracy": round(sum(marks) / len(marks), 4) if marks else None,
            "agreement": round(sum(scores) / len(scores), 4) if scores else None,
            "pairs": len(scores),
        })
    return {
        "project": project.slug,
        "annotations_per_item": project.annotations_per_item,
        "status_counts": item_status_counts(project=project),
        "annotators": annotators,
        "workflow": summary,
    }
