"""Projects, people, media, items and everything annotators and reviewers produce."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from background.models import TrackedRun
from protocols import registry


class _RegisteredProtocols(type):
    """Class-level views of the protocol registry (protocols/registry.py)."""

    @property
    def values(cls) -> list[str]:
        return list(registry.names())

    @property
    def choices(cls) -> list[tuple[str, str]]:
        return registry.choices()

    def __call__(cls, name: str):
        return registry.get(name)


class Protocol(metaclass=_RegisteredProtocols):
    """The registered protocols: ``Protocol.values``, ``Protocol.choices`` and ``Protocol(name)``
    (the protocol object, protocols/base.py), read from the registry each time they are used."""


class Workflow(models.TextChoices):
    QUINTUPLET = "quintuplet", "Quintuplet labeling"
    BOX = "box", "Bounding box + state"
    QA = "qa", "Blind QA verification"
    RATING = "rating", "Likert video rating"


# protocol name -> the workflow form it is annotated in (each protocol's `workflow`).
WORKFLOW_OF_PROTOCOL = registry.Attribute("workflow")


class Role(models.TextChoices):
    ANNOTATOR = "annotator", "Annotator"
    REVIEWER = "reviewer", "Reviewer"
    RESEARCHER = "researcher", "Researcher"
    ADMIN = "admin", "Admin"


# Higher rank includes the rights of the lower ones.
ROLE_RANK = {Role.ANNOTATOR: 1, Role.REVIEWER: 2, Role.RESEARCHER: 3, Role.ADMIN: 4}


def default_annotations_per_item(protocol: str) -> int:
    """Annotations each item gets when a project does not say: the protocol's default (video
    ratings are noisy, so three raters per video; every other workflow starts with one)."""
    try:
        return registry.get(protocol).default_annotations_per_item
    except registry.UnknownProtocol:
        return 1


class Project(models.Model):
    slug = models.SlugField(max_length=80, unique=True)
    name = models.CharField(max_length=200)
    # Choices are a callable, read when a form or full_clean asks: the registry as the setting
    # STATELAB_PROTOCOLS names it now (migrations keep the reference, never a list of names).
    protocol = models.CharField(max_length=20, choices=registry.choices)
    # No fixed default: save() fills in the protocol's (3 for video rating, else 1) whoever
    # creates the project (admin, import --create, API, demo). The column stays NOT NULL.
    annotations_per_item = models.PositiveSmallIntegerField(
        blank=True,
        help_text="Submitted annotations each (non-gold) item needs before it is annotated and goes to review. "
        "Left empty, it is the protocol's default: 3 for video rating, 1 otherwise.",
    )
    settings = models.JSONField(
        default=dict,
        blank=True,
        help_text="Workflow settings as a JSON object. "
        "gold_share (0..1, default 0): chance that a claim offers a gold item (known answer, mixed in "
        "unannounced; it scores the annotator and is counted apart from the progress counts). "
        "auto_verify (true/false, default false): an item whose annotators all agree becomes verified "
        "without a reviewer. "
        "lease_seconds (default 600): how long a claimed task lasts without a renewal before the "
        "item returns to the queue. "
        "rubric (video rating): the rubric shown to raters, one text or criterion -> text. "
        "state_labels (boxes): object -> extra state labels offered as candidates. "
        "disagreement: thresholds that mark an annotated item for adjudication (it then comes first in "
        "the review queue), best set on the project's Settings page, which also marks the items waiting "
        "for review again: rating_spread (rating; a whole number from 1 to 4, default 2: a criterion "
        "whose scores spread this much), box_iou (boxes; above 0 and at most 1, default 0.5: boxes "
        "overlapping less), quintuplet_fields (quintuplets; one or more of the six fields, default all "
        "six). Only the thresholds of the project's workflow, checked here as on that page; a stored value "
        "those checks refuse is read as its default (with a warning in the log). QA items are marked "
        "when their answers differ. "
        "suggestions (true/false, default true; quintuplet and QA): show model suggestions on the "
        "annotation form. A QA answer given with one on the form is not blind and is left out of the "
        "Human row, so a project that wants a Human row sets this to false. "
        "multiple (true/false, multiple-answer QA protocols): whether an item that does not say takes "
        "several letters (default true). "
        "license, citation (texts): the dataset card of a Hugging Face export. "
        "Any other key, or a key the project's protocol does not read, is refused.",
    )
    # Seed for every deterministic option order derived for this project's items.
    option_seed = models.IntegerField(default=0)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]
        constraints = [
            models.CheckConstraint(condition=Q(annotations_per_item__gte=1), name="project_annotations_per_item_gte_1"),
        ]

    def __str__(self) -> str:
        return self.slug

    def save(self, *args, **kwargs):
        if self.annotations_per_item is None:
            self.annotations_per_item = default_annotations_per_item(self.protocol)
            if kwargs.get("update_fields") is not None:
                kwargs["update_fields"] = {*kwargs["update_fields"], "annotations_per_item"}
        super().save(*args, **kwargs)

    @property
    def workflow(self) -> str:
        return WORKFLOW_OF_PROTOCOL[self.protocol]

    @property
    def fill_fields(self) -> tuple[str, ...]:
        """The label fields a labelling pass may fill in this project (its protocol's; annotation/fill_pass.py)."""
        return tuple(registry.get(self.protocol).fill_fields)


class Membership(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=20, choices=Role.choices)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "user"], name="membership_unique_project_user")]

    def __str__(self) -> str:
        return f"{self.user} @ {self.project} ({self.role})"


class ProjectInvite(models.Model):
    """A link that lets whoever opens it (signed in, before `expires_at`) join the project with
    `role`, once. Only the token's SHA-256 is stored: the link is shown once, when it is made."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="invites")
    role = models.CharField(max_length=20, choices=Role.choices)
    token_sha256 = models.CharField(max_length=64, unique=True)
    expires_at = models.DateTimeField()
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    used_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    used_at = models.DateTimeField(null=True, blank=True)
    # Revoked by a researcher or admin of the project before anyone used it: the link then answers
    # 410 like a used or expired one (annotation/members.py invite_revoke). The row stays, as the record.
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.project.slug} invite #{self.pk} ({self.role})"


# Stored media and their owning projects: their models live in media/models.py, re-exported here.
from .media.models import MediaAsset as MediaAsset  # noqa: E402
from .media.models import MediaKind as MediaKind  # noqa: E402
from .media.models import ProjectAsset as ProjectAsset  # noqa: E402


class ItemStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    ANNOTATED = "annotated", "Annotated"
    VERIFIED = "verified", "Verified"
    DISCARDED = "discarded", "Discarded"


class Item(models.Model):
    # No index of its own: the unique constraint and both indexes below lead with the project
    # (migration 0027).
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="items", db_index=False)
    external_id = models.CharField(max_length=200)
    # The protocol payload in the interchange format (docs/architecture.md), media fields as relative paths.
    payload = models.JSONField(default=dict)
    # Media field name -> asset sha256 (or list of sha256 for list fields, e.g. an "images" field).
    media = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=12, choices=ItemStatus.choices, default=ItemStatus.PENDING)
    split = models.CharField(max_length=50, default="test")
    tags = models.JSONField(default=list, blank=True)
    is_gold = models.BooleanField(default=False)
    # Denormalised count of submitted annotations, kept in the same transaction as each insert.
    annotation_count = models.PositiveIntegerField(default=0)
    # Order within a queue level (lower first). 0 for every item unless its protocol matches pairs
    # (protocols/base.py ``matchmaking_module``): annotation/queue/ranks.py refreshes it from the votes.
    queue_rank = models.IntegerField(default=0, db_default=0)
    # Set when the item becomes annotated and its annotations disagree beyond the project's
    # thresholds (annotation/disagreement.py): {"fields": [...]}; null when they agree. Such items
    # come first in the review queue.
    disagreement = models.JSONField(null=True, blank=True)
    # A labelling pass (annotation/fill_pass.py) asked for these label fields only (the protocol's
    # ``fill_fields`` the item lacked): its form, its answers and their review hold just these; [] otherwise.
    fill_fields = models.JSONField(default=list, blank=True, db_default=[])
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "external_id"], name="item_unique_project_external_id"),
        ]
        indexes = [
            models.Index(fields=["project", "status", "annotation_count", "queue_rank", "id"], name="item_queue_idx"),
            models.Index(fields=["project", "split", "status"], name="item_split_status_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.project.slug}/{self.external_id}"


class TaskStatus(models.TextChoices):
    ACTIVE = "active", "Active"
    SUBMITTED = "submitted", "Submitted"
    SKIPPED = "skipped", "Skipped"
    EXPIRED = "expired", "Expired"


class Task(models.Model):
    """One annotator's claim on one item, kept alive under a lease (the queue: annotation/queue/)."""

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="tasks")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="tasks")
    status = models.CharField(max_length=12, choices=TaskStatus.choices, default=TaskStatus.ACTIVE)
    lease_expires = models.DateTimeField()
    draft = models.JSONField(default=dict, blank=True)
    draft_version = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            # At most one active task per item: nobody else claims an item someone is working on.
            models.UniqueConstraint(fields=["item"], condition=Q(status="active"), name="task_one_active_per_item"),
        ]
        indexes = [models.Index(fields=["annotator", "status"], name="task_annotator_status_idx")]


class Annotation(models.Model):
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="annotations")
    # A platform user, or an external rater id for imported human studies.
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="annotations"
    )
    external_rater = models.CharField(max_length=200, blank=True, default="")
    task = models.OneToOneField(Task, on_delete=models.SET_NULL, null=True, blank=True, related_name="annotation")
    result = models.JSONField(default=dict)
    time_spent_ms = models.PositiveIntegerField(default=0)
    # Unique per annotator (see Meta), so two clients that both number their submits "1", "2", ...
    # never collide, while a retry by the same annotator always finds its first submit.
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)
    source = models.CharField(max_length=20, default="task")  # task | import
    # A machine-made suggestion was offered on the form when this answer was given, so it is not a
    # blind answer: the Human row leaves it out. Imported human studies are blind (False).
    with_suggestion = models.BooleanField(
        default=False,
        db_default=False,
        help_text="A model suggestion was on the form when this answer was given (not blind).",
    )
    # An imported aggregated rating: its scores are a published study's means of this many raters, the
    # item's only human rating, which per-rater statistics cannot use (annotation/importing/annotations.py).
    aggregate_raters = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="Imported means of this many raters (null: one rater's own annotation)."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(aggregate_raters__isnull=True)
                | Q(aggregate_raters__gte=2, annotator__isnull=True, source="import"),
                name="annotation_aggregate_imported_of_raters",
            ),
            models.UniqueConstraint(
                fields=["item", "annotator"],
                condition=Q(annotator__isnull=False),
                name="annotation_one_per_item_annotator",
            ),
            models.UniqueConstraint(
                fields=["item", "external_rater"], condition=~Q(external_rater=""), name="annotation_one_per_item_rater"
            ),
            models.UniqueConstraint(
                fields=["annotator", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="annotation_unique_annotator_idempotency_key",
            ),
        ]
        indexes = [models.Index(fields=["annotator", "created_at"], name="annotation_annotator_idx")]


class AnnotationRevision(models.Model):
    """An earlier version of an annotation its annotator amended (annotation/amend.py): the
    annotation row holds what counts now; each amendment keeps what it replaced here."""

    annotation = models.ForeignKey(Annotation, on_delete=models.CASCADE, related_name="revisions")
    result = models.JSONField()
    time_spent_ms = models.PositiveIntegerField(default=0)
    with_suggestion = models.BooleanField(default=False)
    submitted_at = models.DateTimeField()  # when the replaced version was given
    replaced_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["annotation", "replaced_at", "pk"]


class Suggestion(models.Model):
    """A machine-made answer that pre-fills an annotation form (marked as such in the page)."""

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="suggestions")
    source = models.CharField(max_length=200)  # e.g. "job:12 qwen2-vl-7b"
    result = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["item", "source"], name="suggestion_unique_item_source")]


class ReviewDecision(models.TextChoices):
    ACCEPT = "accept", "Accept an annotation"
    EDIT = "edit", "Edit a merged answer"
    DISCARD = "discard", "Discard the item"
    AUTO = "auto", "Auto-verified (annotators agree)"


class Review(models.Model):
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True)
    decision = models.CharField(max_length=10, choices=ReviewDecision.choices)
    accepted_annotation = models.ForeignKey(Annotation, on_delete=models.SET_NULL, null=True, blank=True)
    # An edit: the annotation the reviewer's answer started from (the review page sends the one
    # selected), when given. A plain id, so it outlives the annotation's exclusion (ExcludedAnnotation
    # keeps the same annotation_id) and the history still names it.
    source_annotation_id = models.BigIntegerField(null=True, blank=True)
    result = models.JSONField(default=dict, blank=True)
    # The item's payload just before this decision wrote its answer into it (accept, edit, auto),
    # what a reopening (studies/reopen.py) puts back; null for a discard and for decisions older
    # than this record.
    payload_before = models.JSONField(null=True, blank=True)
    comment = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)


class Release(models.Model):
    """An immutable, checksummed version of a project's verified items in one split."""

    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="releases")
    version = models.CharField(max_length=50)
    split = models.CharField(max_length=50, default="test")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    item_count = models.PositiveIntegerField(default=0)
    checksum = models.CharField(max_length=64)
    # What the checksum covers (annotation/releases.py): "lines+media" (the lines, then the path ->
    # SHA-256 of every media file the release ships); "lines" for releases frozen before media were
    # recorded (their checksum covers the lines only).
    checksum_method = models.CharField(max_length=20, default="lines+media")
    option_seed = models.IntegerField(default=0)
    # The project's fields the exports show, as they were at the freeze (slug, name, description,
    # settings): a later edit of the project does not change what an export of this release holds.
    frozen_project = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["project", "created_at"]
        constraints = [models.UniqueConstraint(fields=["project", "version"], name="release_unique_project_version")]

    def __str__(self) -> str:
        return f"{self.project.slug}@{self.version}"


class ReleaseItem(models.Model):
    """A frozen copy of one verified item as it entered the release (payload + resolved options)."""

    # No index of its own: both unique constraints below lead with the release (migration 0026).
    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="release_items", db_index=False)
    item = models.ForeignKey(Item, on_delete=models.PROTECT, related_name="release_items")
    position = models.PositiveIntegerField()
    payload = models.JSONField()
    # Relative media path (as the line names it) -> SHA-256 of the stored file, as at the freeze:
    # every export reads the item's media from here, never from the live item.
    media = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["release", "position"]
        constraints = [
            models.UniqueConstraint(fields=["release", "item"], name="releaseitem_unique_release_item"),
            models.UniqueConstraint(fields=["release", "position"], name="releaseitem_unique_release_position"),
        ]


class ImportKind(models.TextChoices):
    ITEMS = "items", "Items"
    ANNOTATIONS = "annotations", "Human annotations"


class ImportRun(TrackedRun):
    """An upload from the import page or API, imported by a Celery worker (`default` queue).

    The file waits under CACHE_ROOT/uploads (shared by web and workers) and is removed once the
    run ends. The command `import_items` imports in its own process and makes no run. Its status,
    claim, heartbeat and recovery are every background run's (background/, TrackedRun): a refused
    file ends REFUSED, with the reasons in ``errors``.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="import_runs")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    kind = models.CharField(max_length=20, choices=ImportKind.choices, default=ImportKind.ITEMS)
    verified = models.BooleanField(default=False)
    file_name = models.CharField(max_length=255)
    file_bytes = models.BigIntegerField(default=0)
    staged_path = models.CharField(max_length=1000, blank=True)
    report = models.JSONField(default=dict, blank=True)  # the importer's report once imported
    errors = models.JSONField(default=list, blank=True)  # "line N: field F: reason" (first ones) when refused
    error_count = models.PositiveIntegerField(default=0)
    # How far the claiming worker has read (importing/runs.py): bytes of the items file read so far
    # out of progress_total, its size (uncompressed in a zip) times the importer's passes over it;
    # 0 of 0 until the worker has opened the file.
    progress_bytes = models.BigIntegerField(default=0)
    progress_total = models.BigIntegerField(default=0)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["project", "-created_at"], name="importrun_project_created_idx")]

    def __str__(self) -> str:
        return f"{self.project.slug} import #{self.pk} ({self.status})"


# The audit trail's model lives in audit/models.py (with the audit code), re-exported here.
from .audit.models import AuditAction as AuditAction  # noqa: E402
from .audit.models import AuditEvent as AuditEvent  # noqa: E402

# Crowd-rater studies: their models live in studies/models.py (with the studies code), re-exported here.
# The redundant aliases mark them as re-exports: Django loads the app's models from this module.
from .studies.models import CrowdAccount as CrowdAccount  # noqa: E402
from .studies.models import ExcludedAnnotation as ExcludedAnnotation  # noqa: E402
from .studies.models import ItemReopening as ItemReopening  # noqa: E402
from .studies.models import ParticipantStatus as ParticipantStatus  # noqa: E402
from .studies.models import Study as Study  # noqa: E402
from .studies.models import StudyParticipant as StudyParticipant  # noqa: E402
from .studies.models import StudyPlatform as StudyPlatform  # noqa: E402
