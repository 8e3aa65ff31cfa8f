"""The annotator's amend page: the workflow's own annotate page in "amend" mode, filled with their
earlier answer (static/js/workbench/amend.js loads and saves it through annotation/apis/amend.py).
Only the annotator's own annotation, only while its item is not reviewed."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from ..amend import OPEN_STATUSES
from ..models import Annotation, Role
from ..permissions import get_project_for
from .work import WORKFLOW_PAGES, _context


@login_required
@require_GET
def amend(request, slug: str, annotation_id: int):
    project = get_project_for(request.user, slug, Role.ANNOTATOR)
    annotation = (
        Annotation.objects.filter(pk=annotation_id, annotator=request.user, item__project=project)
        .select_related("item")
        .first()
    )
    if annotation is None:
        raise Http404("No such annotation of yours.")
    if annotation.item.status not in OPEN_STATUSES or annotation.item.reviews.exists():
        messages.error(request, "That item was reviewed already, so your answer can no longer be changed.")
        return redirect(f"/projects/{project.slug}/#my-work")
    template, script, label = WORKFLOW_PAGES[project.workflow]
    return render(
        request,
        template,
        _context(
            request, project, "annotate", workflow_script=script, workflow_label=f"Amend: {label}", amend=annotation
        ),
    )
