"""The admin site as a person uses it: a change page's address, its form posted unchanged, the
project form posted with typed settings, and which models are read-only records."""

from __future__ import annotations

import json

from django import forms

# A project's records: read only in the admin for everyone, superusers included (no add, save or
# delete); the rows come from the services behind the pages.
RECORDS = {
    "annotation.projectinvite",
    "annotation.auditevent",
    "annotation.task",
    "annotation.annotationrevision",
    "annotation.suggestion",
    "annotation.releaseitem",
    "annotation.projectasset",
    "annotation.study",
    "annotation.studyparticipant",
    "annotation.excludedannotation",
    "annotation.itemreopening",
    "inference.prediction",
    "annotation.crowdaccount",
    "inference.cachedresponse",
}


def admin_url(obj, page: str = "change") -> str:
    return f"/admin/{obj._meta.app_label}/{obj._meta.model_name}/{obj.pk}/{page}/"


def admin_form_data(client, obj) -> dict:
    """The change form's fields as the page would post them unchanged."""
    form = client.get(admin_url(obj)).context["adminform"].form
    data = {}
    for name, field in form.fields.items():
        value = form[name].value()
        if isinstance(field, forms.BooleanField):
            if value:
                data[name] = "on"
        elif not isinstance(field, forms.FileField) and value is not None:
            data[name] = value
    return data


def admin_save(client, project, typed):
    """The project's change form posted as the page posts it, `typed` as its settings (a str: as typed)."""
    data = {
        "slug": project.slug,
        "name": project.name,
        "protocol": project.protocol,
        "annotations_per_item": project.annotations_per_item,
        "option_seed": project.option_seed,
        "description": project.description,
        "settings": typed if isinstance(typed, str) else json.dumps(typed),
        "memberships-TOTAL_FORMS": "0",
        "memberships-INITIAL_FORMS": "0",
        "memberships-MIN_NUM_FORMS": "0",
        "memberships-MAX_NUM_FORMS": "1000",
    }
    return client.post(f"/admin/annotation/project/{project.pk}/change/", data)
