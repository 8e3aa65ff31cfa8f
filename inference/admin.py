"""Admin pages: inference jobs that start when a researcher saves them, their predictions, and the
background runs; the model endpoints have theirs in inference/admin_endpoints.py.

A non-superuser sees the jobs of the projects where they are researcher or admin (ProjectScopedAdmin)
and may start one there on a shared endpoint or one of the job's project; a launch the job services
would refuse (services.job_validate: another project's endpoint, a key variable not allowed, unset or
empty) is a form error and nothing is created. The predictions of those jobs are read only for
everyone (ProjectRecordAdmin): workers and imports write them, and a re-score re-parses them (the job
list's action)."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html

from annotation.admin_site import (
    ProjectRecordAdmin,
    ProjectScopedAdmin,
    ReadOnlyAdmin,
    SuperuserOnlyAdmin,
    researcher_project_ids,
)

# The endpoints' admin, registered when imported here: Django's autodiscovery imports only this module.
from . import (
    admin_endpoints,  # noqa: F401
    run_status,
    selectors,
    services,
)
from .models import BackgroundRun, CachedResponse, InferenceJob, JobMode, JobStatus, Prediction
from .services.jobs import endpoint_launch_refusal

# Said on the job form when no endpoint is offered (a format string: the endpoint add page's URL).
NO_ENDPOINT = (
    'No model endpoint is set up for your projects yet: <a href="{}">add one</a> (an OpenAI-compatible '
    "server, or the seeded random baseline to try the pipeline), then start the job here."
)


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
        endpoint = self.fields["endpoint"]
        endpoint.required = True
        endpoint.label_from_instance = lambda e: f"{e.name} ({e.project.slug})" if e.project_id else e.name
        add = reverse("admin:inference_modelendpoint_add")
        endpoint.help_text = format_html(
            'The shared endpoints and those of the job\'s project. <a href="{}" id="add-endpoint-link">Add an '
            "endpoint</a> for a project: an OpenAI-compatible server or the seeded random baseline.",
            add,
        )
        endpoint.error_messages["required"] = (
            "Pick the endpoint the job runs on." if endpoint.queryset.exists() else format_html(NO_ENDPOINT, add)
        )

    def clean(self):
        data = super().clean()
        project = data.get("project")
        if not project or not data.get("endpoint"):
            return data
        refusal = endpoint_launch_refusal(endpoint=data["endpoint"], project=project)
        if refusal:  # said beside the endpoint; nothing is created
            self.add_error("endpoint", refusal)
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
            projects = None if request.user.is_superuser else researcher_project_ids(request)
            kwargs["queryset"] = selectors.endpoints_usable(projects=projects).select_related("project")
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def add_view(self, request, form_url="", extra_context=None):
        if request.method == "GET":
            projects = None if request.user.is_superuser else researcher_project_ids(request)
            if not selectors.endpoints_usable(projects=projects).exists():
                add = reverse("admin:inference_modelendpoint_add")
                self.message_user(request, format_html(NO_ENDPOINT, add), messages.WARNING)
        return super().add_view(request, form_url, extra_context)

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
        # Its state is on the job's page: this runs before the job starts (on commit), and without a
        # worker (the demo) the job has ended by the time that page shows.
        self.message_user(request, f"Job {obj.pk} created.", messages.SUCCESS)
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


@admin.register(CachedResponse)
class CachedResponseAdmin(ReadOnlyAdmin, SuperuserOnlyAdmin, admin.ModelAdmin):
    """Answers kept for deterministic requests (inference/backends/response_cache.py), for
    operators: read only; the backends write them."""

    list_display = ("model", "request_hash", "hits", "created_at")
    search_fields = ("model", "request_hash")
