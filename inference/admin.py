"""Admin pages: model endpoints, and inference jobs that start when a researcher saves them.

A non-superuser sees the jobs of the projects where they are researcher or admin (ProjectScopedAdmin)
and the endpoints a job may run on, read only: an endpoint serves every project, so changing its
URL or model would change other projects' jobs; superusers (the operators) set endpoints up. The
predictions of those jobs are read only for everyone (ProjectRecordAdmin): workers and imports write
them, and a re-score re-parses them (the job list's action)."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html

from annotation.admin_site import ProjectRecordAdmin, ProjectScopedAdmin, may_use_admin
from config.workers import queue_status

from . import run_status, selectors, services
from .backends import BackendUnavailable, check_available
from .models import Backend, BackgroundRun, InferenceJob, JobMode, JobStatus, ModelEndpoint, Prediction


class EndpointForm(forms.ModelForm):
    class Meta:
        model = ModelEndpoint
        fields = "__all__"

    def clean_options(self):
        options = self.cleaned_data.get("options") or {}
        if not isinstance(options, dict):
            raise forms.ValidationError("options must be a JSON object")
        try:
            services.endpoint_options_check(options)
        except ValidationError as exc:
            raise forms.ValidationError(exc.messages)
        return options


@admin.register(ModelEndpoint)
class ModelEndpointAdmin(admin.ModelAdmin):
    form = EndpointForm
    list_display = ("name", "backend", "model_id", "revision", "concurrency", "workers", "web_check")
    list_filter = ("backend",)
    search_fields = ("name", "model_id")
    fieldsets = (
        (None, {"fields": ("name", "backend", "model_id", "revision")}),
        (
            "API",
            {
                "fields": ("base_url", "api_key_env", "concurrency"),
                "description": "The API key is read from the environment variable named here; it is never stored.",
            },
        ),
        (
            "Backend settings",
            {
                "fields": ("options",),
                "description": (
                    "JSON. vllm: tensor_parallel_size, max_model_len, dtype, limit_mm_per_prompt, mm_processor_kwargs, "
                    "generation_config. openai: timeout, max_retries, json_schema, logprobs, structured_choice. "
                    "Prices for the cost estimate: price_per_1m_input, price_per_1m_output (USD)."
                ),
            },
        ),
    )

    def get_queryset(self, request):
        qs = super().get_queryset(request)
        return qs if request.user.is_superuser else qs.filter(pk__in=selectors.endpoints_usable())

    def has_module_permission(self, request):
        return request.user.is_superuser or may_use_admin(request.user)

    def has_view_permission(self, request, obj=None):
        return request.user.is_superuser or may_use_admin(request.user)

    def has_add_permission(self, request):
        return request.user.is_superuser

    def has_change_permission(self, request, obj=None):
        return request.user.is_superuser

    def has_delete_permission(self, request, obj=None):
        return request.user.is_superuser

    @admin.display(description="workers")
    def workers(self, obj: ModelEndpoint) -> str:
        """Who would run this endpoint's chunks: the live workers of its queue as they report
        themselves (config.workers), not what this web process happens to have installed."""
        return queue_status("gpu" if obj.backend == Backend.VLLM else "api")["message"]

    @admin.display(description="set up in the web process")
    def web_check(self, obj: ModelEndpoint) -> str:
        """Whether this web process has the endpoint's engine and allowed key: a hint only, as
        the workers (above) run the jobs with their own environment."""
        try:
            check_available(obj)
        except BackendUnavailable as exc:
            return f"no: {exc}"
        return "yes"


class JobForm(forms.ModelForm):
    temperature = forms.FloatField(initial=0.0, min_value=0.0, max_value=2.0)
    max_tokens = forms.IntegerField(required=False, min_value=1, help_text="Defaults to what each protocol needs.")
    seed = forms.IntegerField(required=False, help_text="Sampling seed passed to the backend.")
    frames = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=200,
        help_text="Frames per video (default: the protocol's, 32 per video of a video pair, 20 for a judged video).",
    )
    item_limit = forms.IntegerField(required=False, min_value=1)
    strategy = forms.ChoiceField(
        choices=[("direct", "direct"), ("multistage", "multi-stage (video QA)")], initial="direct"
    )
    chunk_size = forms.IntegerField(required=False, min_value=1, help_text="Items per chunk (one Celery task each).")
    extra_params = forms.JSONField(required=False, initial=dict, label="Other parameters (JSON)")

    PARAM_FIELDS = ("temperature", "max_tokens", "seed", "frames", "item_limit", "strategy", "chunk_size")

    class Meta:
        model = InferenceJob
        fields = ("endpoint", "project", "release", "protocol", "mode")

    def __init__(self, *args, **kwargs):
        # The project, release and endpoint choices come from InferenceJobAdmin.formfield_for_foreignkey.
        super().__init__(*args, **kwargs)
        self.fields["protocol"].required = False
        self.fields["protocol"].help_text = "Leave empty to use the project's protocol."
        self.fields["endpoint"].required = True

    def clean(self):
        data = super().clean()
        project = data.get("project")
        if not project or not data.get("endpoint"):
            return data
        data["protocol"] = data.get("protocol") or project.protocol
        params = dict(data.get("extra_params") or {})
        for name in self.PARAM_FIELDS:
            if data.get(name) not in (None, ""):
                params[name] = data[name]
        if params.get("strategy") == "direct":
            params.pop("strategy")
        data["params"] = params
        try:
            services.job_validate(
                endpoint=data["endpoint"],
                project=project,
                release=data.get("release"),
                protocol=data["protocol"],
                mode=data.get("mode") or JobMode.EVALUATE,
                params=params,
            )
        except ValidationError as exc:
            raise forms.ValidationError(exc.messages)
        return data


@admin.register(InferenceJob)
class InferenceJobAdmin(ProjectScopedAdmin):
    form = JobForm
    list_display = (
        "id",
        "model_name",
        "project",
        "protocol",
        "mode",
        "live_status",
        "progress",
        "rate",
        "eta",
        "failures",
        "chunks",
        "tokens",
        "cost",
        "job_page",
        "created_at",
    )
    list_filter = (("project", admin.RelatedOnlyFieldListFilter), "status", "protocol", "mode")
    search_fields = ("model_name", "project__slug")
    actions = ("cancel_jobs", "retry_failed", "rescore")
    readonly_fields = (
        "endpoint",
        "model_name",
        "project",
        "release",
        "protocol",
        "mode",
        "params",
        "prompt_version",
        "status",
        "error",
        "total_queries",
        "done_queries",
        "failed_queries",
        "prompt_tokens",
        "completion_tokens",
        "created_by",
        "created_at",
        "started_at",
        "finished_at",
        "chunks",
        "workers",
    )

    class Media:
        # Polls the progress API of each queued or running job in the list and updates its row.
        js = ("inference/admin_job_list.js",)

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("project", "endpoint")

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is not None:
            # A job is shown read only: a bare form with no field (the admin passes the fieldsets'
            # field names in kwargs; JobForm's parameter fields belong to the add page only).
            kwargs.update(form=forms.ModelForm, fields=())
        return super().get_form(request, obj, change=change, **kwargs)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        # Nothing on a job's page is editable: it changes through the list's actions only.
        hidden = {"show_save": False, "show_save_and_continue": False, "show_save_and_add_another": False}
        return super().change_view(request, object_id, form_url, {**(extra_context or {}), **hidden})

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "endpoint":
            kwargs["queryset"] = selectors.endpoints_usable()
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def get_fieldsets(self, request, obj=None):
        if obj is not None:
            return [(None, {"fields": self.readonly_fields})]
        return [
            (None, {"fields": ("endpoint", "project", "release", "protocol", "mode")}),
            ("Parameters", {"fields": JobForm.PARAM_FIELDS + ("extra_params",)}),
        ]

    def get_readonly_fields(self, request, obj=None):
        return self.readonly_fields if obj is not None else ()

    def save_model(self, request, obj, form, change):
        if change:
            return  # a job is immutable once created; use the actions
        data = form.cleaned_data  # checked by JobForm.clean with services.job_validate
        job = services.job_create(
            endpoint=obj.endpoint,
            project=obj.project,
            release=obj.release,
            protocol=data["protocol"],
            mode=obj.mode,
            params=data["params"],
            created_by=request.user,
        )  # starts once the admin commits
        # The admin logs and redirects to the object it passed in: make it the job the service created.
        obj.pk = job.pk
        obj.refresh_from_db()

    def response_add(self, request, obj, post_url_continue=None):
        self.message_user(request, f"Job {obj.pk} created; it starts now.", messages.SUCCESS)
        return HttpResponseRedirect(reverse("inference:job-detail", args=[obj.pk]))

    # Each live cell is a span naming its job and field; admin_job_list.js rewrites them from
    # the progress API (/api/jobs/<id>/progress/) while the job is queued or running.
    @staticmethod
    def _live(job: InferenceJob, field: str, inner, *args):
        return format_html(
            '<span class="job-live" data-job="{}" data-field="{}">' + inner + "</span>", job.pk, field, *args
        )

    @admin.display(description="status", ordering="status")
    def live_status(self, job: InferenceJob):
        return format_html(
            '<span class="job-live" data-job="{}" data-field="status" data-status="{}" '
            'data-progress-url="{}">{}</span>',
            job.pk,
            job.status,
            reverse("api-job-progress", args=[job.pk]),
            job.status,
        )

    @admin.display(description="progress")
    def progress(self, job: InferenceJob):
        pct = selectors.job_percent(job)
        return self._live(
            job,
            "progress",
            '<progress value="{}" max="100"></progress> <span class="pct">{}%</span> (<span class="n">{}/{}</span>)',
            pct,
            pct,
            job.done_queries + job.failed_queries,
            job.total_queries,
        )

    @admin.display(description="rate")
    def rate(self, job: InferenceJob):
        rate, _ = selectors.job_rate_eta(job)
        return self._live(job, "rate", "{}", "–" if rate is None else f"{rate:.2f}/s")

    @admin.display(description="ETA")
    def eta(self, job: InferenceJob):
        _, eta = selectors.job_rate_eta(job)
        text = "–" if eta is None or job.status != JobStatus.RUNNING else f"{int(eta // 60)}m{int(eta % 60):02d}s"
        return self._live(job, "eta", "{}", text)

    @admin.display(description="failures")
    def failures(self, job: InferenceJob):
        """The failed-query count, linked to the job page's failure table; the most frequent
        errors (or the job's own error) in the tooltip and, for a failed job, in the cell. A job
        with JSON queries (a judge) also shows its unreadable replies, linked to their table:
        they are no failed queries, yet scored as missing."""
        title = job.error or (services.failure_summary(job) if job.failed_queries else "")
        page = reverse("inference:job-detail", args=[job.pk])
        unreadable = ""
        if selectors.job_json_queries(job):
            unreadable = format_html(
                '<br><a class="job-live" data-job="{}" data-field="unreadable" href="{}#job-unreadable" '
                'title="replies that stayed unreadable JSON after their repairs: scored as missing">{} unreadable</a>',
                job.pk,
                page,
                selectors.unreadable_count(job),
            )
        return format_html(
            '<a class="job-live" data-job="{}" data-field="failures" href="{}" title="{}">{}</a>{}{}',
            job.pk,
            page + "#job-failures",
            title,
            job.failed_queries,
            unreadable,
            format_html('<br><span class="errornote job-error">{}</span>', job.error[:200]) if job.error else "",
        )

    @admin.display(description="tokens (in / out)")
    def tokens(self, job: InferenceJob):
        return self._live(job, "tokens", "{} / {}", job.prompt_tokens, job.completion_tokens)

    @admin.display(description="cost")
    def cost(self, job: InferenceJob):
        cost = selectors.job_cost(job)
        return self._live(job, "cost", "{}", "–" if cost is None else f"${cost:.4f}")

    @admin.display(description="chunks")
    def chunks(self, job: InferenceJob):
        return run_status.job_chunks_line(job=job)

    @admin.display(description="workers")
    def workers(self, job: InferenceJob):
        return " ".join(q["message"] for q in run_status.job_queues(job=job)) or "–"

    @admin.display(description="page")
    def job_page(self, job: InferenceJob):
        return format_html('<a href="{}">live page</a>', reverse("inference:job-detail", args=[job.pk]))

    @admin.action(description="Cancel selected jobs")
    def cancel_jobs(self, request, queryset):
        n = sum(services.job_cancel(job=job, actor=request.user) for job in queryset)
        self.message_user(request, f"Cancelled {n} job(s).")

    @admin.action(description="Retry failed items of selected jobs (failed queries and unreadable judge replies)")
    def retry_failed(self, request, queryset):
        n = sum(services.job_retry_failed(job=job, actor=request.user) for job in queryset)
        self.message_user(request, f"Re-running {n} item(s).")

    @admin.action(description="Re-score selected jobs (re-parse answers, rewrite exports)")
    def rescore(self, request, queryset):
        n = sum(services.job_rescore(job=job) for job in queryset)
        self.message_user(request, f"Re-scored; {n} answer(s) changed.")


@admin.register(Prediction)
class PredictionAdmin(ProjectRecordAdmin):
    project_field = "job__project"
    list_display = ("id", "job", "item", "query", "status", "answer", "attempts", "latency_ms")
    list_filter = ("status",)
    list_select_related = ("job__project", "item__project")
    search_fields = ("item__external_id", "query")


@admin.register(BackgroundRun)
class BackgroundRunAdmin(admin.ModelAdmin):
    """Tracked background runs (job starts and chunks, exports, board warm-ups), for operators:
    read only; the watchdog and the workers change them."""

    list_display = (
        "id",
        "celery_task",
        "job",
        "chunk_index",
        "queue",
        "status",
        "attempts",
        "worker",
        "heartbeat_at",
        "reason",
    )
    list_filter = ("status", "queue", "celery_task")
    search_fields = ("celery_task", "worker", "reason")
    list_select_related = ("job",)

    def has_module_permission(self, request):
        return request.user.is_superuser

    def has_view_permission(self, request, obj=None):
        return request.user.is_superuser

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
