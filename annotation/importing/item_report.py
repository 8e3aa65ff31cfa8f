"""What an item import reports (`ItemImportReport`) and which project it goes to
(`project_for_import`); the importer itself is annotation/importing/items.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from annotation.models import Membership, Project, Role

from .common import ImportRefused
from .conversion import OWN_FORMAT

KEPT_NAMES_MAX = 1000
KEPT_NAMES_SHOWN = 50


@dataclass
class ItemImportReport:
    lines: int = 0
    created: int = 0
    unchanged: int = 0
    promoted: int = 0
    # Existing items whose content an import that updates replaced, and the first of them with the
    # fields that changed: [{"id": ..., "fields": ["payload", ...]}] (item_update.py).
    # (in the report's dict only for an import asked to update)
    update: bool = False
    updated: int = 0
    updated_items: list[dict[str, Any]] = field(default_factory=list)
    media_files: int = 0
    media_stored: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    header: dict[str, Any] | None = None
    # The format read (conversion.OWN_FORMAT or an authors' format's name), and what its reader mapped.
    format: str = OWN_FORMAT
    format_label: str = ""
    notes: list[str] = field(default_factory=list)
    # Names of the fields kept in items' "extra" (the protocol does not know them), sorted.
    kept_fields: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "lines": self.lines,
            "created": self.created,
            "unchanged": self.unchanged,
            "promoted": self.promoted,
            **({"updated": self.updated, "updated_items": self.updated_items} if self.update else {}),
            "media_files": self.media_files,
            "media_stored": self.media_stored,
            "by_status": self.by_status,
            "format": self.format,
            "format_label": self.format_label,
            "notes": self.notes,
            "kept_fields": self.kept_fields,
            "kept": self.kept_sentence(),
        }

    def kept_sentence(self) -> str:
        """The kept fields, named once: "kept 3 fields not in the protocol: dataset, frame_0, video_id"."""
        names = self.kept_fields
        if not names:
            return ""
        shown = ", ".join(names[:KEPT_NAMES_SHOWN]) + (", ..." if len(names) > KEPT_NAMES_SHOWN else "")
        many = f"{len(names)}+" if len(names) >= KEPT_NAMES_MAX else str(len(names))
        return f"kept {many} field{'s' if len(names) != 1 else ''} not in the protocol: {shown}"


def project_for_import(
    *, slug: str, protocol: str | None, create: bool, option_seed: int | None = None, creator=None
) -> tuple[Project, bool]:
    """The project an import goes to, and whether this call created it; with `create`, make it
    when missing (two imports creating the same project at once both get the one project).

    The protocol, when given, must match the project's. A project created for a release export
    takes the export's option seed, so re-frozen releases resolve the same option orders. A
    project this call creates makes `creator` (import_items --actor) its admin, as the new-project
    page makes its creator.
    """
    from annotation.protocols import PROTOCOLS

    if protocol is not None and protocol not in PROTOCOLS:
        raise ImportRefused([f"file: field protocol: unknown protocol {protocol!r}; use one of {', '.join(PROTOCOLS)}"])
    project = Project.objects.filter(slug=slug).first()
    created = False
    if project is None:
        if not create:
            raise ImportRefused([f"file: field project: no project {slug!r} (use --create to make it)"])
        if protocol is None:
            raise ImportRefused(["file: field protocol: --protocol is required to create a project"])
        with transaction.atomic():
            project, created = Project.objects.get_or_create(
                slug=slug,
                defaults={
                    "name": slug,
                    "protocol": protocol,
                    "option_seed": option_seed if option_seed is not None else 0,
                },
            )
            if created and creator is not None:
                Membership.objects.create(project=project, user=creator, role=Role.ADMIN)
    if protocol is not None and project.protocol != protocol:
        raise ImportRefused([f"file: field protocol: project {slug} uses protocol {project.protocol}, not {protocol}"])
    return project, created
