"""Reading an item file's lines for pass 1 (items.py), and what a small file's first scan finds
out before its rows may go to PostgreSQL while the lines are checked.

`parsed_lines` decodes each line; one that does not decode comes as `UNPARSED`, and pass 1
records why when it reaches it, so errors keep the file's order. `distinct_ids` is the first
scan's verdict: the ids of a file whose every line decodes to an object with a string id, each id
once; None for any other file (it will be refused, and takes the path that checks everything
first). `existing_rows` is the comparison's one query: what the project holds under those ids.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from django.db.models import BooleanField
from django.db.models.expressions import RawSQL

from annotation.models import Item

# What `parsed_lines` gives for a line that does not decode (pass 1 says why, parse_json_line).
UNPARSED = object()
# Ids per comparison query.
EXISTING_CHUNK = 1000
# The scanner json.loads uses (same options as its default decoder), called directly.
_json_scan = json.JSONDecoder().scan_once
# What the comparison reads of an existing item (items.py compare_existing).
EXISTING_FIELDS = ("pk", "external_id", "payload", "split", "tags", "media", "is_gold", "status", "annotation_count")


def parsed_lines(lines: Iterable[tuple[int, Any]]) -> Iterator[tuple[int, Any, Any]]:
    """(line, text, decoded object or UNPARSED) for each line of a source's `lines()`."""
    scan = _json_scan
    loads = json.loads
    for line, text in lines:
        try:  # json.loads without its two whitespace regex matches; anything unusual takes loads
            obj, end = scan(text, 0)
            if end != len(text) and text[end:].strip(" \t\n\r"):
                raise ValueError
        except (TypeError, ValueError, StopIteration, RecursionError):
            try:
                obj = loads(text)
            except (TypeError, ValueError, RecursionError):  # not UTF-8 (None), not JSON
                obj = UNPARSED
        yield line, text, obj


def distinct_ids(parsed: list[tuple[int, Any, Any]]) -> list[str] | None:
    """The file's ids when every line is an object with a string id and no id repeats; else None."""
    ids = []
    append = ids.append
    for _line, _text, obj in parsed:
        if type(obj) is not dict:
            return None
        external_id = obj.get("id")
        if type(external_id) is not str or "\x00" in external_id:  # (PostgreSQL's text holds no NUL)
            return None
        if not external_id.isascii():  # half of a surrogate pair cannot be sent: pass 1 refuses it
            try:
                external_id.encode("utf-8")
            except UnicodeEncodeError:
                return None
        append(external_id)
    if len(set(ids)) != len(ids):
        return None
    return ids


def existing_rows(project, ids: list[str]) -> list[tuple]:
    """EXISTING_FIELDS of the project's items among `ids` (at most EXISTING_CHUNK of them)."""
    # One array parameter, not a placeholder per id.
    wanted = RawSQL(f'"{Item._meta.db_table}"."external_id" = ANY(%s::text[])', (ids,), BooleanField())
    return list(Item.objects.filter(wanted, project=project).values_list(*EXISTING_FIELDS))
