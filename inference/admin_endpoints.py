"""The model endpoints' admin page: operators' shared endpoints and the projects' own.

A superuser (an operator) sets up any endpoint: a shared one (no project), offered to every
project, or one of a project. A project's researchers and admins set up endpoints of their projects
(models.ModelEndpoint) and see the shared ones, read only: a shared endpoint serves every project, so
changing its URL or model would change other projects' jobs. What a researcher may set up is
narrower than an operator's: an OpenAI-compatible server or the seeded random baseline (the vLLM
engine runs on the operators' GPUs and loads whatever model, and model code, it is given), and a key
variable only toward the server a shared endpoint sends it to (ModelEndpoint.key_refusal). An
endpoint's project is chosen once, when it is added: its jobs stay the project's jobs.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db.models import Q

from annotation.admin_site import may_use_admin, researcher_project_ids
from annotation.models import Project
from config.workers import queue_status

from . import selectors, services
from .backends import BackendUnavailable, check_available
from .models import Backend, ModelEndpoint

# The backends a project's researchers may set up (the vLLM engine is the operators').
RESEARCHER_BACKENDS = (Backend.OPENAI, Backend.RANDOM)


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
    list_display = ("name", "whose", "backend", "model_id", "revision", "concurrency", "workers", "web_check")
    list_filter = ("backend",)
    list_select_related = ("project",)
    search_fields = ("name", "model_id")

    def get_fieldsets(self, request, obj=None):
        return (
            (
                None,
                {
                    "fields": ("name", "project", "backend", "model_id", "revision"),
                    "description": (
                        "Shared endpoints (no project) are offered to every project; a project's own, to its jobs only."
                        if request.user.is_superuser
                        else "The endpoint belongs to one of your projects and is offered to its jobs only. "
                        "Backends: an OpenAI-compatible server (OpenAI, vllm serve, others) or the seeded random "
                        "baseline."
                    ),
                },
            ),
            (
                "API",
                {
                    "fields": ("base_url", "api_key_env", "concurrency"),
                    "description": "The API key is read from the environment variable named here; it is never "
                    "stored. A project's endpoint may name one only with the base URL of a shared endpoint that "
                    "uses the same variable; a server that needs no key takes none.",
                },
            ),
            (
                "Backend settings",
                {
                    "fields": ("options",),
                    "description": (
                        "JSON. vllm: tensor_parallel_size, max_model_len, dtype, limit_mm_per_prompt, "
                        "mm_processor_kwargs, generation_config. openai: timeout, max_retries, json_schema, "
                        "logprobs, structured_choice, response_cache. random: seed."
                    ),
                },
            ),
            (
                "Prices",
                {
                    "fields": ("price_per_1m_input", "price_per_1m_output"),
                    "description": "What the provider charges, in USD per million tokens, for the job page's cost "
                    "and cost per correct answer. Empty: no cost is shown. Answers served from the response "
                    "cache use no tokens and cost nothing.",
                },
            ),
        )

    def get_readonly_fields(self, request, obj=None):
        return ("project",) if obj is not None else ()

    def get_queryset(self, request):
        qs = super().get_queryset(request)
        if request.user.is_superuser:
            return qs
        shared = selectors.endpoints_usable(projects=())  # a refused shared endpoint could only fail
        return qs.filter(Q(project__in=researcher_project_ids(request)) | Q(pk__in=shared.values("pk")))

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "project" and not request.user.is_superuser:
            kwargs["queryset"] = Project.objects.filter(pk__in=researcher_project_ids(request))
            kwargs["required"] = True
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def formfield_for_choice_field(self, db_field, request, **kwargs):
        if db_field.name == "backend" and not request.user.is_superuser:
            kwargs["choices"] = [(value, label) for value, label in Backend.choices if value in RESEARCHER_BACKENDS]
        return super().formfield_for_choice_field(db_field, request, **kwargs)

    def _mine(self, request, obj) -> bool:
        """Whether a non-superuser may set up, change or delete `obj` (some endpoint when None): one
        of their projects' endpoints, on a backend they may set up."""
        projects = researcher_project_ids(request)
        if obj is None:
            return bool(projects)
        return obj.project_id in projects and obj.backend in RESEARCHER_BACKENDS

    def has_module_permission(self, request):
        return request.user.is_superuser or may_use_admin(request.user)

    def has_view_permission(self, request, obj=None):
        return request.user.is_superuser or may_use_admin(request.user)

    def has_add_permission(self, request):
        return request.user.is_superuser or self._mine(request, None)

    def has_change_permission(self, request, obj=None):
        return request.user.is_superuser or self._mine(request, obj)

    def has_delete_permission(self, request, obj=None):
        return request.user.is_superuser or self._mine(request, obj)

    @admin.display(description="for", ordering="project__slug")
    def whose(self, obj: ModelEndpoint) -> str:
        return obj.project.slug if obj.project_id else "every project"

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
