"""Import pages (researchers): the upload form with recent imports, and one run followed until done."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from ..importing.conversion import format_choices, format_refusal
from ..importing.runs import import_run_data, import_run_queue
from ..models import ImportKind, ImportRun, Role
from ..permissions import get_project_for


@login_required
@require_http_methods(["GET", "POST"])
def project_import(request, slug):
    """The upload form and the project's recent imports. A POST queues the import for a worker
    and redirects to the run's page, which follows it until it is done."""
    project = get_project_for(request.user, slug, Role.RESEARCHER)
    context = {"project": project, "errors": None, "formats": format_choices(project.protocol)}
    status = 200
    if request.method == "POST":
        uploaded = request.FILES.get("file")
        kind = request.POST.get("kind", ImportKind.ITEMS)
        fmt = request.POST.get("format") or None
        if uploaded is None:
            context["errors"], status = ["file: field file: choose a .jsonl, .json or .zip file"], 400
        elif kind not in ImportKind.values:
            context["errors"], status = [f"kind: field kind: one of {', '.join(ImportKind.values)}"], 400
        elif kind == ImportKind.ITEMS and fmt is not None and (reason := format_refusal(project.protocol, fmt)):
            context["errors"], status = [f"format: field format: {reason}"], 400
        else:
            run = import_run_queue(
                project=project,
                user=request.user,
                uploaded=uploaded,
                kind=kind,
                verified=request.POST.get("verified") == "on",
                format_name=fmt if kind == ImportKind.ITEMS else None,
                strict=request.POST.get("strict") == "on",
                update=request.POST.get("update") == "on",
            )
            return redirect("io-import-run", slug=project.slug, run_id=run.pk)
    context["runs"] = ImportRun.objects.filter(project=project).select_related("created_by")[:20]
    return render(request, "annotation/io/import.html", context, status=status)


@login_required
def import_run_page(request, slug, run_id):
    project = get_project_for(request.user, slug, Role.RESEARCHER)
    run = get_object_or_404(ImportRun.objects.select_related("project", "created_by"), pk=run_id, project=project)
    return render(
        request, "annotation/io/import_run.html", {"project": project, "run": run, "data": import_run_data(run)}
    )
