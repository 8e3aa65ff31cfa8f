"""Progress and agreement figures of a project (reads): items per status, gold items apart (the
overview, the review queue's counts), and the agreement page's figures (project_agreement). The big
counts are computed by PostgreSQL; the agreement statistics stream annotations item by item through
agreement.ProjectAgreement, so a request never holds a project's annotations in memory."""

from django.db.models import Aggregate, Count, FloatField

from . import agreement
from .models import Annotation, Item, ItemStatus, Project


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
    # An imported aggregated rating (the mean of several raters) is no one rater: left out of every
    # figure below and counted apart.
    every = Annotation.objects.filter(item__project=project)
    aggregated = every.filter(aggregate_raters__isnull=False).count()
    annotations = every.filter(aggregate_raters__isnull=True)
    workload = (
        annotations.values_list("annotator__username", "external_rater")
        .annotate(n=Count("id"), median_ms=_Median("time_spent_ms"))
        .order_by()
    )

    figures = agreement.ProjectAgreement(workflow, protocol=project.protocol)
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
    rows = scored.order_by("item_id", "pk").values_list(*columns).iterator(chunk_size=chunk_size)
    for _item_id, entries in agreement.group_by_item(rows):
        pairs = [(_annotator_name(e[1], e[2]), e[3]) for e in entries]
        if workflow == "qa" and entries[0][4] == verified:
            figures.add_item(pairs, truth=entries[0][5])
        else:
            figures.add_item(pairs)

    gold: dict[str, list[bool]] = {}
    gold_rows = (
        annotations.filter(item__is_gold=True)
        .values_list("annotator__username", "external_rater", "result", "item__payload")
        .iterator(chunk_size=chunk_size)
    )
    for username, rater, result, payload in gold_rows:
        ok = agreement.gold_correct(workflow, payload, result, protocol=project.protocol)
        if ok is not None:
            gold.setdefault(_annotator_name(username, rater), []).append(ok)

    annotators = []
    for username, rater, n, median_ms in sorted(workload, key=lambda row: _annotator_name(row[0], row[1])):
        who = _annotator_name(username, rater)
        marks = gold.get(who, [])
        mean, pairs = figures.annotator_agreement(who)
        annotators.append(
            {
                "annotator": who,
                "annotations": n,
                "median_seconds": None if median_ms is None else round(median_ms / 1000, 3),
                "gold_items": len(marks),
                "gold_accuracy": round(sum(marks) / len(marks), 4) if marks else None,
                "agreement": mean,
                "pairs": pairs,
            }
        )
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
        "aggregated_ratings_left_out": aggregated,
        "workflow": summary,
    }
