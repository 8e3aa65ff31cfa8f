"""Release items lose the single-column index on ``release_id``: both unique constraints,
``(release_id, item_id)`` and ``(release_id, position)``, lead with the release, so every lookup by
release (exports, cascades, the freeze's media statement) is served by them, and a freeze keeps one
index fewer up to date per row. Schema only: no row changes.

The index is dropped by name (the name Django gave it in 0001) rather than by altering the field,
which would drop and re-add the foreign key and so re-check every release item of every release."""

import django.db.models.deletion
from django.db import migrations, models

INDEX = "annotation_releaseitem_release_id_e3d15897"


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0025_item_fill_fields"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="releaseitem",
                    name="release",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="release_items",
                        to="annotation.release",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    sql=f'DROP INDEX IF EXISTS "{INDEX}"',
                    reverse_sql=f'CREATE INDEX IF NOT EXISTS "{INDEX}" ON "annotation_releaseitem" ("release_id")',
                ),
            ],
        ),
    ]
