"""The release-item table a freeze writes into (migration 0026): no index of its own on
``release_id``, whose lookups the two unique constraints leading with the release serve."""

from __future__ import annotations

import pytest
from django.db import connection

from annotation.models import ReleaseItem

TABLE = ReleaseItem._meta.db_table


def _indexes() -> dict[str, list[str]]:
    """index name -> its columns, in order, for the release-item table."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT i.relname, array_agg(a.attname ORDER BY k.n) FROM pg_index x "
            "JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid "
            "CROSS JOIN LATERAL unnest(x.indkey) WITH ORDINALITY k(attnum, n) "
            "JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum "
            "WHERE t.relname = %s GROUP BY i.relname",
            [TABLE],
        )
        return {name: list(columns) for name, columns in cur.fetchall()}


@pytest.mark.django_db
def test_no_index_on_release_id_alone_and_the_unique_constraints_lead_with_it():
    indexes = _indexes()
    assert ["release_id"] not in indexes.values(), indexes
    assert indexes["releaseitem_unique_release_item"] == ["release_id", "item_id"]
    assert indexes["releaseitem_unique_release_position"] == ["release_id", "position"]
    assert ["item_id"] in indexes.values()  # a protected item is still found without a scan


@pytest.mark.django_db
def test_reading_a_release_in_order_uses_the_release_position_constraint():
    query = ReleaseItem.objects.filter(release_id=1).order_by("position").values_list("payload", flat=True)
    sql, params = query.query.sql_with_params()
    with connection.cursor() as cur:
        cur.execute("SET LOCAL enable_seqscan = off")
        cur.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cur.fetchall())
    assert "releaseitem_unique_release_position" in plan, plan
