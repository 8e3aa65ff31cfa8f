"""Importers for items (the item lines of docs/architecture.md, "Interchange formats", for every
protocol) and for human annotations made elsewhere.

Public entry points:
- `items_import(project=..., path=..., media_root=None, verified=False, format_name=None, strict=False)`
  -> ItemImportReport: the project's own item lines, or a file or folder in one of the protocol's
  authors' formats (detected, or `format_name`; conversion.py), fields the protocol does not know
  kept in the item's extra (refused with `strict`);
- `annotations_import(project=..., path=...)` -> AnnotationImportReport
Both refuse a bad file whole with `ImportRefused` ("line N: field F: reason" messages) and write
nothing then; both are idempotent and stream their input in two passes.
"""

from .annotations import AnnotationImportReport, annotations_import
from .common import ImportRefused
from .items import ItemImportReport, items_import

__all__ = ["AnnotationImportReport", "ImportRefused", "ItemImportReport", "annotations_import", "items_import"]
