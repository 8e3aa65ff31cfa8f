"""Pages: project overview (every member), import upload and releases (researchers)."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from .models import ImportKind, ImportRun, ItemStatus, Project, Release, Role
from .permissions import get_project_for, has_role, role_in
from .releases import EXPORT_FORMATS, ReleaseRefused, release_freeze


# --- read helpers shared with api_io --------------------------------------------------------------


def project_overview_data(*, project: Project, user) -> dict:
    from .selectors import item_counts

    counts = item_counts(project=project)
    splits = dict(project.items.values_list("split").annotate(n=Count("id")).values_list("split", "n"))
    base = f"/projects/{project.slug}"
    links = {
        "annotate": f"{base}/annotate/",
        "review": f"{base}/review/",
        "agreement": f"{base}/agreement/",
        "leaderboard": f"{base}/leaderboard/",
        "correlation": f"{base}/correlation/",
    }
    if has_role(user, project, Role.RESEARCHER):
        links.update(releases=f"{base}/releases/", import_=f"{base}/import/")
    return {
        "slug": project.slug,
        "name": project.name,
        "protocol": project.protocol,
        "workflow": project.workflow,
        "annotations_per_item": project.annotations_per_item,
        "role": role_in(user, project),
        "status_counts": counts["status_counts"],  # gold items apart: they stay pending for good
        "gold_items": counts["gold_items"],
        "split_counts": dict(sorted(splits.items())),
        "total": sum(counts["status_counts"].values()) + counts["gold_items"],
        "releases": project.releases.count(),
        "links": links,
    }


def release_list_data(*, project: Project) -> list[dict]:
    return [
        {
            "version": r.version,
            "split": r.split,
            "item_count": r.item_count,
            "checksum": r.checksum,
            "created_at": r.created_at.isoformat(),
            "created_by": r.created_by.username if r.created_by else None,
        }
        for r in project.releases.select_related("created_by").order_by("-created_at")
    ]


# --- pages ----------------------------------------------------------------------------------------


@login_required
def project_overview(request, slug):
    project = get_project_for(request.user, slug, Role.ANNOTATOR)
    data = project_overview_data(project=project, user=request.user)
    rows = [(label, data["status_counts"][value]) for value, label in ItemStatus.choices]
    return render(request, "annotation/io/project.html", {"project": project, "data": data, "status_rows": rows})


@login_required
@require_http_methods(["GET", "POST"])
def project_import(request, slug):
    """The upload form and the project's recent imports. A POST queues the import for a worker
    and redirects to the run's page, which follows it until it is done."""
    from .importing.runs import import_run_queue

    project = get_project_for(request.user, slug, Role.RESEARCHER)
    context = {"project": project, "errors": None}
    status = 200
    if request.method == "POST":
        uploaded = request.FILES.get("file")
        kind = request.POST.get("kind", ImportKind.ITEMS)
        if uploaded is None:
            context["errors"], status = ["file: field file: choose a .jsonl, .json or .zip file"], 400
        elif kind not in ImportKind.values:
            context["errors"], status = [f"kind: field kind: one of {', '.join(ImportKind.values)}"], 400
        else:
            run = import_run_queue(project=project, user=request.user, uploaded=uploaded, kind=kind,
                                   verified=request.POST.get("verified") == "on")
            return redirect("io-import-run", slug=project.slug, run_id=run.pk)
    context["runs"] = ImportRun.objects.filter(project=project).select_related("created_by")[:20]
    return render(request, "annotation/io/import.html", context, status=status)


@login_required
def import_run_page(request, slug, run_id):
    from .importing.runs import import_run_data

    project = get_project_for(request.user, slug, Role.RESEARCHER)
    run = get_object_or_404(ImportRun.objects.select_related("project", "created_by"), pk=run_id, project=project)
    return render(request, "annotation/io/import_run.html", {"project": project, "run": run, "data": import_run_data(run)})


@login_required
@require_http_methods(["GET", "POST"])
def project_releases(request, slug):
    project = get_project_for(request.user, slug, Role.RESEARCHER)
    status = 200
    if request.method == "POST":
        try:
            release = release_freeze(
                project=project,
                version=request.POST.get("version", "").strip(),
                split=request.POST.get("split", "test").strip() or "test",
                user=request.user,
            )
        except ReleaseRefused as exc:
            messages.error(request, str(exc))
            status = 400
        else:
            messages.success(request, f"Release {release.version} frozen: {release.item_count} items, sha256 {release.checksum}.")
            return redirect("io-releases", slug=project.slug)
    splits = sorted(set(project.items.filter(status=ItemStatus.VERIFIED).values_list("split", flat=True).distinct()))
    return render(
        request,
        "annotation/io/releases.html",
        {"project": project, "releases": release_list_data(project=project), "splits": splits or ["test"], "formats": EXPORT_FORMATS},
        status=status,
    )


@login_required
def release_download(request, slug, version):
    from .api_io import streaming_export

    project = get_project_for(request.user, slug, Role.RESEARCHER)
    release = get_object_or_404(Release.objects.select_related("project"), project=project, version=version)
    fmt = request.GET.get("fmt", "json")
    if fmt not in EXPORT_FORMATS:
        fmt = "json"
    return streaming_export(release, fmt)
