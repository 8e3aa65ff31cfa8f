import django.db.models.deletion
from django.db import migrations, models

# The media view asks "does an item of a project this user may see use this asset?" with a jsonb
# containment test on annotation_item.media (annotation/media_access.py); a GIN index answers it
# without scanning the projects' items.
CREATE_MEDIA_INDEX = (
    "CREATE INDEX IF NOT EXISTS annotation_item_media_gin ON annotation_item USING gin (media jsonb_path_ops)"
)


def create_media_index(apps, schema_editor):
    schema_editor.execute(CREATE_MEDIA_INDEX)


def drop_media_index(apps, schema_editor):
    schema_editor.execute("DROP INDEX IF EXISTS annotation_item_media_gin")


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0002_project_default_per_protocol_idempotency_per_annotator"),
    ]

    operations = [
        # A release is immutable: its project cannot be deleted from under it.
        migrations.AlterField(
            model_name="release",
            name="project",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT, related_name="releases", to="annotation.project"
            ),
        ),
        migrations.RunPython(create_media_index, drop_media_index),
    ]
