"""The project overview (counts per status and split, the user's role, the pages they may open),
read by the project page and its API."""

from __future__ import annotations

from django.db.models import Count

from protocols import registry

from .models import Project, Role
from .permissions import has_role, role_in
from .selectors_agreement import item_counts


def project_overview_data(*, project: Project, user) -> dict:
    counts = item_counts(project=project)
    splits = dict(project.items.values_list("split").annotate(n=Count("id")).values_list("split", "n"))
    base = f"/projects/{project.slug}"
    # Only the pages this user's role (and the project's protocol) can open: no link answers 403/404.
    links = {"annotate": f"{base}/annotate/"}
    if has_role(user, project, Role.REVIEWER):
        links.update(review=f"{base}/review/", agreement=f"{base}/agreement/")
    if has_role(user, project, Role.RESEARCHER):
        links["leaderboard"] = f"{base}/leaderboard/"
        if registry.get(project.protocol).board == "generators":  # human–judge correlation: ratings only
            links["correlation"] = f"{base}/correlation/"
    if has_role(user, project, Role.RESEARCHER):
        links.update(
            releases=f"{base}/releases/", import_=f"{base}/import/", audit=f"{base}/audit/", members=f"{base}/members/"
        )
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
