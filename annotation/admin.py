from django.contrib import admin

from .models import Annotation, ImportRun, Item, MediaAsset, Membership, Project, Release, Review


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "protocol", "annotations_per_item", "created_at")
    inlines = [MembershipInline]

    def get_actions(self, request):
        # Bulk delete would take the projects' releases with it (they cascade).
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def has_delete_permission(self, request, obj=None):
        if obj is not None and obj.releases.exists():
            return False  # deleting it would delete its releases, which are immutable
        return super().has_delete_permission(request, obj)


@admin.register(Item)
class ItemAdmin(admin.ModelAdmin):
    list_display = ("external_id", "project", "status", "split", "annotation_count")
    list_filter = ("project", "status", "split")
    search_fields = ("external_id",)


@admin.register(MediaAsset)
class MediaAssetAdmin(admin.ModelAdmin):
    list_display = ("sha256", "kind", "width", "height", "duration", "size_bytes")


@admin.register(Release)
class ReleaseAdmin(admin.ModelAdmin):
    list_display = ("project", "version", "split", "item_count", "checksum", "created_at")

    def has_change_permission(self, request, obj=None):
        return False  # releases are immutable

    def has_delete_permission(self, request, obj=None):
        # Deleting v1 would let `freeze_release ... v1` make a different v1 under the same name.
        return False


admin.site.register(Annotation)
admin.site.register(Review)


@admin.register(ImportRun)
class ImportRunAdmin(admin.ModelAdmin):
    """Uploads imported by the worker: read only (the import page makes them)."""

    list_display = ("id", "project", "file_name", "kind", "verified", "status", "error_count", "created_by", "created_at", "finished_at")
    list_filter = ("status", "kind")
    search_fields = ("project__slug", "file_name")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
