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

Aggregated ratings (``"aggregate": {"raters": N}``: the means of N raters of a study that
published only the means; annotation_lines.py) are stored with ``aggregate_raters`` set. Such a
rating is its item's only human rating: the import refuses it for an item that has other
annotations (or gets them in the same file), refuses a rater's own rating for an item that holds
one, and refuses it on a gold item (gold accuracy scores a rater; an aggregate has none). It
counts as one annotation and makes a pending item annotated: the study's raters are all in.

A file in one of the protocol's authors' formats of kind "annotations" (protocols/kit/releases.py;
``format_name`` forces one, None detects) is converted to annotation lines first and imported the
same way; the report names the format and what its reader mapped.
"""

from __future__ import annotations

import contextlib
import json
from array import array
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from django.db import transaction
from django.db.models import F

from annotation.audit.record import audit_record
from annotation.models import Annotation, AuditAction, Item, ItemStatus, Project
from annotation.protocols import custom_workflow, workflow_context
from annotation.queue.ranks import queue_ranks_refresh_soon
from annotation.results import RatingContext
from annotation.verification import items_mark_disagreement, project_settings_to_mark
from protocols import registry
from protocols.fields import NUL_REASON, UNSTORABLE_HINT, FieldError, nul_field, unstorable_value
from protocols.kit.releases import FormatRefused, ReleaseFormat

from .annotation_lines import CheckedAnnotation, check_qa_answer, check_rating
from .common import ErrorLog, ImportRefused, KeySeen, key_hash, parse_json_line, report_duplicates
from .conversion import OWN_FORMAT, import_workdir
from .sources import DirectorySource, ReadMeter, SourceError

CHUNK = 1000
OWN_LABEL = "StateLab annotation lines (JSONL)"


@dataclass
class AnnotationImportReport:
    lines: int = 0
    created: int = 0
    unchanged: int = 0
    items_touched: int = 0
    # Aggregated ratings created (the means of several raters; see the module).
    aggregated: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    # The format read (OWN_FORMAT or an authors' format's name), and what its reader mapped.
    format: str = OWN_FORMAT
    format_label: str = OWN_LABEL
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "lines": self.lines,
            "created": self.created,
            "unchanged": self.unchanged,
            "items_touched": self.items_touched,
            "aggregated": self.aggregated,
            "format": self.format,
            "format_label": self.format_label,
            "notes": self.notes,
        }


@dataclass
class _Held:
    """What an item already holds: (rater -> (result, aggregate raters)) of its external raters,
    and how many annotations it has in all (platform users' included)."""

    external: dict[str, tuple[dict, int | None]] = field(default_factory=dict)
    total: int = 0

    def aggregate(self) -> tuple[str, int] | None:
        return next(((r, n) for r, (_, n) in self.external.items() if n is not None), None)


def _check_line(project: Project, obj: Any, item_payload: dict | None) -> CheckedAnnotation | list:
    if not isinstance(obj, dict):
        return [FieldError("-", "a line must be a JSON object")]
    if project.workflow == "rating":
        proto = registry.get(project.protocol)
        return check_rating(obj, RatingContext(criteria=proto.criteria, nullable=proto.nullable))
    if (custom := custom_workflow(project.workflow)) is not None:  # a protocol's own form
        found = custom.check_line(obj, workflow_context(project.protocol, item_payload or {}))
        return found if isinstance(found, list) else CheckedAnnotation(*found)
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
        if UNSTORABLE_HINT.search(text) and (bad := unstorable_value(obj)) is not None:  # jsonb refuses it
            errors.add(line, *bad)
            continue
        chunk.append((line, obj))
        if len(chunk) >= CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _items_of(project: Project, chunk: list[tuple[int, Any]]) -> dict[str, tuple[int, dict, bool]]:
    ids = {obj.get("item") for _line, obj in chunk if isinstance(obj, dict) and isinstance(obj.get("item"), str)}
    return {
        ext: (pk, payload, gold)
        for ext, pk, payload, gold in Item.objects.filter(project=project, external_id__in=ids).values_list(
            "external_id", "id", "payload", "is_gold"
        )
    }


def _existing(item_ids: list[int]) -> dict[int, _Held]:
    out: dict[int, _Held] = {}
    rows = Annotation.objects.filter(item_id__in=item_ids).values_list(
        "item_id", "external_rater", "result", "aggregate_raters"
    )
    for item_id, rater, result, raters in rows:
        held = out.setdefault(item_id, _Held())
        held.total += 1
        if rater:
            held.external[rater] = (result, raters)
    return out


def _mixing_error(checked: CheckedAnnotation, held: _Held | None) -> str | None:
    """Why the line cannot join the item's annotations: an aggregate is an item's only one."""
    if held is None:
        return None
    others = held.total - (1 if checked.rater in held.external else 0)
    if checked.aggregate_raters is not None and others:
        return (
            f"item {checked.item!r} already has {others} annotation(s); an aggregated rating (the means of "
            "several raters) must be the item's only human rating"
        )
    found = held.aggregate()
    if checked.aggregate_raters is None and found is not None and found[0] != checked.rater:
        return (
            f"item {checked.item!r} holds an aggregated rating ({found[0]!r}, the means of {found[1]} raters); "
            "a rater's own rating cannot be added to it"
        )
    return None


def _report_mixed_in_file(
    source: DirectorySource, aggregate_lines: dict[str, int], own_items: array, errors: ErrorLog
) -> None:
    """A file that gives an item both an aggregated rating and a rater's own: name the lines (a
    second read, only of files where the item hashes meet; the real ids are compared)."""
    if not aggregate_lines or not own_items:
        return
    meeting = set(np.frombuffer(own_items, dtype=np.uint64).tolist()) & {key_hash(i) for i in aggregate_lines}
    if not meeting:
        return
    for line, text in source.lines():
        obj = parse_json_line(line, text, ErrorLog())
        item = obj.get("item") if isinstance(obj, dict) else None
        if isinstance(item, str) and "aggregate" not in obj and key_hash(item) in meeting and item in aggregate_lines:
            errors.add(
                line,
                "item",
                f"item {item!r} has an aggregated rating on line {aggregate_lines[item]}; a rater's own rating "
                "cannot be added to it",
            )


def annotation_formats(protocol: str) -> tuple[ReleaseFormat, ...]:
    """The protocol's authors' formats that give annotation lines."""
    return tuple(f for f in registry.get(protocol).formats if f.kind == "annotations")


def _detects(fmt: ReleaseFormat, path: Path) -> bool:
    # A detector only looks; one that trips over an odd file has not recognised it.
    try:
        return bool(fmt.detect(path))
    except (OSError, ValueError, TypeError, KeyError):
        return False


def _reader(protocol: str, path: Path, format_name: str | None) -> ReleaseFormat | None:
    """The authors' format to read `path` with, or None for the project's own annotation lines."""
    formats = annotation_formats(protocol)
    if format_name is not None and format_name != OWN_FORMAT:
        names = [OWN_FORMAT] + [f.name for f in formats]
        if format_name not in names:
            raise ImportRefused(
                [
                    f"file: field format: unknown format {format_name!r} for annotations of protocol {protocol}; "
                    f"the formats there are: {', '.join(names)}"
                ]
            )
        return next(f for f in formats if f.name == format_name)
    if format_name == OWN_FORMAT:
        return None
    found = [f for f in formats if _detects(f, path)]
    if len(found) > 1:
        names = ", ".join(f.name for f in found)
        raise ImportRefused([f"file: field format: {path.name} looks like several formats ({names}); name one"])
    return found[0] if found else None


@contextlib.contextmanager
def _annotations_file(
    protocol: str, path: Path, format_name: str | None, media_root: Path | None, report: AnnotationImportReport
) -> Iterator[Path]:
    """The annotation lines to import: `path` itself, or an authors' file converted (see the module)."""
    if not path.exists():
        raise ImportRefused([f"file: field -: {path.name}: no such file"])
    fmt = _reader(protocol, path, format_name)
    if fmt is None:
        if not path.is_file():
            raise ImportRefused([f"file: field -: {path.name} is a folder; expected a JSONL file of annotations"])
        yield path
        return
    report.format, report.format_label = fmt.name, fmt.label or fmt.name
    with import_workdir() as work:
        spool = work / "converted-annotations.jsonl"
        try:
            conversion = fmt.read(path, media_root=media_root)
            with open(spool, "w", encoding="utf-8") as out:
                for line in conversion.lines:
                    out.write(json.dumps(line, ensure_ascii=False, allow_nan=False) + "\n")
        except FormatRefused as exc:
            raise ImportRefused([f"file: field -: {exc} (read as {report.format_label})"]) from exc
        except (TypeError, ValueError) as exc:  # a line JSON cannot hold
            raise ImportRefused([f"file: field -: {path.name}: not convertible to annotation lines ({exc})"]) from exc
        report.notes = [str(n) for n in conversion.notes]
        yield spool


def annotations_import(
    *,
    project: Project,
    path: Path,
    actor=None,
    run_id: int | None = None,
    progress: ReadMeter | None = None,
    format_name: str | None = None,
    media_root: Path | None = None,
) -> AnnotationImportReport:
    """Import the annotations in `path` into `project`, all or nothing (see the module); audited as
    `actor`'s import (of import run `run_id`); `progress` counts the reads of the file.
    `format_name` names the file's format (None: detected); `media_root` is what an authors'
    reader may need besides the file (e.g. the release folder a rating protocol's videos lie in)."""
    if project.workflow not in ("rating", "qa") and custom_workflow(project.workflow) is None:
        rating, qa = (" and ".join(registry.with_workflow(w)) for w in ("rating", "qa"))
        raise ImportRefused(
            [
                f"file: field -: project {project.slug} ({project.protocol}) takes no imported annotations; "
                f"ratings go to {rating} projects, blind QA answers to {qa} projects"
            ]
        )
    report = AnnotationImportReport()
    with _annotations_file(project.protocol, Path(path), format_name, media_root, report) as lines_path:
        return _import_lines(
            project, lines_path, report, actor=actor, run_id=run_id, progress=progress, name=Path(path).name
        )


def _import_lines(
    project: Project,
    path: Path,
    report: AnnotationImportReport,
    *,
    actor,
    run_id: int | None,
    progress: ReadMeter | None,
    name: str,
) -> AnnotationImportReport:
    kind = "rating" if project.workflow == "rating" else "qa_answer"
    rater_field = "rater" if kind == "rating" else "annotator"
    if (custom := custom_workflow(project.workflow)) is not None:
        kind, rater_field = project.workflow, custom.IMPORT_RATER_FIELD
    try:
        source = DirectorySource(path, path.parent, max_bytes=0)
    except SourceError as exc:
        authors = ", ".join(f.name for f in annotation_formats(project.protocol))
        expected = "JSONL of annotation objects, one a line" + (f", or the authors' {authors}" if authors else "")
        raise ImportRefused([f"file: field -: {exc}" + (f"; expected {expected}" if exc.shape else "")]) from exc
    if progress is not None:
        source.follow(progress, passes=2)  # validate, then write
    errors = ErrorLog()
    pairs = KeySeen()
    # Items of the file's aggregated lines (id -> line) and a hash per rater's own line's item:
    # an item may not get both, nor two aggregates.
    aggregate_lines: dict[str, int] = {}
    own_items = array("Q")

    # Pass 1: validate every line against its item.
    for chunk in _chunks(project, source, errors):
        items = _items_of(project, chunk)
        existing = _existing([pk for pk, _, _ in items.values()])
        for line, obj in chunk:
            report.lines += 1
            item_ref = items.get(obj.get("item")) if isinstance(obj, dict) else None
            checked = _check_line(project, obj, item_ref[1] if item_ref else None)
            if isinstance(checked, list):
                for err in checked:
                    errors.add(line, err.field, err.reason)
                continue
            pairs.add(_pair_key(checked.item, checked.rater))
            if checked.aggregate_raters is None:
                own_items.append(key_hash(checked.item))
            elif checked.item in aggregate_lines:
                errors.add(
                    line,
                    "aggregate",
                    f"item {checked.item!r} already has an aggregated rating on line "
                    f"{aggregate_lines[checked.item]}; an aggregated rating must be the item's only human rating",
                )
            else:
                aggregate_lines[checked.item] = line
            if item_ref is None:
                errors.add(line, "item", f"no item {checked.item!r} in project {project.slug}")
                continue
            if checked.aggregate_raters is not None and item_ref[2]:
                errors.add(
                    line,
                    "aggregate",
                    f"item {checked.item!r} is a gold item: its ratings score each rater against "
                    "the known answer, and an aggregated rating has no single rater",
                )
                continue
            held = existing.get(item_ref[0])
            before = held.external.get(checked.rater) if held is not None else None
            if before is not None:
                if before == (checked.result, checked.aggregate_raters):
                    report.unchanged += 1
                else:
                    errors.add(
                        line,
                        rater_field,
                        f"{checked.rater!r} already has a different annotation of item {checked.item!r}",
                    )
                continue
            if reason := _mixing_error(checked, held):
                errors.add(line, "aggregate" if checked.aggregate_raters is not None else "item", reason)
    _report_mixed_in_file(source, aggregate_lines, own_items, errors)
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
            existing = _existing([pk for pk, _, _ in items.values()])
            rows: list[Annotation] = []
            for _line, obj in chunk:
                checked = _check_line(project, obj, items[obj["item"]][1])
                item_pk = items[checked.item][0]
                if item_pk in existing and checked.rater in existing[item_pk].external:
                    continue
                rows.append(
                    Annotation(
                        item_id=item_pk,
                        external_rater=checked.rater,
                        result=checked.result,
                        source="import",
                        aggregate_raters=checked.aggregate_raters,
                    )
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
            # An aggregated rating holds all of the study's raters: its item is done.
            aggregated = [a.item_id for a in rows if a.aggregate_raters is not None]
            Item.objects.filter(pk__in=aggregated, status=ItemStatus.PENDING, is_gold=False).update(
                status=ItemStatus.ANNOTATED
            )
            touched.update(per_item)
            report.created += len(rows)
            report.aggregated += len(aggregated)
        # Imported raters who disagree mark their items for adjudication, as submits do.
        items_mark_disagreement(project=project, item_ids=sorted(touched))
        audit_record(
            action=AuditAction.IMPORT,
            actor=actor,
            project=project,
            object_type="annotations import",
            object_repr=name,
            details={
                "kind": "annotations",
                "run": run_id,
                "lines": report.lines,
                "created": report.created,
                "unchanged": report.unchanged,
                "aggregated": report.aggregated,
                "format": report.format,
            },
        )
        if report.created:
            queue_ranks_refresh_soon(project=project)  # imported votes re-rank a pair-matching queue
    report.items_touched = len(touched)
    report.by_kind = {kind: report.created}
    return report
