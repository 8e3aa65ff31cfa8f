"""A release records what it ships, and a project records the media it owns.

- ``ReleaseItem.media``: relative media path -> SHA-256 of the stored file, as at the freeze;
  exports read the item's media from here instead of the live item (annotation/releases.py).
- ``Release.frozen_project``: the project's slug, name, description and settings as at the freeze
  (the exports' header, dataset card and lmms-eval task read them from here).
- ``Release.checksum_method``: "lines+media" for new releases (the checksum covers the lines and
  then the media each path ships); existing releases are marked "lines" and keep their checksum.
- ``ProjectAsset``: the assets a project's imports stored; media access is decided from these rows
  (annotation/media/access.py).

Backfill: existing releases get their media and project fields as the items and the project hold
them now (nothing older is recorded; from here on they cannot change); a project owns every asset
its items name now (items are written only by imports).
"""

import django.db.models.deletion
from django.db import migrations, models

BATCH = 1000

# Every (project, asset) whose sha256 one of the project's items names, in a media field holding
# one hash or a list of hashes.
OWNERS_SQL = """
INSERT INTO annotation_projectasset (project_id, asset_id, created_at)
SELECT DISTINCT i.project_id, a.id, now()
FROM annotation_item i
CROSS JOIN LATERAL jsonb_each(CASE WHEN jsonb_typeof(i.media) = 'object' THEN i.media ELSE '{}'::jsonb END) AS f(k, v)
CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(f.v) = 'array' THEN f.v ELSE jsonb_build_array(f.v) END)
    AS h(sha)
JOIN annotation_mediaasset a ON jsonb_typeof(h.sha) = 'string' AND a.sha256 = h.sha #>> '{}'
ON CONFLICT DO NOTHING
"""


def media_of(line, media) -> dict:
    """Path -> sha256 of one release line, paired field by field with the item's media hashes."""
    found = {}
    if not isinstance(line, dict) or not isinstance(media, dict):
        return found
    for name, shas in media.items():
        paths = line.get(name)
        pairs = zip(paths, shas) if isinstance(paths, list) and isinstance(shas, list) else [(paths, shas)]
        for path, sha in pairs:
            if isinstance(path, str) and path and isinstance(sha, str) and sha:
                found.setdefault(path, sha)
    return found


def backfill(apps, schema_editor):
    Release = apps.get_model("annotation", "Release")
    ReleaseItem = apps.get_model("annotation", "ReleaseItem")
    Release.objects.update(checksum_method="lines")
    for release in Release.objects.select_related("project").iterator(chunk_size=BATCH):
        project = release.project
        release.frozen_project = {
            "slug": project.slug,
            "name": project.name,
            "description": project.description,
            "settings": project.settings,
        }
        release.save(update_fields=["frozen_project"])
    rows = ReleaseItem.objects.order_by("pk").values_list("pk", "payload", "item__media").iterator(chunk_size=BATCH)
    changed = []
    for pk, line, media in rows:
        found = media_of(line, media)
        if found:
            changed.append(ReleaseItem(pk=pk, media=found))
        if len(changed) >= BATCH:
            ReleaseItem.objects.bulk_update(changed, ["media"])
            changed = []
    ReleaseItem.objects.bulk_update(changed, ["media"])
    schema_editor.execute(OWNERS_SQL)


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0019_project_settings_help_lease"),
    ]

    operations = [
        migrations.AddField(
            model_name="release",
            name="checksum_method",
            field=models.CharField(default="lines+media", max_length=20),
        ),
        migrations.AddField(
            model_name="release",
            name="frozen_project",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name="releaseitem",
            name="media",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.CreateModel(
            name="ProjectAsset",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "asset",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="project_links",
                        to="annotation.mediaasset",
                    ),
                ),
                (
                    "project",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="asset_links",
                        to="annotation.project",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("asset", "project"), name="projectasset_unique_asset_project")
                ],
            },
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
