"""The audit trail's table (annotation/audit/): who did what to which object, when. Re-exported by
annotation/models.py; other models are named by string, so this module imports nothing of models.py."""

from django.conf import settings
from django.db import models
from django.utils import timezone


class AuditAction(models.TextChoices):
    IMPORT = "import", "Import"
    VERIFY = "verify", "Verify"
    EDIT = "edit", "Edit and verify"
    DISCARD = "discard", "Discard"
    FREEZE = "freeze", "Freeze release"
    EXPORT = "export", "Export release"
    LAUNCH = "launch", "Launch inference job"
    CANCEL = "cancel", "Cancel inference job"
    RETRY = "retry", "Retry inference job"
    MEMBER_ADD = "member_add", "Add member"
    MEMBER_CHANGE = "member_change", "Change member role"
    MEMBER_REMOVE = "member_remove", "Remove member"
    MEMBER_INVITE = "member_invite", "Create invite link"
    INVITE_REVOKE = "invite_revoke", "Revoke invite link"
    PROJECT_CREATE = "project_create", "Create project"
    AMEND = "amend", "Amend own annotation"
    STUDY_OPEN = "study_open", "Open crowd study"
    STUDY_CLOSE = "study_close", "Close crowd study"
    STUDY_APPROVE = "study_approve", "Approve study participant"
    STUDY_REJECT = "study_reject", "Reject study participant"
    REVIEW_REOPEN = "review_reopen", "Send verified item back to review"
    PROJECT_SETTINGS = "project_settings", "Change project settings"
    ADMIN_CHANGE = "admin_change", "Change in the admin"
    ADMIN_DELETE = "admin_delete", "Delete in the admin"
    FILL_PASS = "fill_pass", "Start a labelling pass"


class AuditEvent(models.Model):
    """Who did what to which object, when: written by the service that made the change, in its
    transaction (annotation/audit/record.py); read by the project's researchers (annotation/audit/trail.py)."""

    at = models.DateTimeField(default=timezone.now)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    actor_name = models.CharField(max_length=150, blank=True)  # kept when the account is deleted
    project = models.ForeignKey(
        "annotation.Project", on_delete=models.SET_NULL, null=True, blank=True, related_name="audit_events"
    )
    action = models.CharField(max_length=20, choices=AuditAction.choices)
    object_type = models.CharField(max_length=100)
    object_id = models.CharField(max_length=64, blank=True)
    object_repr = models.CharField(max_length=200, blank=True)
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-pk"]
        indexes = [
            models.Index(fields=["project", "-at", "-id"], name="audit_project_at_idx"),
            models.Index(fields=["project", "action", "-at"], name="audit_project_action_at_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor_name or '-'} {self.action} {self.object_repr}"
