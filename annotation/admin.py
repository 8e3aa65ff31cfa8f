"""Admin pages of the annotation app. Items, releases and memberships are scoped to the projects
where a non-superuser is researcher or admin (admin_site.ProjectScopedAdmin); so are the project's
records (invites, tasks, revisions, suggestions, release items, the audit trail, crowd studies and
their participants, excluded annotations and the reopenings they caused), which are read only (admin_site.ProjectRecordAdmin):
they change through the pages and services that keep their rules and record who did what. Crowd
accounts (a platform's id of a person, across projects), users, groups and tokens are for superusers
only; the rest keep Django's model permissions. Saves and deletes of projects, items, annotations,
reviews and media assets, which annotators, reviewers and releases see, are audited
(admin_site.AuditedAdmin)."""
from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.db import transaction
from rest_framework.authtoken.admin import TokenAdmin
from rest_framework.authtoken.models import TokenProxy

from background.models import RunStatus

from .admin_site import (
    AuditedAdmin,
    ProjectRecordAdmin,
    ProjectScopedAdmin,
    ReadOnlyAdmin,
    SuperuserOnlyAdmin,
    UsernameField,
)
from .disagreement import thresholds_from
from .members import MemberRefused, invite_revoke, invite_state, member_change_refusal, member_put, member_remove
from .models import (
    ROLE_RANK,
    Annotation,
    AnnotationRevision,
    AuditEvent,
    CrowdAccount,
    ExcludedAnnotation,
    ImportRun,
    Item,
    ItemReopening,
    ItemStatus,
    MediaAsset,
    Membership,
    Project,
    ProjectInvite,
    Protocol,
    Release,
    ReleaseItem,
    Review,
    Study,
    StudyParticipant,
    Suggestion,
    Task,
)
from .permissions import has_role, role_in
from .project_setup import project_settings_check, project_thresholds_changed

PROJECT_FILTER = ("project", admin.RelatedOnlyFieldListFilter)  # offers only the projects of the rows shown


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
        if isinstance(settings, dict) and cleaned.get("protocol") not in Protocol.values:
            return cleaned  # the protocol field says what is wrong; the settings' check depends on it
        clean, errors = project_settings_check(protocol=cleaned.get("protocol", ""), settings=settings)
        for name, reason in errors.items():
            self.add_error("settings", reason if name == "settings" else f"{name}: {reason}")
        if not errors:
            cleaned["settings"] = clean
        return cleaned


@admin.register(Project)
class ProjectAdmin(AuditedAdmin, admin.ModelAdmin):
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
            project_thresholds_changed(project=obj, actor=request.user, set_values=given or {}, via="admin",
                                       before=thresholds_from(stored, project=obj.slug).as_dict())

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
        protected = [*protected, *(f"{ImportRun._meta.verbose_name} {run.pk} ({run.file_name}): still {run.status}"
                                   for run in busy)]
        return deleted, model_count, perms_needed, protected


@admin.register(Item)
class ItemAdmin(AuditedAdmin, ProjectScopedAdmin):
    # Items enter through the import (media validated and stored), not through a blank form. A
    # change here (the payload annotators and releases see, the status, the split) is audited.
    researcher_actions = ("view", "change", "delete")
    list_display = ("external_id", "project", "status", "split", "annotation_count")
    list_filter = (("project", admin.RelatedOnlyFieldListFilter), "status", "split")
    list_select_related = ("project",)
    search_fields = ("external_id",)
    # The count is kept by the queue in the same transaction as each submit; the status changes only
    # through the queue and the review services (a status set here would let an unreviewed item
    # into a release).
    readonly_fields = ("status", "annotation_count")


@admin.register(MediaAsset)
class MediaAssetAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    """Stored media, viewed only: media enter through imports, which detect the real type and
    measure the file (annotation.media); a file or size set here would bypass that."""

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
            return UsernameField(queryset=get_user_model().objects.filter(is_active=True),
                                 help_text="Username or e-mail of the account.")
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
        return obj is None or member_change_refusal(project=obj.project, actor=request.user, user=obj.user, role=None) is None

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

    list_display = ("id", "project", "file_name", "kind", "verified", "status", "error_count", "attempts", "worker",
                    "created_by", "created_at", "finished_at")
    list_filter = ("status", "kind")
    search_fields = ("project__slug", "file_name")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


# --- a project's records: read only --------------------------------------------------------------


@admin.register(ProjectInvite)
class ProjectInviteAdmin(ProjectRecordAdmin):
    """Invite links, without their token's digest; the project's researchers and admins revoke open
    ones here as on the members page (invite_revoke: audited, and not above their own role)."""

    list_display = ("id", "project", "role", "state", "created_by", "created_at", "expires_at", "used_by", "revoked_by")
    list_filter = (PROJECT_FILTER, "role")
    list_select_related = ("project", "created_by", "used_by", "revoked_by")
    fields = ("project", "role", "state", "created_by", "created_at", "expires_at", "used_by", "used_at", "revoked_by",
              "revoked_at")
    readonly_fields = ("state",)
    actions = ("revoke",)

    @admin.display(description="state")
    def state(self, invite: ProjectInvite) -> str:
        return invite_state(invite)

    def has_revoke_permission(self, request) -> bool:
        return request.user.is_superuser or self.may(request, "view")

    @admin.action(description="Revoke selected invite links", permissions=["revoke"])
    def revoke(self, request, queryset):
        revoked, refused = 0, []
        for invite in queryset:
            try:
                invite_revoke(project=invite.project, actor=request.user, invite_id=invite.pk)
                revoked += 1
            except MemberRefused as exc:
                refused.append(str(exc))
        self.message_user(request, f"Revoked {revoked} invite link(s).", messages.SUCCESS)
        for message in refused:
            self.message_user(request, message, messages.WARNING)


@admin.register(AuditEvent)
class AuditEventAdmin(ProjectRecordAdmin):
    """The audit trail: never edited or deleted (events without a project: superusers only)."""

    list_display = ("at", "actor_name", "action", "project", "object_type", "object_repr")
    list_filter = ("action", PROJECT_FILTER)
    list_select_related = ("project",)
    search_fields = ("actor_name", "object_repr", "object_id")


@admin.register(Task)
class TaskAdmin(ProjectRecordAdmin):
    """Annotators' holds on items (the queue keeps leases and the one-hold-per-item rule)."""

    project_field = "item__project"
    list_display = ("id", "item", "annotator", "status", "lease_expires", "updated_at")
    list_filter = ("status",)
    list_select_related = ("item__project", "annotator")
    search_fields = ("item__external_id", "annotator__username")


@admin.register(AnnotationRevision)
class AnnotationRevisionAdmin(ProjectRecordAdmin):
    """Earlier versions of amended annotations (annotation/history.py)."""

    project_field = "annotation__item__project"
    list_display = ("id", "annotation", "submitted_at", "replaced_at", "with_suggestion")
    list_select_related = ("annotation",)


@admin.register(Suggestion)
class SuggestionAdmin(ProjectRecordAdmin):
    """Machine-made answers offered on annotation forms (written by inference jobs)."""

    project_field = "item__project"
    list_display = ("id", "item", "source", "created_at")
    list_select_related = ("item__project",)
    search_fields = ("item__external_id", "source")


@admin.register(ReleaseItem)
class ReleaseItemAdmin(ProjectRecordAdmin):
    """The frozen items of releases (immutable, like their release)."""

    project_field = "release__project"
    list_display = ("release", "position", "item")
    list_select_related = ("release__project", "item__project")
    search_fields = ("item__external_id", "release__version")


@admin.register(Study)
class StudyAdmin(ProjectRecordAdmin):
    """Crowd studies, without their link's token (the studies page shows the link to the project's
    researchers, and opens and closes studies with an audit event)."""

    list_display = ("id", "name", "project", "platform", "is_open", "max_participants", "tasks_per_participant",
                    "created_at", "closed_at")
    list_filter = (PROJECT_FILTER, "platform", "is_open")
    list_select_related = ("project",)
    exclude = ("token",)


@admin.register(StudyParticipant)
class StudyParticipantAdmin(ProjectRecordAdmin):
    """Crowd participants (approved or rejected on the study page, audited)."""

    project_field = "study__project"
    list_display = ("id", "study", "external_id", "status", "started_at", "finished_at", "decided_by")
    list_filter = ("status",)
    list_select_related = ("study__project", "decided_by")
    search_fields = ("external_id",)


@admin.register(ExcludedAnnotation)
class ExcludedAnnotationAdmin(ProjectRecordAdmin):
    """Annotations of rejected participants, kept out of everything that reads annotations."""

    project_field = "item__project"
    list_display = ("annotation_id", "participant", "item", "created_at", "excluded_at")
    list_select_related = ("item__project", "participant")


@admin.register(ItemReopening)
class ItemReopeningAdmin(ProjectRecordAdmin):
    """Verified items sent back to review by a participant's rejection, and why."""

    project_field = "item__project"
    list_display = ("item", "participant", "decision", "reason", "created_by", "created_at")
    list_select_related = ("item__project", "participant", "created_by")


@admin.register(CrowdAccount)
class CrowdAccountAdmin(ReadOnlyAdmin, SuperuserOnlyAdmin, admin.ModelAdmin):
    """A crowd platform's id of a person, across every project's studies: superusers only (a
    project's researchers see their own participants' ids on the study page and above)."""

    list_display = ("user", "platform", "external_id", "created_at")
    list_filter = ("platform",)
    list_select_related = ("user",)


# Accounts and their API tokens: superusers only, whatever model permissions a staff user holds.
for model, model_admin in ((get_user_model(), UserAdmin), (Group, GroupAdmin), (TokenProxy, TokenAdmin)):
    if admin.site.is_registered(model):
        admin.site.unregister(model)
    admin.site.register(model, type(model_admin.__name__, (SuperuserOnlyAdmin, model_admin), {"__module__": __name__}))
