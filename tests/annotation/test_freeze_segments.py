"""The freeze's write in segments (annotation/freezing_copy.py) and its spool read once
(annotation/freezing.py): the release items go out as COPY statements of about ``SEGMENT_ROWS``
rows from a thread, each segment's foreign keys checked when it ends, and the items are decoded
once as the read delivers them, the vocabulary taken meanwhile. However small the segments, the
release must be the reference freeze's to the byte (checksum, rows, every export); the foreign
keys are deferred again afterwards; a failure on either side leaves nothing written."""

from __future__ import annotations

import threading

import psycopg
import pytest
from django.db import IntegrityError, ProgrammingError, connection, transaction

from annotation import freezing, freezing_copy
from annotation.models import Item, Release, ReleaseItem
from annotation.releases import release_freeze
from protocols import registry

from . import test_freeze_set_based as set_based


def copy_statements(monkeypatch) -> list[str]:
    statements: list[str] = []
    real_copy = psycopg.Cursor.copy

    def copy(self, statement, *args, **kwargs):
        text = statement.as_string(self) if hasattr(statement, "as_string") else statement
        if "annotation_releaseitem" in text and threading.current_thread().name == "freeze-copy":
            statements.append(text)
        return real_copy(self, statement, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "copy", copy)
    return statements


@pytest.mark.django_db
@pytest.mark.parametrize("protocol", set_based.PROTOCOLS)
@pytest.mark.parametrize("rows", [1, 3])
def test_small_segments_freeze_to_the_reference(protocol, rows, make_project, tmp_path, monkeypatch):
    project = set_based.verified_project(make_project, tmp_path, protocol, n=12)
    monkeypatch.setattr(freezing, "FLUSH_BYTES", 1)  # a chunk per line, so a segment can end at any line
    monkeypatch.setattr(freezing_copy, "SEGMENT_ROWS", rows)
    statements = copy_statements(monkeypatch)

    set_based.freeze_and_compare(project, tmp_path)

    assert len(statements) == 12 // rows


@pytest.mark.django_db
def test_the_foreign_keys_are_deferred_again_after_the_freeze(make_project, tmp_path, monkeypatch):
    """Checked segment by segment during the freeze, the release items' foreign keys are checked at
    commit again afterwards: a row naming no item is accepted, and refused once checked."""
    project = set_based.verified_project(make_project, tmp_path, "changeit", n=6)
    monkeypatch.setattr(freezing_copy, "SEGMENT_ROWS", 2)
    release = release_freeze(project=project, version="v1")
    with connection.cursor() as cur:
        cur.execute(
            "INSERT INTO annotation_releaseitem (release_id, item_id, position, payload, media) "
            "VALUES (%s, %s, 99, '{}', '{}')",
            [release.pk, max(Item.objects.values_list("pk", flat=True)) + 1000],
        )
        with pytest.raises(IntegrityError, match="foreign key"), transaction.atomic():
            cur.execute("SET CONSTRAINTS ALL IMMEDIATE")  # what the commit would do
        cur.execute("DELETE FROM annotation_releaseitem WHERE release_id = %s AND position = 99", [release.pk])


def fails_while_lines_are_made(make_project, tmp_path, monkeypatch, *, n, at, act, error, match):
    """Freeze `n` ChangeIt items in segments of 2 rows with `act(project)` run before the `at`-th
    item's queries are resolved; the freeze must raise `error`, write nothing, end the writer
    thread and leave the connection usable (a second freeze succeeds)."""
    project = set_based.verified_project(make_project, tmp_path, "changeit", n=n)
    monkeypatch.setattr(freezing, "FLUSH_BYTES", 1)
    monkeypatch.setattr(freezing_copy, "SEGMENT_ROWS", 2)
    protocol = registry.get("changeit")
    real, made = protocol.resolve_queries, []

    def resolve(item_id, payload, **kwargs):
        made.append(item_id)
        if len(made) == at:
            act(project)
        return real(item_id, payload, **kwargs)

    monkeypatch.setattr(protocol, "resolve_queries", resolve)
    before = (Release.objects.count(), ReleaseItem.objects.count())
    with pytest.raises(error, match=match):
        release_freeze(project=project, version="v1")
    assert (Release.objects.count(), ReleaseItem.objects.count()) == before
    assert [t for t in threading.enumerate() if t.name == "freeze-copy"] == []
    monkeypatch.setattr(protocol, "resolve_queries", real)
    assert release_freeze(project=project, version="v2").item_count == n  # the connection is usable


@pytest.mark.django_db
def test_a_failure_while_lines_are_made_writes_nothing_and_ends_the_thread(make_project, tmp_path, monkeypatch):
    def broken(project):
        raise RuntimeError("resolver broke")

    # Item 7: three segments sent, the fourth under way.
    fails_while_lines_are_made(
        make_project, tmp_path, monkeypatch, n=12, at=7, act=broken, error=RuntimeError, match="resolver broke"
    )


@pytest.mark.django_db
def test_a_failure_of_the_write_is_raised_and_writes_nothing(make_project, tmp_path, monkeypatch):
    project = set_based.verified_project(make_project, tmp_path, "status", n=8)
    monkeypatch.setattr(freezing, "_SQL_WRITE_ITEMS", freezing._SQL_WRITE_ITEMS.replace("media)", "no_such_column)"))
    before = (Release.objects.count(), ReleaseItem.objects.count())
    with pytest.raises(ProgrammingError) as raised:  # the thread's psycopg error, raised as Django's
        release_freeze(project=project, version="v1")
    assert isinstance(raised.value.__cause__, psycopg.errors.UndefinedColumn)
    assert (Release.objects.count(), ReleaseItem.objects.count()) == before
    assert [t for t in threading.enumerate() if t.name == "freeze-copy"] == []


@pytest.mark.django_db
def test_the_vocabulary_is_taken_from_the_items_as_they_are_read(make_project, tmp_path, monkeypatch):
    """One read of the items: the vocabulary sees every verified payload of the split, in release
    order, and the lines are made from the spool without reading the items again."""
    project = set_based.verified_project(make_project, tmp_path, "changeit", n=9)
    seen, reads = [], []
    real_vocabulary, real_copy = freezing.vocabulary, psycopg.Cursor.copy

    def vocabulary(protocol, payloads):
        return real_vocabulary(protocol, (seen.append(p) or p for p in payloads))

    def copy(self, statement, *args, **kwargs):
        text = statement.as_string(self) if hasattr(statement, "as_string") else statement
        if "TO STDOUT" in text:
            reads.append(text)
        return real_copy(self, statement, *args, **kwargs)

    monkeypatch.setattr(freezing, "vocabulary", vocabulary)
    monkeypatch.setattr(psycopg.Cursor, "copy", copy)
    set_based.freeze_and_compare(project, tmp_path)
    expected = Item.objects.filter(project=project, split="test").order_by("external_id")
    assert seen == [item.payload for item in expected]
    assert len([s for s in reads if "annotation_item" in s]) == 1


@pytest.mark.django_db
def test_a_query_while_lines_are_made_is_refused_not_left_waiting(make_project, tmp_path, monkeypatch):
    """The connection belongs to the writer's COPY while the lines are made: a resolver that queries
    gets an error at once, and nothing is written. Without the refusal the query's fate depends on
    timing: between two segments it runs; inside one it waits for the connection's lock, which the
    thread holds while it waits for rows, for ever."""

    def query(project):
        Item.objects.filter(project=project).count()

    # Item 4: a segment sent, the next under way.
    fails_while_lines_are_made(
        make_project,
        tmp_path,
        monkeypatch,
        n=6,
        at=4,
        act=query,
        error=RuntimeError,
        match="the line making must not query",
    )
