"""Import human annotations made outside the platform (published human studies).

- rating projects take Likert ratings ``{"item", "rater", "scores": {criterion: 1..5 | null}}``;
- QA projects take blind QA answers ``{"item", "annotator", "answer", "flags"}``.

Each line becomes one `Annotation` with ``external_rater`` set (no platform user) and
``source="import"``, its result in the form a submit of it stores (annotation.canonical). Same
all-or-nothing, two-pass, streaming scheme as the item importer: the (item, rater) pair is
unique; re-importing an identical line changes nothing, a different result for an existing pair
is refused. Each new annotation counts toward the item's ``annotation_count``; a pending item
that reaches the project's ``annotations_per_item`` becomes annotated. Gold items are the
exception, as with a submit: their annotations are scored against the known answer (gold
accuracy) and never count, so a gold item stays pending.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import transaction
from django.db.models import F

from annotation.audit.record import audit_record
from annotation.models import Annotation, AuditAction, Item, ItemStatus, Project
from annotation.results import RatingContext
from annotation.verification import items_mark_disagreement, project_settings_to_mark
from protocols import registry
from protocols.fields import NUL_REASON, FieldError, nul_field

from .annotation_lines import CheckedAnnotation, check_qa_answer, check_rating
from .common import ErrorLog, ImportRefused, KeySeen, parse_json_line, report_duplicates
from .sources import DirectorySource, ReadMeter

CHUNK = 1000


@dataclass
class AnnotationImportReport:
    lines: int = 0
    created: int = 0
    unchanged: int = 0
    items_touched: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "lines": self.lines,
            "created": self.created,
            "unchanged": self.unchanged,
            "items_touched": self.items_touched,
        }


def _check_line(project: Project, obj: Any, item_payload: dict | None) -> CheckedAnnotation | list:
    if not isinstance(obj, dict):
        return [FieldError("-", "a line must be a JSON object")]
    if project.workflow == "rating":
        proto = registry.get(project.protocol)
        return check_rating(obj, RatingContext(criteria=proto.criteria, nullable=proto.nullable))
    return check_qa_answer(obj, project.protocol, item_payload, project_settings=project.settings)


def _pair_key(item: str, rater: str) -> str:
    return json.dumps([item, rater])


def _chunks(project: Project, source: DirectorySource, errors: ErrorLog):
    """Yield lists of (line, decoded object) of at most CHUNK lines; JSON errors are logged."""
    chunk: list[tuple[int, Any]] = []
    for line, text in source.lines():
        obj = parse_json_line(line, text, errors)
        if obj is None:
            continue
        if "\\u0000" in text and (nul := nul_field(obj)) is not None:  # JSON spells a NUL only so
            errors.add(line, nul, NUL_REASON)
            continue
        chunk.append((line, obj))
        if len(chunk) >= CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _items_of(project: Project, chunk: list[tuple[int, Any]]) -> dict[str, tuple[int, dict]]:
    ids = {obj.get("item") for _line, obj in chunk if isinstance(obj, dict) and isinstance(obj.get("item"), str)}
    return {
        ext: (pk, payload)
        for ext, pk, payload in Item.objects.filter(project=project, external_id__in=ids).values_list(
            "external_id", "id", "payload"
        )
    }


def _existing(item_ids: list[int]) -> dict[tuple[int, str], dict]:
    rows = Annotation.objects.filter(item_id__in=item_ids).exclude(external_rater="")
    return {(i, r): res for i, r, res in rows.values_list("item_id", "external_rater", "result")}


def annotations_import(
    *,
    project: Project,
    path: Path,
    actor=None,
    run_id: int | None = None,
    progress: ReadMeter | None = None,
) -> AnnotationImportReport:
    """Import the annotations in `path` into `project`, all or nothing (see the module); audited as
    `actor`'s import (of import run `run_id`); `progress` counts the reads of the file."""
    if project.workflow not in ("rating", "qa"):
        rating, qa = (" and ".join(registry.with_workflow(w)) for w in ("rating", "qa"))
        raise ImportRefused(
            [
                f"file: field -: project {project.slug} ({project.protocol}) takes no imported annotations; "
                f"ratings go to {rating} projects, blind QA answers to {qa} projects"
            ]
        )
    kind = "rating" if project.workflow == "rating" else "qa_answer"
    rater_field = "rater" if kind == "rating" else "annotator"
    path = Path(path)
    if not path.is_file():
        raise ImportRefused([f"file: field -: {path.name}: no such file"])
    source = DirectorySource(path, path.parent, max_bytes=0)
    if progress is not None:
        source.follow(progress, passes=2)  # validate, then write
    errors = ErrorLog()
    report = AnnotationImportReport()
    pairs = KeySeen()

    # Pass 1: validate every line against its item.
    for chunk in _chunks(project, source, errors):
        items = _items_of(project, chunk)
        existing = _existing([pk for pk, _ in items.values()])
        for line, obj in chunk:
            report.lines += 1
            item_ref = items.get(obj.get("item")) if isinstance(obj, dict) else None
            checked = _check_line(project, obj, item_ref[1] if item_ref else None)
            if isinstance(checked, list):
                for err in checked:
                    errors.add(line, err.field, err.reason)
                continue
            pairs.add(_pair_key(checked.item, checked.rater))
            if item_ref is None:
                errors.add(line, "item", f"no item {checked.item!r} in project {project.slug}")
                continue
            before = existing.get((item_ref[0], checked.rater))
            if before is not None:
                if before == checked.result:
                    report.unchanged += 1
                else:
                    errors.add(
                        line,
                        rater_field,
                        f"{checked.rater!r} already has a different annotation of item {checked.item!r}",
                    )
    colliding = pairs.colliding()
    if colliding:

        def keyed():
            for line, text in source.lines():
                obj = parse_json_line(line, text, ErrorLog())
                if isinstance(obj, dict) and isinstance(obj.get("item"), str) and isinstance(obj.get(rater_field), str):
                    yield line, _pair_key(obj["item"], obj[rater_field])

        report_duplicates(keyed(), colliding, errors, field_name=rater_field, what="(item, rater) pair")
    if report.lines == 0 and not errors:
        errors.add("file", "-", "holds no annotations")
    if errors:
        raise errors.refuse()

    # Pass 2: write, one transaction.
    with transaction.atomic():
        # The marking lock, shared, before any item row: a threshold change going on now commits
        # first and its thresholds are read here; one coming later waits and re-marks these items
        # (verification.py). Before the rows, because this may add annotations to items the change
        # is re-marking.
        project.settings = project_settings_to_mark(project=project)
        touched: set[int] = set()
        for chunk in _chunks(project, source, ErrorLog()):
            items = _items_of(project, chunk)
            existing = _existing([pk for pk, _ in items.values()])
            rows: list[Annotation] = []
            for _line, obj in chunk:
                checked = _check_line(project, obj, items[obj["item"]][1])
                item_pk = items[checked.item][0]
                if (item_pk, checked.rater) in existing:
                    continue
                rows.append(
                    Annotation(item_id=item_pk, external_rater=checked.rater, result=checked.result, source="import")
                )
            Annotation.objects.bulk_create(rows)
            per_item = Counter(a.item_id for a in rows)
            by_count: dict[int, list[int]] = {}
            for pk, n in per_item.items():
                by_count.setdefault(n, []).append(pk)
            for n, pks in by_count.items():  # gold items are never counted (they stay pending)
                Item.objects.filter(pk__in=pks, is_gold=False).update(annotation_count=F("annotation_count") + n)
            Item.objects.filter(
                pk__in=list(per_item),
                status=ItemStatus.PENDING,
                is_gold=False,
                annotation_count__gte=project.annotations_per_item,
            ).update(status=ItemStatus.ANNOTATED)
            touched.update(per_item)
            report.created += len(rows)
        # Imported raters who disagree mark their items for adjudication, as submits do.
        items_mark_disagreement(project=project, item_ids=sorted(touched))
        audit_record(
            action=AuditAction.IMPORT,
            actor=actor,
            project=project,
            object_type="annotations import",
            object_repr=path.name,
            details={
                "kind": "annotations",
                "run": run_id,
                "lines": report.lines,
                "created": report.created,
                "unchanged": report.unchanged,
            },
        )
    report.items_touched = len(touched)
    report.by_kind = {kind: report.created}
    return report
