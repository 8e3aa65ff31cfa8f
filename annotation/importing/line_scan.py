"""Reading an item file's lines for pass 1 (items.py), and what a small file's first scan finds
out before its rows may go to PostgreSQL while the lines are checked.

`parsed_lines` decodes each line; one that does not decode comes as `UNPARSED`, and pass 1
records why when it reaches it, so errors keep the file's order. `distinct_ids` is the first
scan's verdict: the ids of a file whose every line decodes to an object with a string id, each id
once; None for any other file (it will be refused, and takes the path that checks everything
first). `existing_rows` is the comparison's one query: what the project holds under those ids.
`stream_lock` decides whether the rows may stream: the project's import lock, taken only while no
other import of the project is under way.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from django.db import connection
from django.db.models import BooleanField
from django.db.models.expressions import RawSQL

from annotation.models import Item

from .copy_spool import IMPORT_LOCK_CLASS

# What `parsed_lines` gives for a line that does not decode (pass 1 says why, parse_json_line).
UNPARSED = object()
# Ids per comparison query.
EXISTING_CHUNK = 1000
# The scanner json.loads uses (same options as its default decoder), called directly.
_json_scan = json.JSONDecoder().scan_once
# First key of the advisory lock that each small import holds, shared, from the start of its
# check until its transaction ends ("STLJ"; the second key is the project id, as for the import
# lock): its holders are the project's imports under way, checking, waiting their turn or writing.
IMPORT_BUSY_CLASS = 0x53544C4A
# Once this import is marked as under way (mark_under_way, the statement before), says whether it
# may stream: yes when its transaction holds the import lock already (an earlier file of the same
# request), no when another import of the project is under way, else whether the lock was free (it
# is taken then; a large import holds it without the mark). An import that finds another under way
# checks first, and is seen by the next one in turn. Advisory keys are per database.
_STREAM_LOCK_SQL = """SELECT CASE WHEN seen.held THEN true WHEN seen.others THEN false
        ELSE pg_try_advisory_xact_lock(%(lock)s::integer, %(project)s::integer) END
    FROM (SELECT coalesce(bool_or(pid = pg_backend_pid() AND classid = %(lock)s::integer::oid), false) AS held,
            coalesce(bool_or(pid <> pg_backend_pid() AND classid = %(busy)s::integer::oid), false) AS others
        FROM pg_locks
        WHERE locktype = 'advisory' AND objid = %(project)s::integer::oid AND objsubid = 2
          AND classid IN (%(lock)s::integer::oid, %(busy)s::integer::oid)
          AND database = (SELECT oid FROM pg_database WHERE datname = current_database())) AS seen"""
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
    """EXISTING_FIELDS of the project's items among `ids` (at most EXISTING_CHUNK of them), in no
    particular order."""
    # One array parameter, not a placeholder per id; the (project, id) pairs are looked up one by
    # one in the unique index. Written as `project_id = … AND external_id = ANY(…)`, the planner
    # weighs the project's size from the table's statistics: while they still count a project that
    # imports file after file as nearly empty, it reads every item of the project and tests each
    # against the 1,000 ids (10 ms of PostgreSQL at 45,000 items, growing with each file).
    table = Item._meta.db_table
    wanted = RawSQL(
        f'("{table}"."project_id", "{table}"."external_id") IN (SELECT %s::bigint, unnest(%s::text[]))',
        (project.pk, ids),
        BooleanField(),
    )
    return list(Item.objects.filter(wanted).values_list(*EXISTING_FIELDS))


def stream_lock(project) -> bool:
    """Stream mode's condition, one statement: hold the project's import lock already, or take it
    if no other import of it is under way; this import is marked as under way in any case (until
    its transaction ends).

    A streaming import holds the lock through its own check, so one that started checking its
    lines a moment earlier (while the lock was held by a third) would wait for all of it instead of
    for the write alone: it holds the mark, not the lock, so the lock alone cannot tell. (An import
    waiting for the lock is no sign either: PostgreSQL hands a released lock to its waiter at once,
    so the lock is never free while one waits.)"""
    mark_under_way(project)  # first, as a statement of its own: then the read below sees it in any plan
    with connection.cursor() as cursor:
        cursor.execute(_STREAM_LOCK_SQL, {"busy": IMPORT_BUSY_CLASS, "project": project.pk, "lock": IMPORT_LOCK_CLASS})
        return bool(cursor.fetchone()[0])


def mark_under_way(project) -> None:
    """Mark this import as under way in `project` (a small import that checks first whatever
    happens: a queued run, whose progress counts the bytes read while the lines are checked)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock_shared(%s::integer, %s::integer)", [IMPORT_BUSY_CLASS, project.pk])
