"""Importing a predictions file of any tool: read its rows (readers.py), meet them with the
release's items (matching.py), store them through predictions_import_lines (all or nothing), and
say what happened: the format read, the rows left unmatched, and where the tool's per-sample
verdict disagrees with StateLab's score."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from annotation.models import Item, ItemStatus, Project, Release
from annotation.protocols import QUERY_KEYS
from protocols import registry

from ...models import InferenceJob
from ..predictions import PredictionImportError, predictions_import_lines
from .matching import SHOWN, Comparison, ItemIndex, MatchError, ReleaseLine, compare, map_rows, parse_match
from .readers import read_prediction_file


@dataclass
class PredictionFileReport:
    job: InferenceJob
    format: str
    unit: str  # what the rows' numbers count: line, row (a workbook's) or record (a JSON document's)
    notes: list[str] = field(default_factory=list)
    matched: int = 0
    unmatched: list[tuple[int, str]] = field(default_factory=list)  # every row left out, with why
    comparison: Comparison = field(default_factory=Comparison)


def release_lines(project: Project, release: Release | None) -> list[ReleaseLine]:
    """The items a mapping may name, in the release's order (verified items by id without one)."""
    if release is not None:
        rows = release.release_items.order_by("position").values_list("item__external_id", "payload")
    else:
        rows = (
            Item.objects.filter(project=project, status=ItemStatus.VERIFIED)
            .order_by("id")
            .values_list("external_id", "payload")
        )
    return [ReleaseLine(n, ext, {**payload, "id": ext}) for n, (ext, payload) in enumerate(rows)]


def _none_known(rows, entries: list[ReleaseLine]) -> bool:
    """No row's own id is an item here (the usual integer index of a file made elsewhere)."""
    known = {e.external_id for e in entries}
    ids = [str(r.item) for r in rows if r.item is not None and not r.error]
    return bool(ids) and not any(i in known for i in ids)


def predictions_import_file(
    *,
    project: Project,
    path: Path,
    model_name: str,
    release: Release | None = None,
    fmt: str = "auto",
    match: Sequence[str] = (),
    media_root: Path | None = None,
    actor=None,
) -> PredictionFileReport:
    """Import a predictions file as a finished imported job. Without ``match`` the rows must carry
    StateLab's item ids (every unknown id refuses the file); with it, rows that name no item are
    left out and reported, and a file of which no row names an item is refused."""
    try:
        mapping = parse_match(match)
    except MatchError as exc:
        raise PredictionImportError([(0, str(exc))])
    protocol = registry.get(project.protocol)
    tool = read_prediction_file(protocol, path, fmt, mapped=mapping is not None, media_root=media_root)
    where = f"release {release.version}" if release is not None else "the project's verified items"
    details = {"format": tool.format, "file": path.name}
    unmatched: list[tuple[int, str]] = []
    if tool.lines is not None:
        lines, matched = tool.lines, None
    else:
        entries = release_lines(project, release)
        try:
            index = ItemIndex(mapping, entries) if mapping is not None else None
            mapped = map_rows(tool.rows, query_keys=QUERY_KEYS[project.protocol], mapping=mapping, index=index)
        except MatchError as exc:
            raise PredictionImportError([(0, str(exc))], unit=tool.unit)
        if mapping is None and not mapped.errors and _none_known(tool.rows, entries):
            first = ", ".join(repr(str(r.item)) for r in tool.rows[:3])
            raise PredictionImportError(
                [
                    (
                        0,
                        f"no row's id is an item of {where} (first: {first}): the file was not made from "
                        "StateLab's export; name how its rows meet the items, e.g. --match index=row "
                        "(the N-th item, from 0) or --match doc.question_id=extra.question_id",
                    )
                ],
                unit=tool.unit,
            )
        if mapped.errors:
            raise PredictionImportError(mapped.errors, unit=tool.unit)
        if mapping is not None and not mapped.matched:
            shown = "; ".join(f"{tool.unit} {n}: {why}" for n, why in mapped.unmatched[:SHOWN])
            raise PredictionImportError(
                [
                    (
                        0,
                        f"no row matched an item of {where} through --match {mapping} "
                        f"({len(mapped.unmatched)} rows: {shown})",
                    )
                ],
                unit=tool.unit,
            )
        lines, matched, unmatched = mapped.lines, mapped.matched, mapped.unmatched
        if mapping is not None:
            details.update(match=str(mapping), unmatched=len(unmatched))
    imported = predictions_import_lines(
        project=project,
        lines=lines,
        model_name=model_name,
        release=release,
        actor=actor,
        unit=tool.unit,
        details=details,
    )
    return PredictionFileReport(
        job=imported.job,
        format=tool.format,
        unit=tool.unit,
        notes=tool.notes,
        matched=len(imported.lines) if matched is None else matched,
        unmatched=unmatched,
        comparison=compare(imported.lines),
    )
