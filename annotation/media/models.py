"""The stored media files (`MediaAsset`, one per content hash) and the projects that own them
(`ProjectAsset`). Re-exported by annotation/models.py; other models are named by string, so this
module imports nothing of models.py."""

from django.db import models


class MediaKind(models.TextChoices):
    IMAGE = "image", "Image"
    VIDEO = "video", "Video"


class MediaAsset(models.Model):
    """A validated media file stored once per content hash."""

    sha256 = models.CharField(max_length=64, unique=True)
    kind = models.CharField(max_length=10, choices=MediaKind.choices)
    file = models.FileField(upload_to="assets/", max_length=300)
    original_name = models.CharField(max_length=500, blank=True)
    mime = models.CharField(max_length=100, blank=True)
    size_bytes = models.BigIntegerField(default=0)
    width = models.PositiveIntegerField(null=True, blank=True)
    height = models.PositiveIntegerField(null=True, blank=True)
    duration = models.FloatField(null=True, blank=True)
    fps = models.FloatField(null=True, blank=True)
    frame_count = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.kind}:{self.sha256[:12]}"


class ProjectAsset(models.Model):
    """A project owns an asset when one of its own imports stored it, or brought the same bytes
    (annotation/media/assets.py, assets_store). Who may fetch a stored file is decided from these
    rows (annotation/media/access.py), never from an item's media JSON."""

    project = models.ForeignKey("annotation.Project", on_delete=models.CASCADE, related_name="asset_links")
    # Indexed by the unique (asset, project) constraint, which the access check's EXISTS uses.
    asset = models.ForeignKey(MediaAsset, on_delete=models.CASCADE, related_name="project_links", db_index=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["asset", "project"], name="projectasset_unique_asset_project")]

    def __str__(self) -> str:
        return f"{self.project_id}:{self.asset_id}"
