"""QA answers stored before import and submit shared one normaliser (annotation.canonical) get
its form: an item's known answer ("b" -> "B", M3-Verse letters sorted, set names with whitespace
collapsed) and imported annotations' answers and flags ("A,C" -> ["A", "C"], flags in QA_FLAGS
order). Submitted annotations were stored in that form already and are left as they are.

Frozen releases are not touched: a ReleaseItem is the export line as it was frozen, and the
release's checksum covers those stored lines, so every existing release keeps its checksum and
exports the same bytes. Irreversible (the raw spelling is not kept); going back leaves the rows
in the canonical form, which every reader accepts.
"""

from django.db import migrations

from annotation import canonical

# The QA protocols when this migration was written.
QA_PROTOCOLS_THEN = ("visualtrans", "m3verse")

BATCH = 1000


def canonical_item_answers(apps, schema_editor) -> int:
    """Rewrite the known answer of VisualTrans / M3-Verse items; returns how many changed."""
    Item = apps.get_model("annotation", "Item")
    rows = (
        Item.objects.filter(project__protocol__in=QA_PROTOCOLS_THEN)
        .values_list("pk", "payload", "project__protocol")
        .order_by("pk")
        .iterator(chunk_size=BATCH)
    )
    changed = []
    count = 0
    for pk, payload, protocol in rows:
        if not isinstance(payload, dict) or payload.get("answer") is None:
            continue
        answer = canonical.payload_answer(protocol, payload)
        if answer != payload["answer"]:
            changed.append(Item(pk=pk, payload={**payload, "answer": answer}))
        if len(changed) >= BATCH:
            Item.objects.bulk_update(changed, ["payload"])
            count += len(changed)
            changed = []
    Item.objects.bulk_update(changed, ["payload"])
    return count + len(changed)


def _shape_as_then(protocol: str, payload: dict) -> dict:
    """The item as this migration saw it: M3-Verse items then took several letters when their answer
    listed several (a rule since replaced by the item's own `multiple` field); kept here so the
    migration rewrites rows as it always did."""
    if protocol == "m3verse" and not isinstance(payload.get("multiple"), bool):
        return {**payload, "multiple": len(payload.get("answer") or []) > 1}
    return payload


def canonical_imported_answers(apps, schema_editor) -> int:
    """Rewrite imported blind QA answers (and their flags) as a submit stores them; returns how many changed."""
    Annotation = apps.get_model("annotation", "Annotation")
    rows = (
        Annotation.objects.filter(source="import", item__project__protocol__in=QA_PROTOCOLS_THEN)
        .values_list("pk", "result", "item__payload", "item__project__protocol")
        .order_by("pk")
        .iterator(chunk_size=BATCH)
    )
    changed = []
    count = 0
    for pk, result, payload, protocol in rows:
        if not isinstance(result, dict) or "answer" not in result:
            continue
        new = {
            **result,
            "answer": canonical.qa_result_answer(
                result["answer"], protocol=protocol, payload=_shape_as_then(protocol, payload or {})
            ),
            "flags": canonical.qa_flags(result.get("flags") or []),
        }
        if new != result:
            changed.append(Annotation(pk=pk, result=new))
        if len(changed) >= BATCH:
            Annotation.objects.bulk_update(changed, ["result"])
            count += len(changed)
            changed = []
    Annotation.objects.bulk_update(changed, ["result"])
    return count + len(changed)


def forwards(apps, schema_editor):
    canonical_item_answers(apps, schema_editor)
    canonical_imported_answers(apps, schema_editor)


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0005_import_run"),
    ]

    operations = [
        migrations.RunPython(forwards, migrations.RunPython.noop, elidable=True),
    ]
