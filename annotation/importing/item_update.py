"""Items an import replaces (``update``): lines whose id the project holds already with other
content, when the import was asked to update them (``import_items --update``, the API's and the
page's ``update``). Without it such a line is refused (items.py `_Validation.compare_existing`).

What an update does, in the import's one transaction (all or nothing with the rest of the file):

- the item's content becomes the line's: payload, split, tags, media and gold flag; its id, its
  human annotations (and their count), its tasks and its place in earlier releases stay;
- its status becomes the one the line would get as a new item (`new_status`): verified in a
  verified import of a complete line, annotated for a complete line otherwise, pending for an
  incomplete or gold line; two exceptions: a discarded item stays discarded (a reviewer's
  decision wins), and an item whose human annotations were collected (annotated or verified,
  with annotations) does not fall back to pending: it is annotated, back in the review queue;
- frozen releases never change: a release holds its own copy of each item (ReleaseItem), so an
  export of a release frozen before the update is byte for byte what it was.

The report counts the updated items and names, for the first UPDATED_SHOWN of them, which of
the fields changed; the audit event of the import records the same.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from annotation.models import Item, ItemStatus

from .formats import CheckedItem

# Statuses a verified re-import promotes to verified (items.py), and the ids per UPDATE.
PROMOTABLE = (ItemStatus.PENDING.value, ItemStatus.ANNOTATED.value)
PROMOTE_BATCH = 2000

UPDATED_SHOWN = 50
BATCH = 1000
# The fields compare_existing compares, in the order the report names them.
CONTENT_FIELDS = ("payload", "split", "tags", "media", "gold")
_KEPT = (ItemStatus.DISCARDED.value,)
_REVIEWED = (ItemStatus.ANNOTATED.value, ItemStatus.VERIFIED.value)


@dataclass
class ItemUpdate:
    """One existing item an import replaces."""

    pk: int
    external_id: str
    checked: CheckedItem
    media: dict
    status: str
    changed: list[str]
    line_status: str = ""  # the status the line would give a new item (new_status)


def new_status(*, line_status: str, old_status: str, annotation_count: int) -> str:
    """The status of an updated item (the module's docstring says why)."""
    if old_status in _KEPT:
        return old_status
    if line_status == ItemStatus.PENDING.value and old_status in _REVIEWED and annotation_count > 0:
        return ItemStatus.ANNOTATED.value
    return line_status


def update_message(external_id: str, changed: list[str]) -> str:
    """The refusal of a line whose id exists with other content, in an import without update."""
    return (
        f"item {external_id!r} already exists in the project with different content ({', '.join(changed)}); "
        "import with update (import_items --update) to replace the content of existing items"
    )


def shown_updates(updates: list[ItemUpdate]) -> list[dict]:
    """The first UPDATED_SHOWN updates as the report and the audit name them."""
    return [{"id": u.external_id, "fields": list(u.changed)} for u in updates[:UPDATED_SHOWN]]


def apply_updates(updates: list[ItemUpdate]) -> None:
    """Write the updates, in the caller's transaction (the import's). The rows are locked first
    (in id order, as every other writer of items locks them) and the status is worked out again
    from what they hold then: a reviewer's discard, a submit or a labelling pass that came in
    after the import compared the items is not overwritten with a status read before it. The
    item's content is the line's now, so a labelling pass on its old content ends
    (``fill_fields`` cleared)."""
    if not updates:
        return
    now = timezone.now()
    with transaction.atomic():
        for start in range(0, len(updates), BATCH):
            chunk = sorted(updates[start : start + BATCH], key=lambda u: u.pk)
            current = dict(
                (pk, (status, count))
                for pk, status, count in Item.objects.select_for_update()
                .filter(pk__in=[u.pk for u in chunk])
                .order_by("pk")
                .values_list("pk", "status", "annotation_count")
            )
            rows = []
            for u in chunk:
                if u.pk not in current:  # deleted meanwhile: nothing to update
                    continue
                status, count = current[u.pk]
                after = (
                    new_status(line_status=u.line_status, old_status=status, annotation_count=count)
                    if u.line_status
                    else u.status
                )
                rows.append(
                    Item(
                        pk=u.pk,
                        payload=u.checked.payload,
                        split=u.checked.split,
                        tags=list(u.checked.tags),
                        media=u.media,
                        is_gold=u.checked.gold,
                        status=after,
                        fill_fields=[],
                        updated_at=now,
                    )
                )
            Item.objects.bulk_update(
                rows, ["payload", "split", "tags", "media", "is_gold", "status", "fill_fields", "updated_at"]
            )


def promote_verified(ids) -> None:
    """A verified re-import: identical items still pending or annotated become verified (`ids`: an
    array of item ids)."""
    now = timezone.now()
    for start in range(0, len(ids), PROMOTE_BATCH):
        Item.objects.filter(
            pk__in=list(ids[start : start + PROMOTE_BATCH]), status__in=PROMOTABLE, is_gold=False
        ).update(status=ItemStatus.VERIFIED, updated_at=now)
