"""Admin pages of the annotation app. Items, releases and memberships are scoped to the projects
where a non-superuser is researcher or admin (admin_site.ProjectScopedAdmin); the rest keep Django's
model permissions; users, groups and tokens are for superusers only."""
from django import forms
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group
from rest_framework.authtoken.admin import TokenAdmin
from rest_framework.authtoken.models import TokenProxy

from .admin_site import ProjectScopedAdmin, SuperuserOnlyAdmin, UsernameField
from .models import ROLE_RANK, Annotation, ImportRun, Item, MediaAsset, Membership, Project, Release, Review
from .permissions import has_role, role_in


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
class ItemAdmin(ProjectScopedAdmin):
    # Items enter through the import (media validated and stored), not through a blank form.
    researcher_actions = ("view", "change", "delete")
    list_display = ("external_id", "project", "status", "split", "annotation_count")
    list_filter = (("project", admin.RelatedOnlyFieldListFilter), "status", "split")
    list_select_related = ("project",)
    search_fields = ("external_id",)
    readonly_fields = ("annotation_count",)  # kept by the queue in the same transaction as each submit


@admin.register(MediaAsset)
class MediaAssetAdmin(admin.ModelAdmin):
    list_display = ("sha256", "kind", "width", "height", "duration", "size_bytes")


@admin.register(Release)
class ReleaseAdmin(ProjectScopedAdmin):
    researcher_actions = ("view",)  # frozen on the project's releases page
    list_display = ("project", "version", "split", "item_count", "checksum", "created_at")
    list_filter = (("project", admin.RelatedOnlyFieldListFilter),)
    list_select_related = ("project",)

    def has_change_permission(self, request, obj=None):
        return False  # releases are immutable

    def has_delete_permission(self, request, obj=None):
        # Deleting v1 would let `freeze_release ... v1` make a different v1 under the same name.
        return False


class MembershipForm(forms.ModelForm):
    granted_by = None  # the signed-in user (MembershipAdmin.get_form)

    class Meta:
        model = Membership
        fields = ("project", "user", "role")

    def clean(self):
        data = super().clean()
        project = data.get("project") or (self.instance.project if self.instance.pk else None)
        role = data.get("role")
        if project is not None and role and not has_role(self.granted_by, project, role):
            self.add_error("role", f"Your role in {project.slug} cannot give the {role} role.")
        return data


@admin.register(Membership)
class MembershipAdmin(ProjectScopedAdmin):
    """A project's members. A researcher manages the members of their projects up to their own role
    (they neither give nor change nor remove the admin role, which a project admin does)."""

    form = MembershipForm
    list_display = ("user", "project", "role")
    list_filter = (("project", admin.RelatedOnlyFieldListFilter), "role")
    list_select_related = ("project", "user")
    search_fields = ("user__username", "user__email", "project__slug")

    def may(self, request, action, obj=None):
        if not super().may(request, action, obj):
            return False
        if obj is None or action == "view":
            return True
        mine = role_in(request.user, obj.project)
        return mine is not None and ROLE_RANK[mine] >= ROLE_RANK[obj.role]

    def get_readonly_fields(self, request, obj=None):
        return ("project", "user") if obj is not None else ()  # another pair is another membership

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        if db_field.name == "user":
            return UsernameField(queryset=get_user_model().objects.filter(is_active=True),
                                 help_text="Username or e-mail of the account.")
        return super().formfield_for_dbfield(db_field, request, **kwargs)

    def get_form(self, request, obj=None, **kwargs):
        form = super().get_form(request, obj, **kwargs)
        return type(form.__name__, (form,), {"granted_by": request.user, "__module__": __name__})


admin.site.register(Annotation)
admin.site.register(Review)


@admin.register(ImportRun)
class ImportRunAdmin(admin.ModelAdmin):
    """Uploads imported by the worker: read only (the import page makes them)."""

    list_display = ("id", "project", "file_name", "kind", "verified", "status", "error_count", "attempts", "worker",
                    "created_by", "created_at", "finished_at")
    list_filter = ("status", "kind")
    search_fields = ("project__slug", "file_name")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


# Accounts and their API tokens: superusers only, whatever model permissions a staff user holds.
for model, model_admin in ((get_user_model(), UserAdmin), (Group, GroupAdmin), (TokenProxy, TokenAdmin)):
    if admin.site.is_registered(model):
        admin.site.unregister(model)
    admin.site.register(model, type(model_admin.__name__, (SuperuserOnlyAdmin, model_admin), {"__module__": __name__}))
