"""Crowd-rater studies (annotation/studies/): a study's public link and quotas, the password-less
accounts of crowd-platform ids, participants, the annotations of rejected participants kept
out of the analysis, and the verified items a rejection sent back to review. Re-exported by
annotation/models.py; other models are named by string, so this module imports nothing of
models.py."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone


class StudyPlatform(models.TextChoices):
    PROLIFIC = "prolific", "Prolific"
    MTURK = "mturk", "Amazon Mechanical Turk"


class Study(models.Model):
    """A public link (unguessable `token`) through which crowd raters join a project as annotators
    without a password, each doing `tasks_per_participant` tasks, then shown `completion_code`."""

    project = models.ForeignKey("annotation.Project", on_delete=models.CASCADE, related_name="studies")
    name = models.CharField(max_length=200)
    token = models.CharField(max_length=64, unique=True)
    platform = models.CharField(max_length=20, choices=StudyPlatform.choices, default=StudyPlatform.PROLIFIC)
    max_participants = models.PositiveIntegerField()
    tasks_per_participant = models.PositiveIntegerField()
    completion_code = models.CharField(max_length=100)
    # "{code}" in it is replaced by the completion code; Prolific's carries it as ?cc=CODE.
    return_url = models.URLField(max_length=1000, blank=True)
    redirect_on_finish = models.BooleanField(default=False)
    time_limit_minutes = models.PositiveIntegerField(null=True, blank=True)
    gold_pass_threshold = models.FloatField(default=0.0)  # share of gold items right, 0..1
    hourly_rate = models.DecimalField(max_digits=8, decimal_places=2, default=0)
    currency = models.CharField(max_length=8, default="GBP")
    is_open = models.BooleanField(default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "studies"
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.CheckConstraint(condition=Q(max_participants__gte=1), name="study_max_participants_gte_1"),
            models.CheckConstraint(condition=Q(tasks_per_participant__gte=1), name="study_tasks_gte_1"),
            models.CheckConstraint(
                condition=Q(gold_pass_threshold__gte=0) & Q(gold_pass_threshold__lte=1), name="study_gold_threshold_0_1"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.project.slug} study #{self.pk} {self.name}"


class CrowdAccount(models.Model):
    """The password-less account of one crowd-platform id in one study: the same id always signs in
    to the same account through that study's link, and the same id in another study is another
    account. It belongs to its study's project, as an annotator there and nothing more
    (annotation/permissions.py caps it; annotation/members.py refuses any other role or project)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="crowd_account")
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="crowd_accounts")
    platform = models.CharField(max_length=20, choices=StudyPlatform.choices)
    external_id = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "platform", "external_id"], name="crowdaccount_unique_study_id")
        ]


class ParticipantStatus(models.TextChoices):
    ACTIVE = "active", "Active"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"


class StudyParticipant(models.Model):
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="participants")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="study_participations")
    external_id = models.CharField(max_length=64)
    platform_study_id = models.CharField(max_length=100, blank=True)  # Prolific STUDY_ID / MTurk hitId
    platform_session_id = models.CharField(max_length=100, blank=True)  # Prolific SESSION_ID / MTurk assignmentId
    status = models.CharField(max_length=12, choices=ParticipantStatus.choices, default=ParticipantStatus.ACTIVE)
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_note = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["study", "started_at", "pk"]
        constraints = [models.UniqueConstraint(fields=["study", "user"], name="studyparticipant_unique_study_user")]

    def __str__(self) -> str:
        return f"{self.study_id}:{self.external_id}"


class ExcludedAnnotation(models.Model):
    """An annotation of a rejected study participant, moved out of Annotation so that nothing that
    reads annotations (queue, agreement, review, export, scoring) sees it; kept here as the record."""

    participant = models.ForeignKey(StudyParticipant, on_delete=models.CASCADE, related_name="excluded_annotations")
    item = models.ForeignKey("annotation.Item", on_delete=models.CASCADE, related_name="+")
    annotation_id = models.BigIntegerField()  # its id while it was an Annotation
    result = models.JSONField(default=dict)
    time_spent_ms = models.PositiveIntegerField(default=0)
    with_suggestion = models.BooleanField(default=False)
    revisions = models.JSONField(default=list, blank=True)  # its AnnotationRevision rows, oldest first
    created_at = models.DateTimeField()
    excluded_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["participant", "annotation_id"]


class ItemReopening(models.Model):
    """A verified item sent back to review because a participant's rejection took away an
    annotation its decision rested on (annotation/studies/reopen.py says which decisions rest on
    which annotations). The item is annotated again (or pending, when no annotation is left), with
    its payload from before that decision, and its review-queue row says why; the earlier review
    stays as it was, this row is the record of why it no longer stands."""

    item = models.ForeignKey("annotation.Item", on_delete=models.CASCADE, related_name="reopenings")
    participant = models.ForeignKey(StudyParticipant, on_delete=models.CASCADE, related_name="reopened_items")
    review = models.ForeignKey("annotation.Review", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    decision = models.CharField(max_length=10)  # the earlier review's decision (accept, auto)
    annotation_id = models.BigIntegerField()  # the excluded annotation it rested on (ExcludedAnnotation.annotation_id)
    reason = models.CharField(max_length=300)
    # The item's payload as the voided decision left it (its answer written in), kept here because
    # the item gets its payload from before that decision back; and where that came from:
    # "recorded" (Review.payload_before) or "labels_removed" (a decision older than that record:
    # the answer fields taken out, as a raw item has them).
    voided_payload = models.JSONField(null=True, blank=True)
    payload_restore = models.CharField(max_length=20, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["item", "-created_at", "-pk"]
