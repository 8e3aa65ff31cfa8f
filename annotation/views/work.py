"""Server-rendered shells of the annotator, reviewer and progress pages.

The pages carry no item data: their ES modules load everything through the same JSON API that
external front ends use (annotation/apis/work.py), so what an annotator's browser can see is
exactly what that API gives an annotator — never ground truth or metadata. One exception, on a
reviewer's page only: the review page lists the fields an import kept that the protocol does not
know (selectors.item_kept_fields), which its module does not show.
"""

from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from ..models import Item, Role, Workflow
from ..permissions import get_project_for, has_role
from ..protocols import custom_workflow
from ..selectors import item_kept_fields, workflow_form
from ..studies.table import finish_url_for


class _WorkflowPages(dict):
    """Workflow -> (template, ES module, title) of its annotate page; a protocol's own form brings
    its own (annotation/protocols.py, "A workflow of its own")."""

    def __missing__(self, workflow: str) -> tuple[str, str, str]:
        custom = custom_workflow(workflow)
        if custom is None:
            raise KeyError(workflow)
        return custom.TEMPLATE, custom.SCRIPT, custom.LABEL


WORKFLOW_PAGES = _WorkflowPages(
    {
        Workflow.QUINTUPLET: ("annotation/work/quintuplet.html", "js/quintuplet.js", "Quintuplet labeling"),
        Workflow.BOX: ("annotation/work/box.html", "js/box.js", "Box and state"),
        Workflow.QA: ("annotation/work/qa.html", "js/qa.js", "Blind QA verification"),
        Workflow.RATING: ("annotation/work/rating.html", "js/rating.js", "Video rating"),
    }
)


def _context(request, project, page: str, **extra) -> dict:
    return {
        "project": project,
        "page": page,
        "can_review": has_role(request.user, project, Role.REVIEWER),
        # The workflow form's protocol facts (media fields, criteria), read by the page's module.
        "form": workflow_form(project=project),
        **extra,
    }


@login_required
@require_GET
def annotate(request, slug: str):
    project = get_project_for(request.user, slug, Role.ANNOTATOR)
    template, script, label = WORKFLOW_PAGES[project.workflow]
    return render(
        request,
        template,
        _context(
            request,
            project,
            "annotate",
            workflow_script=script,
            workflow_label=label,
            finish_url=finish_url_for(project=project, user=request.user),
        ),
    )


@login_required
@require_GET
def review_list(request, slug: str):
    project = get_project_for(request.user, slug, Role.REVIEWER)
    return render(request, "annotation/work/review_list.html", _context(request, project, "review"))


@login_required
@require_GET
def review_detail(request, slug: str, item_id: int):
    project = get_project_for(request.user, slug, Role.REVIEWER)
    get_object_or_404(Item.objects.only("pk"), pk=item_id, project=project)
    # The fields an import kept that the protocol does not know: a reviewer sees them, an annotator never.
    kept = item_kept_fields(project=project, item_id=item_id)
    return render(
        request,
        "annotation/work/review_detail.html",
        _context(request, project, "review", item_id=item_id, kept_fields=kept),
    )


@login_required
@require_GET
def agreement(request, slug: str):
    project = get_project_for(request.user, slug, Role.REVIEWER)
    return render(request, "annotation/work/agreement.html", _context(request, project, "agreement"))
