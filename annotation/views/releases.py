"""Releases page (researchers): freeze a verified split, list releases, download an export."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from ..interchange.authors import AuthorsExportError, authors_download_response, authors_export_formats
from ..models import ItemStatus, Release, Role
from ..permissions import get_project_for
from ..releases import ReleaseRefused, export_formats, release_download_response, release_freeze, release_list_data


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
            messages.success(
                request, f"Release {release.version} frozen: {release.item_count} items, sha256 {release.checksum}."
            )
            return redirect("io-releases", slug=project.slug)
    splits = sorted(set(project.items.filter(status=ItemStatus.VERIFIED).values_list("split", flat=True).distinct()))
    return render(
        request,
        "annotation/io/releases.html",
        {
            "project": project,
            "releases": release_list_data(project=project),
            "splits": splits or ["test"],
            "formats": export_formats(project.protocol),
            # The paper's own shape, where the protocol writes it (a zip of the authors' files).
            "authors_formats": [f.name for f in authors_export_formats(project.protocol)],
        },
        status=status,
    )


@login_required
def release_download(request, slug, version):
    project = get_project_for(request.user, slug, Role.RESEARCHER)
    release = get_object_or_404(Release.objects.select_related("project"), project=project, version=version)
    fmt = request.GET.get("fmt", "json")
    if fmt in {f.name for f in authors_export_formats(release.project.protocol)}:
        try:
            return authors_download_response(release, fmt, actor=request.user)
        except AuthorsExportError as exc:
            messages.error(request, str(exc))
            return redirect("io-releases", slug=project.slug)
    if fmt not in export_formats(release.project.protocol):
        fmt = "json"
    return release_download_response(release, fmt, actor=request.user)
