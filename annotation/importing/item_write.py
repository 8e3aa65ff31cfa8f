"""The write of an item import (items.py) once pass 1 found no error: the media stored, items
promoted or updated, the audit event, and the rows copied (or, in live and stream mode, already
sent during pass 1: copy_spool.py), in the import's transaction."""

from __future__ import annotations

from annotation.audit.record import audit_record
from annotation.media.assets import assets_store, delete_stored
from annotation.models import AuditAction, Project

from .conversion import OWN_FORMAT
from .item_report import KEPT_NAMES_SHOWN, ItemImportReport
from .item_update import apply_updates, promote_verified, shown_updates


def items_write(
    project: Project, source, validation, audit: dict, *, stored: list[str] | None = None
) -> ItemImportReport:
    """Store the media, promote, audit and write the rows of a `validation` without errors (items.py
    `_Validation`, pass 1 done), all or nothing. The media files this
    writes are deleted again if it fails; `stored` (a caller's transaction around several
    imports, batch.py) also receives their names, for the caller to delete if it rolls back."""
    report = validation.report
    media = validation.media
    written: list[str] = []
    spool = validation.spool

    def store_media() -> None:
        assets_store(
            media=((info, relpath) for relpath, info in media.items()),
            open_file=source.open_media,
            written=written,
            project=project,  # the project owns what its import brought (annotation/media/access.py)
        )
        promote_verified(validation.promote)
        apply_updates(validation.updates)
        # In the import's transaction (the COPY writer's, in live mode): recorded only if it commits.
        audit_record(
            action=AuditAction.IMPORT,
            actor=audit["actor"],
            project=project,
            object_type="items import",
            object_repr=audit["file"],
            details={
                "kind": "items",
                "run": audit["run"],
                "verified": validation.verified,
                "lines": report.lines,
                "created": report.lines - report.unchanged - report.promoted - report.updated,
                "unchanged": report.unchanged,
                "promoted": report.promoted,
                # An import that updates: how many items it replaced, and which fields of the first ones.
                **({"update": True, "updated": report.updated} if validation.update else {}),
                **({"updated_items": shown_updates(validation.updates)} if validation.updates else {}),
                # What an authors' format or the kept fields add, only where there is something to say.
                **({"format": audit["format"]} if audit["format"] != OWN_FORMAT else {}),
                **({"kept_fields": report.kept_fields[:KEPT_NAMES_SHOWN]} if report.kept_fields else {}),
            },
        )

    try:
        if spool.live:
            spool.commit(store_media)  # rows are in already; media, promotions and commit in the writer's transaction
        else:  # always inside _import_file's transaction (or the caller's): no savepoint of its own
            store_media()
            spool.copy_into_db()
    except BaseException:
        delete_stored(written)
        raise
    if stored is not None:
        stored.extend(written)
    report.media_stored = len(written)
    report.created = report.lines - report.unchanged - report.promoted - report.updated
    report.update, report.updated_items = validation.update, shown_updates(validation.updates)
    report.by_status = {k: v for k, v in report.by_status.items() if v}
    return report
