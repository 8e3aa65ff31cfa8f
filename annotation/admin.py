"""Admin pages of the annotation app. Items, releases and memberships are scoped to the projects
where a non-superuser is researcher or admin (admin_site.ProjectScopedAdmin); so are the project's
records (invites, tasks, the audit trail, crowd studies, ...), which are read only and have their
admins in annotation/admin_records.py. Crowd accounts, users, groups and tokens are for superusers
only; the rest keep Django's model permissions. Saves and deletes of projects, items, annotations,
reviews and media assets, which annotators, reviewers and releases see, are audited
(admin_site.AuditedAdmin)."""

from django import forms
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.db import transaction
from rest_framework.authtoken.admin import TokenAdmin
from rest_framework.authtoken.models import TokenProxy

from background.models import RunStatus

# A project's records (invites, the audit trail, studies, ...) have their admins in admin_records,
# which registers them when imported here: Django's autodiscovery imports only this module.
from . import admin_records  # noqa: F401
from .admin_site import (
    AuditedAdmin,
    OwnProjectsAdmin,
    ProjectScopedAdmin,
    ReadOnlyAdmin,
    SuperuserOnlyAdmin,
    UsernameField,
)
from .disagreement import thresholds_from
from .members import MemberRefused, member_change_refusal, member_put, member_remove
from .models import (
    ROLE_RANK,
    Annotation,
    ImportRun,
    Item,
    ItemStatus,
    MediaAsset,
    Membership,
    Project,
    Protocol,
    Release,
    Review,
)
from .permissions import has_role, role_in
from .project_setup import project_settings_check, project_thresholds_changed


class MembershipInline(admin.TabularInline):
    """The project's members, shown on its page; they change on the members page or under
    Memberships, where the members' rules and the audit trail apply."""

    model = Membership
    extra = 0
    fields = ("user", "role")
    readonly_fields = ("user", "role")

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ProjectAdminForm(forms.ModelForm):
    """Project.settings a JSON object whose every key is checked by its own rule, as the code that
    reads it expects (project_setup.project_settings_check: the disagreement thresholds as the
    project's Settings page checks them; a key nothing reads, or that the project's protocol does
    not read, refused), and stored in its clean form. Each error names its key."""

    class Meta:
        model = Project
        fields = "__all__"

    def clean(self):
        cleaned = super().clean()
        if "settings" not in cleaned:
            return cleaned  # not JSON: the field said so
        settings = cleaned["settings"] if cleaned["settings"] is not None else {}
        # A project's admin sees the protocol read only (admin_site.OwnProjectsAdmin): the stored one.
        protocol = cleaned.get("protocol") if "protocol" in self.fields else self.instance.protocol
        if isinstance(settings, dict) and protocol not in Protocol.values:
            return cleaned  # the protocol field says what is wrong; the settings' check depends on it
        clean, errors = project_settings_check(protocol=protocol or "", settings=settings)
        for name, reason in errors.items():
            self.add_error("settings", reason if name == "settings" else f"{name}: {reason}")
        if not errors:
            cleaned["settings"] = clean
        return cleaned


@admin.register(Project)
class ProjectAdmin(AuditedAdmin, OwnProjectsAdmin):
    audit_project = ""  # the project itself
    list_display = ("slug", "name", "protocol", "annotations_per_item", "created_at")
    inlines = [MembershipInline]
    form = ProjectAdminForm

    def save_model(self, request, obj, form, change):
        """Thresholds changed here re-mark the items waiting for review and are audited, as on the
        project's Settings page (project_setup.project_thresholds_changed)."""
        stored = Project.objects.filter(pk=obj.pk).values_list("settings", flat=True).first() if change else None
        super().save_model(request, obj, form, change)
        if stored is None:
            return
        given = (obj.settings or {}).get("disagreement")
        if given != (stored or {}).get("disagreement"):
            project_thresholds_changed(
                project=obj,
                actor=request.user,
                set_values=given or {},
                via="admin",
                before=thresholds_from(stored, project=obj.slug).as_dict(),
            )

    def get_actions(self, request):
        # Bulk delete would take the projects' releases with it (they cascade).
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def has_delete_permission(self, request, obj=None):
        if obj is not None and obj.releases.exists():
            return False  # deleting it would delete its releases, which are immutable
        return super().has_delete_permission(request, obj)

    def get_deleted_objects(self, objs, request):
        """Memberships and import records go with their project (neither is deleted on its own here:
        members leave through the members' services, import records stay, ImportRunAdmin); a project
        an import is still writing into cannot be deleted."""
        deleted, model_count, perms_needed, protected = super().get_deleted_objects(objs, request)
        perms_needed.discard(ImportRun._meta.verbose_name)
        perms_needed.discard(Membership._meta.verbose_name)
        busy = ImportRun.objects.filter(project__in=objs, status__in=(RunStatus.QUEUED, RunStatus.RUNNING))
        protected = [
            *protected,
            *(f"{ImportRun._meta.verbose_name} {run.pk} ({run.file_name}): still {run.status}" for run in busy),
        ]
        return deleted, model_count, perms_needed, protected


@admin.register(Item)
class ItemAdmin(AuditedAdmin, ProjectScopedAdmin):
    """Items enter through the import (media validated, stored and owned by the project) and their
    content changes only through the audited services (review, amendments, reopening), never
    through a form: a payload or media hash set here would change what annotators see without the
    services' checks, and could point an item at another project's files. Their content is read
    only here, for superusers too; what stays editable (the gold flag) is audited."""

    researcher_actions = ("view", "change", "delete")
    list_display = ("external_id", "project", "status", "split", "annotation_count")
    list_filter = (("project", admin.RelatedOnlyFieldListFilter), "status", "split")
    list_select_related = ("project",)
    search_fields = ("external_id",)
    # Content (project, id, payload, media, split, tags) changes only through the services. The
    # count is kept by the queue in the same transaction as each submit; the status and the
    # disagreement mark change only through the queue and the review services (a status set here
    # would let an unreviewed item into a release).
    readonly_fields = (
        "project",
        "external_id",
        "payload",
        "media",
        "split",
        "tags",
        "status",
        "annotation_count",
        "disagreement",
        "created_at",
        "updated_at",
    )

    def has_add_permission(self, request, *args):
        return False  # items enter through the import, not through a blank form


@admin.register(MediaAsset)
class MediaAssetAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    """Stored media, viewed only: media enter through imports, which detect the real type and
    measure the file (annotation/media/assets.py); a file or size set here would bypass that."""

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
        user = data.get("user") or (self.instance.user if self.instance.pk else None)
        if project is not None and role and user is not None and not self.errors:
            refusal = member_change_refusal(project=project, actor=self.granted_by, user=user, role=role)
            if refusal:
                self.add_error("role", refusal)
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
            return UsernameField(
                queryset=get_user_model().objects.filter(is_active=True), help_text="Username or e-mail of the account."
            )
        return super().formfield_for_dbfield(db_field, request, **kwargs)

    def get_form(self, request, obj=None, **kwargs):
        form = super().get_form(request, obj, **kwargs)
        return type(form.__name__, (form,), {"granted_by": request.user, "__module__": __name__})

    # Saves and deletes go through annotation.members, as on the members page: the project keeps a
    # researcher or admin, the project row is locked, and each change is in the audit trail.
    def save_model(self, request, obj, form, change):
        try:
            member_put(project=obj.project, actor=request.user, user=obj.user, role=obj.role, via="admin")
        except MemberRefused as exc:  # a concurrent change since the form's check
            raise PermissionDenied(str(exc)) from None
        obj.pk = Membership.objects.get(project=obj.project, user=obj.user).pk

    def has_delete_permission(self, request, obj=None):
        if not super().has_delete_permission(request, obj):
            return False
        return (
            obj is None
            or member_change_refusal(project=obj.project, actor=request.user, user=obj.user, role=None) is None
        )

    def delete_model(self, request, obj):
        try:
            member_remove(project=obj.project, actor=request.user, user_id=obj.user_id)
        except MemberRefused as exc:
            raise PermissionDenied(str(exc)) from None

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # one at a time: each removal is checked against the rest
        return actions


@admin.register(Annotation)
class AnnotationAdmin(AuditedAdmin, admin.ModelAdmin):
    """Annotators' answers, which reviewers accept and the agreement and Human rows read (Django's
    model permissions; changes audited). Whose answer to which item it is stays as submitted (the
    item's count and the one-answer-per-annotator rule rest on it). Only a superuser deletes one,
    one at a time and only while its item waits for annotations or review: the item's count goes
    down and an annotated item goes back to the annotation queue, as a rejected participant's
    annotations do (studies/participants.participant_reject). A reviewed item's decision may rest on
    the annotation: rejecting its annotator's participation is the way (it reopens the decision)."""

    audit_project = "item__project"
    readonly_fields = ("item", "annotator", "external_rater", "task", "source", "created_at")

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # one at a time, each with its item locked
        return actions

    def has_delete_permission(self, request, obj=None):
        if not request.user.is_superuser:
            return False
        return obj is None or obj.item.status in (ItemStatus.PENDING, ItemStatus.ANNOTATED)

    def delete_model(self, request, obj):
        with transaction.atomic():
            item = Item.objects.select_for_update().get(pk=obj.item_id)
            if item.status not in (ItemStatus.PENDING, ItemStatus.ANNOTATED):
                raise PermissionDenied("The item was reviewed meanwhile; its annotations are no longer deleted here.")
            super().delete_model(request, obj)
            if item.is_gold:
                return  # gold items keep no count (participant_reject leaves them as they are)
            item.annotation_count = max(0, item.annotation_count - 1)
            if item.status == ItemStatus.ANNOTATED:
                item.status = ItemStatus.PENDING
                item.disagreement = None  # marked again when it is complete again
            item.save(update_fields=["annotation_count", "status", "disagreement", "updated_at"])


@admin.register(Review)
class ReviewAdmin(AuditedAdmin, admin.ModelAdmin):
    """Reviewers' decisions (Django's model permissions; changes audited)."""

    audit_project = "item__project"


@admin.register(ImportRun)
class ImportRunAdmin(admin.ModelAdmin):
    """Uploads imported by the worker: read only (the import page makes them), and never deleted
    here: a record is what says which file made which items (and a queued or running import's
    worker still needs it); it goes with its project."""

    list_display = (
        "id",
        "project",
        "file_name",
        "kind",
        "verified",
        "status",
        "error_count",
        "attempts",
        "worker",
        "created_by",
        "created_at",
        "finished_at",
    )
    list_filter = ("status", "kind")
    search_fields = ("project__slug", "file_name")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


# Accounts and their API tokens: superusers only, whatever model permissions a staff user holds.
for model, model_admin in ((get_user_model(), UserAdmin), (Group, GroupAdmin), (TokenProxy, TokenAdmin)):
    if admin.site.is_registered(model):
        admin.site.unregister(model)
    admin.site.register(model, type(model_admin.__name__, (SuperuserOnlyAdmin, model_admin), {"__module__": __name__}))
