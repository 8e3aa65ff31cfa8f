"""Model endpoints, inference jobs and their predictions."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models

from annotation.models import Item, Project, Release
from background.models import TrackedRun
from protocols import registry


class Backend(models.TextChoices):
    VLLM = "vllm", "vLLM offline engine (gpu queue)"
    OPENAI = "openai", "OpenAI-compatible API (api queue)"
    RANDOM = "random", "Seeded random baseline"


class ModelEndpoint(models.Model):
    """A model a job may run on. Shared (no project): set up by an operator (a superuser), offered to
    every project. A project's own: set up by the project's researchers, offered to its jobs only,
    named uniquely within the project (docs/inference.md, "Endpoints")."""

    name = models.CharField(max_length=200)
    project = models.ForeignKey(
        Project,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="endpoints",
        help_text="Empty: a shared endpoint, offered to every project.",
    )
    backend = models.CharField(max_length=10, choices=Backend.choices)
    model_id = models.CharField(max_length=300, blank=True)
    revision = models.CharField(max_length=100, blank=True)
    base_url = models.CharField(max_length=500, blank=True)
    # Name of the environment variable holding the API key; the key itself is never stored.
    api_key_env = models.CharField(max_length=100, blank=True)
    concurrency = models.PositiveIntegerField(default=8)
    # Backend settings: tensor_parallel_size, max_model_len, dtype, limit_mm_per_prompt,
    # mm_processor_kwargs, generation_config, timeout, max_retries, json_schema...
    options = models.JSONField(default=dict, blank=True)
    # What the endpoint's provider charges, in USD per million tokens; empty: no cost is shown.
    # A job's cost counts the tokens its replies used (an answer from the response cache uses none).
    price_per_1m_input = models.DecimalField(
        "price per 1M input tokens (USD)",
        max_digits=12,
        decimal_places=6,
        null=True,
        blank=True,
        validators=[MinValueValidator(0)],
    )
    price_per_1m_output = models.DecimalField(
        "price per 1M output tokens (USD)",
        max_digits=12,
        decimal_places=6,
        null=True,
        blank=True,
        validators=[MinValueValidator(0)],
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["name"], condition=models.Q(project__isnull=True), name="endpoint_shared_name_unique"
            ),
            models.UniqueConstraint(fields=["project", "name"], name="endpoint_project_name_unique"),
        ]

    def __str__(self) -> str:
        return self.name

    def key_refusal(self) -> str | None:
        """Why this endpoint may not read the key variable it names, or None when it may: the
        variable must be one the operator allows (backends/keys.py); a project's endpoint may send
        it only to the server a shared endpoint sends it to (same variable, same base URL), so a
        project's researcher cannot have an operator's key sent to a server of their choosing."""
        from .backends.keys import key_var_refusal

        refusal = key_var_refusal(self.api_key_env)
        if refusal or not self.api_key_env or self.project_id is None:
            return refusal
        shared = ModelEndpoint.objects.filter(project=None, api_key_env=self.api_key_env, base_url=self.base_url)
        if shared.exists():
            return None
        return (
            f"a project's endpoint may use the key in {self.api_key_env} only with the base URL of a shared "
            f"endpoint that uses it ({self.base_url or 'the default'} is not one); leave the key variable empty "
            "for a server that needs no key, or ask an operator for a shared endpoint"
        )

    def clean(self) -> None:
        refusal = self.key_refusal()
        if refusal:
            raise ValidationError({"api_key_env": refusal})
        same_name = ModelEndpoint.objects.filter(name=self.name).exclude(pk=self.pk)
        if self.project_id is not None:
            same_name = same_name.filter(models.Q(project=None) | models.Q(project_id=self.project_id))
        if self.name and same_name.exists():
            where = "shared or of this project" if self.project_id else "shared or of a project"
            raise ValidationError({"name": f"an endpoint named {self.name} exists already ({where})"})


class JobStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    FINISHED = "finished", "Finished"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


class JobMode(models.TextChoices):
    EVALUATE = "evaluate", "Evaluate a release"
    SUGGEST = "suggest", "Suggest answers for annotators"
    IMPORTED = "imported", "Predictions imported from a file"


class InferenceJob(models.Model):
    endpoint = models.ForeignKey(ModelEndpoint, on_delete=models.PROTECT, null=True, blank=True, related_name="jobs")
    # Row name on leaderboards: the endpoint's name, or the name given at import.
    model_name = models.CharField(max_length=200)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="inference_jobs")
    release = models.ForeignKey(Release, on_delete=models.PROTECT, null=True, blank=True, related_name="inference_jobs")
    protocol = models.CharField(max_length=20, choices=registry.choices)  # as Project.protocol
    mode = models.CharField(max_length=10, choices=JobMode.choices, default=JobMode.EVALUATE)
    # Protocol options, sampling parameters, frames, seed, item limit, strategy.
    params = models.JSONField(default=dict, blank=True)
    prompt_version = models.CharField(max_length=50, blank=True)
    status = models.CharField(max_length=10, choices=JobStatus.choices, default=JobStatus.QUEUED)
    error = models.TextField(blank=True)
    total_queries = models.PositiveIntegerField(default=0)
    done_queries = models.PositiveIntegerField(default=0)
    failed_queries = models.PositiveIntegerField(default=0)
    prompt_tokens = models.BigIntegerField(default=0)
    completion_tokens = models.BigIntegerField(default=0)
    # Answers served from the response cache instead of the endpoint (backends/response_cache.py).
    cached_answers = models.PositiveIntegerField(default=0)
    # How many of the job's answers its protocol scores correct, as the scorer settings name
    # (STATELAB_JOB_METRICS: its "correct") said when the job's results were last written; null
    # while the job is not scored, or when its protocol has no right answer (ratings).
    correct_answers = models.PositiveIntegerField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["project", "release", "status"], name="job_project_release_idx")]

    def __str__(self) -> str:
        return f"job {self.pk} {self.model_name} on {self.project}"


class PredictionStatus(models.TextChoices):
    OK = "ok", "OK"
    FAILED = "failed", "Failed"


class Prediction(models.Model):
    job = models.ForeignKey(InferenceJob, on_delete=models.CASCADE, related_name="predictions")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="predictions")
    query = models.CharField(max_length=100)
    status = models.CharField(max_length=10, choices=PredictionStatus.choices, default=PredictionStatus.OK)
    error = models.TextField(blank=True)
    prompt = models.TextField(blank=True)
    # The option order shown to the model (list of option texts), stored for re-scoring and audit.
    options = models.JSONField(default=list, blank=True)
    raw_output = models.TextField(blank=True)
    # Parsed answer (letter, integer, list, or criterion -> score); null when unparseable.
    answer = models.JSONField(null=True, blank=True)
    logprobs = models.JSONField(null=True, blank=True)
    frame_indices = models.JSONField(null=True, blank=True)
    # Requests made for this query, JSON repair requests included (and their tokens and time below).
    attempts = models.PositiveSmallIntegerField(default=0)
    # JSON repair requests sent after a structured (judge) reply could not be read.
    json_repairs = models.PositiveSmallIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    # Imported predictions: what the tool that wrote the file said beside the reply, kept as it
    # logged it (its format, the file's line or row, its target, its per-sample metric values),
    # next to StateLab's own score of the reply (docs/inference.md, "Other tools' outputs").
    source = models.JSONField(null=True, blank=True)
    # What a cold board reads of the reply (evaluation/scoring/choice_answers.py), kept in plain
    # columns so the board reads no JSON: PostgreSQL computes them from status, answer, options and
    # logprobs on every insert and update, whoever writes (ORM, COPY, raw SQL), by the trigger that
    # inference/migrations/0011_prediction_parsed_columns.py creates; whatever is written here by
    # hand is replaced. Null: a row not filled yet, which the board reads from the JSON instead.
    # answer_code: the answer's letter (A=0 ... Z=25); -1 failed; -2 anything else (not a bare
    # letter, null). logprob_kind: 0 no log-probs; 1 log P(A) is a number (logprob_a); 2 "A" absent
    # or null (probability 0); 3 anything else. options_hash: PostgreSQL's hashtextextended of the
    # stored order's JSON text (0 for none).
    answer_code = models.SmallIntegerField(null=True, blank=True, editable=False)
    logprob_kind = models.SmallIntegerField(null=True, blank=True, editable=False)
    logprob_a = models.FloatField(null=True, blank=True, editable=False)
    options_hash = models.BigIntegerField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["job", "item", "query"], name="prediction_unique_job_item_query"),
        ]


class CachedResponse(models.Model):
    """An API judge's answer to one exact request, kept so that asking it again costs nothing
    (backends/response_cache.py): only for deterministic sampling (temperature 0, one choice)
    unless the endpoint's options say otherwise. `model` is the server and model asked;
    `request_hash` the SHA-256 of the whole request body (messages, sampling parameters, schema)."""

    model = models.CharField(max_length=800)
    request_hash = models.CharField(max_length=64)
    sampling = models.JSONField(default=dict, blank=True)  # the sampling parameters sent, for audit
    text = models.TextField(blank=True)
    logprobs = models.JSONField(null=True, blank=True)
    finish_reason = models.CharField(max_length=50, blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    hits = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    used_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["model", "request_hash"], name="cached_response_unique_request"),
        ]

    def __str__(self) -> str:
        return f"{self.model} {self.request_hash[:12]}"


class BackgroundRun(TrackedRun):
    """One unit of a job's background work, recorded in PostgreSQL (the broker is not the record):
    a job's start, each chunk of a job, its export, the board warm-ups that follow it.

    The Celery message carries the row's id (kwarg ``tracked_run``, background/tracked.py); a worker
    claims the row atomically, refreshes ``heartbeat_at`` while it runs and marks it finished or
    failed; Celery beat's watchdog re-enqueues a run whose heartbeat lapsed, up to
    STATELAB_RUN_MAX_ATTEMPTS claims, then fails it with the reason (background/watchdog.py; what
    that means for the job: inference/services/recovery.py).
    """

    celery_task = models.CharField(max_length=200)  # the registered name of the Celery task to run
    args = models.JSONField(default=list, blank=True)
    queue = models.CharField(max_length=50, default="default")
    # A job's start, chunks and export link to the job; chunk_index is set for chunks only.
    job = models.ForeignKey(InferenceJob, on_delete=models.CASCADE, null=True, blank=True, related_name="runs")
    chunk_index = models.PositiveIntegerField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)  # when its message was last sent to the broker

    class Meta:
        ordering = ["pk"]
        indexes = [
            models.Index(fields=["status", "heartbeat_at"], name="run_status_heartbeat_idx"),
            models.Index(fields=["job", "status"], name="run_job_status_idx"),
        ]

    def __str__(self) -> str:
        where = f" job {self.job_id} chunk {self.chunk_index}" if self.chunk_index is not None else ""
        return f"run {self.pk} {self.celery_task.rsplit('.', 1)[-1]}{where} ({self.status})"
