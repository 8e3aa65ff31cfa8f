"""Items lose the single-column index on ``project_id``: the unique constraint
``(project_id, external_id)`` and both composite indexes (``item_queue_idx``,
``item_split_status_idx``) lead with the project, so every lookup, count, join and cascade by
project alone is served by them, and an import keeps one index fewer up to date per row. Schema
only: no row changes.

The index is dropped by name (the name Django gave it in 0001) rather than by altering the field,
which would drop and re-add the foreign key and so re-check every item of every project, and
CONCURRENTLY, outside a transaction: a plain DROP INDEX waits for an ACCESS EXCLUSIVE lock on the
item table, behind any running import or freeze, and every read and write of items queues behind
it meanwhile."""

import django.db.models.deletion
from django.db import migrations, models

INDEX = "annotation_item_project_id_2466b61c"


class Migration(migrations.Migration):
    atomic = False  # CONCURRENTLY runs outside a transaction

    dependencies = [
        ("annotation", "0026_releaseitem_release_index"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="item",
                    name="project",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="items",
                        to="annotation.project",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    sql=f'DROP INDEX CONCURRENTLY IF EXISTS "{INDEX}"',
                    reverse_sql=f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{INDEX}" ON annotation_item (project_id)',
                ),
            ],
        ),
    ]
