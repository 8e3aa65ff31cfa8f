"""Read paths of the annotation app."""
from django.db.models import Count, QuerySet

from .models import Project
from .permissions import projects_visible_to, role_in


def project_list_for(*, user) -> list[dict]:
    projects: QuerySet[Project] = projects_visible_to(user).annotate(n_items=Count("items"))
    return [
        {
            "slug": p.slug,
            "name": p.name,
            "protocol": p.protocol,
            "workflow": p.workflow,
            "role": role_in(user, p),
            "items": p.n_items,
            "annotations_per_item": p.annotations_per_item,
        }
        for p in projects
    ]
