"""A labelling pass: verified items that lack some of the label fields their protocol lets a pass
fill (Protocol.fill_fields, e.g. fields a paper breaks its tables down by that the authors' release
does not carry) go back to the annotators' queue, asked for the missing fields only.

Starting one (the Settings page, the API, ``manage.py start_fill_pass``; a researcher or admin of
the project; audited as ``fill_pass``) sets, on each such item, ``fill_fields`` to the fields it
lacks, its status to pending and its count to 0: the queue hands it out as any pending item
(annotation/queue/, unchanged), the annotator's form shows the pair and the item's label texts and
asks only those fields (fill_form.py), a submit is checked against them, and a reviewer settles the
answers; the verified values then join the payload (services.review_decide,
verification.item_auto_verify), so a later freeze carries them. A frozen release keeps its own copy
of every item (ReleaseItem.payload) and never changes.

Left out, and counted in the report: gold items, and items that already have annotations (their
counts and answers are the record of how they were verified; the pass would mix two forms' answers).
"""

from __future__ import annotations

import functools
import operator
from collections import defaultdict
from typing import Any

from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from protocols import registry

from .audit.record import audit_record
from .fill_form import fillable
from .models import AuditAction, Item, ItemStatus, Project

CHUNK = 2000
AUDIT_IDS = 100  # external ids named in the audit event (the count is always there)


class FillPassRefused(ValueError):
    """A pass that cannot start: errors by field, nothing written. ``status``: 400 for a bad
    request, 409 when there is nothing to fill."""

    def __init__(self, errors: dict[str, str], status: int = 400):
        self.errors = dict(errors)
        self.status = status
        super().__init__("; ".join(f"{k}: {v}" for k, v in self.errors.items()))


def _missing(payload: dict, fields: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f for f in fields if (payload or {}).get(f) in (None, "", []))


def fill_pass_fields(project: Project, fields: Any = None) -> tuple[str, ...]:
    """The fields a pass over this project asks: those named (a list, each one of the protocol's
    fill fields) or, left out, all of them. FillPassRefused naming what was given and what is allowed."""
    proto = registry.get(project.protocol)
    allowed = tuple(fillable(proto))
    if not allowed or proto.workflow_module:
        raise FillPassRefused(
            {"protocol": f"Protocol {project.protocol} has no label fields a labelling pass can fill."}
        )
    if fields is None:
        return allowed
    if isinstance(fields, str):
        fields = [f.strip() for f in fields.split(",") if f.strip()]
    if not isinstance(fields, list) or not fields or not all(isinstance(f, str) for f in fields):
        raise FillPassRefused({"fields": f"Expected a list of one or more of: {', '.join(allowed)}; found {fields!r}."})
    unknown = [f for f in fields if f not in allowed]
    if unknown:
        raise FillPassRefused(
            {
                "fields": f"Not a field a labelling pass fills: {', '.join(map(repr, unknown))}. "
                f"Expected one or more of: {', '.join(allowed)}."
            }
        )
    return tuple(f for f in allowed if f in fields)


def _lacks(field: str) -> Q:
    """Items whose payload lacks `field` (no key, null or empty), as _missing reads one payload."""
    return (
        Q(**{f"payload__{field}__isnull": True})
        | Q(**{f"payload__{field}": None})
        | Q(**{f"payload__{field}": ""})
        | Q(**{f"payload__{field}": []})
    )


def fill_pass_plan(*, project: Project, fields: Any = None) -> dict[str, Any]:
    """What a pass would do now, without doing it (counted in the database, one query): the fields,
    how many verified items lack some of them (and how many lack each), how many of those it
    leaves out (they have annotations), and how many items a pass holds now."""
    asked = fill_pass_fields(project, fields)
    lacking = functools.reduce(operator.or_, (_lacks(f) for f in asked))
    open_ = Q(status=ItemStatus.VERIFIED, is_gold=False, annotation_count=0)
    counts = Item.objects.filter(project=project).aggregate(
        items=Count("pk", filter=open_ & lacking),
        skipped_annotated=Count(
            "pk", filter=Q(status=ItemStatus.VERIFIED, is_gold=False, annotation_count__gt=0) & lacking
        ),
        in_pass=Count("pk", filter=Q(status__in=(ItemStatus.PENDING, ItemStatus.ANNOTATED)) & ~Q(fill_fields=[])),
        **{f"missing_{f}": Count("pk", filter=open_ & _lacks(f)) for f in asked},
    )
    return {
        "fields": list(asked),
        "items": counts["items"],
        "missing": {f: counts[f"missing_{f}"] for f in asked},
        "skipped_annotated": counts["skipped_annotated"],
        "in_pass": counts["in_pass"],
    }


@transaction.atomic
def fill_pass_start(*, project: Project, actor=None, fields: Any = None) -> dict[str, Any]:
    """Start a pass (see the module): returns {"fields", "items", "missing", "skipped_annotated"}.
    The items are locked (id order, as a review locks its one item) and read again under the lock,
    so an item a reviewer or another pass changed meanwhile is judged as it is now."""
    asked = fill_pass_fields(project, fields)
    ids = list(
        Item.objects.filter(project=project, status=ItemStatus.VERIFIED, is_gold=False)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    groups: dict[tuple[str, ...], list[int]] = defaultdict(list)
    names: list[str] = []
    annotated = 0
    for start in range(0, len(ids), CHUNK):
        rows = (
            Item.objects.select_for_update(of=("self",))
            .filter(pk__in=ids[start : start + CHUNK], status=ItemStatus.VERIFIED, is_gold=False)
            .order_by("pk")
            .values_list("pk", "external_id", "payload", "annotation_count")
        )
        for pk, external_id, payload, count in rows:
            missing = _missing(payload, asked)
            if not missing:
                continue
            if count:
                annotated += 1
                continue
            groups[missing].append(pk)
            names.append(external_id)
    if not names:
        raise FillPassRefused(
            {
                "items": f"No verified item of project {project.slug} lacks {' or '.join(asked)} "
                "(gold items and items with annotations are left out): nothing to fill."
            },
            status=409,
        )
    now = timezone.now()
    missing_count = {f: 0 for f in asked}
    for missing, pks in groups.items():
        Item.objects.filter(pk__in=pks).update(
            status=ItemStatus.PENDING, fill_fields=list(missing), annotation_count=0, disagreement=None, updated_at=now
        )
        for f in missing:
            missing_count[f] += len(pks)
    report = {"fields": list(asked), "items": len(names), "missing": missing_count, "skipped_annotated": annotated}
    audit_record(
        action=AuditAction.FILL_PASS,
        actor=actor,
        project=project,
        obj=project,
        details={**report, "external_ids": names[:AUDIT_IDS]},
    )
    return report
