"""Admin pages of a project's records: invites, the audit trail, tasks, revisions, suggestions,
release items, the media files a project owns, crowd studies and their participants, excluded
annotations and the reopenings they caused. They are read only (admin_site.ProjectRecordAdmin)
and scoped to the projects where a non-superuser is researcher or admin: they change through the
pages and services that keep their rules and record who did what (an invite link is revoked here
through the members' service).
Crowd accounts (a platform's id of a person, across projects) are for superusers only.

annotation/admin.py imports this module, which registers these admins with the site: Django's
autodiscovery imports only an app's `admin` module."""

from django.contrib import admin, messages

from .admin_site import ProjectRecordAdmin, ReadOnlyAdmin, SuperuserOnlyAdmin
from .members import MemberRefused, invite_revoke, invite_state
from .models import (
    AnnotationRevision,
    AuditEvent,
    CrowdAccount,
    ExcludedAnnotation,
    ItemReopening,
    ProjectAsset,
    ProjectInvite,
    ReleaseItem,
    Study,
    StudyParticipant,
    Suggestion,
    Task,
)

PROJECT_FILTER = ("project", admin.RelatedOnlyFieldListFilter)  # offers only the projects of the rows shown


@admin.register(ProjectInvite)
class ProjectInviteAdmin(ProjectRecordAdmin):
    """Invite links, without their token's digest; the project's researchers and admins revoke open
    ones here as on the members page (invite_revoke: audited, and not above their own role)."""

    list_display = ("id", "project", "role", "state", "created_by", "created_at", "expires_at", "used_by", "revoked_by")
    list_filter = (PROJECT_FILTER, "role")
    list_select_related = ("project", "created_by", "used_by", "revoked_by")
    fields = (
        "project",
        "role",
        "state",
        "created_by",
        "created_at",
        "expires_at",
        "used_by",
        "used_at",
        "revoked_by",
        "revoked_at",
    )
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
    """Annotators' tasks on items (the queue keeps leases and the one-active-task-per-item rule)."""

    project_field = "item__project"
    list_display = ("id", "item", "annotator", "status", "lease_expires", "updated_at")
    list_filter = ("status",)
    list_select_related = ("item__project", "annotator")
    search_fields = ("item__external_id", "annotator__username")


@admin.register(AnnotationRevision)
class AnnotationRevisionAdmin(ProjectRecordAdmin):
    """Earlier versions of amended annotations (annotation/amend.py)."""

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


@admin.register(ProjectAsset)
class ProjectAssetAdmin(ProjectRecordAdmin):
    """The media files a project owns: recorded by its imports only (annotation/media/assets.py),
    and what decides who may fetch a stored file (annotation/media/access.py)."""

    list_display = ("asset", "project", "created_at")
    list_filter = (PROJECT_FILTER,)
    list_select_related = ("asset", "project")
    search_fields = ("asset__sha256",)


@admin.register(Study)
class StudyAdmin(ProjectRecordAdmin):
    """Crowd studies, without their link's token (the studies page shows the link to the project's
    researchers, and opens and closes studies with an audit event)."""

    list_display = (
        "id",
        "name",
        "project",
        "platform",
        "is_open",
        "max_participants",
        "tasks_per_participant",
        "created_at",
        "closed_at",
    )
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
    """A crowd platform's id in one study (its password-less account): superusers only (a
    project's researchers see their own participants' ids on the study page)."""

    list_display = ("user", "study", "platform", "external_id", "created_at")
    list_filter = ("platform",)
    list_select_related = ("user", "study")
