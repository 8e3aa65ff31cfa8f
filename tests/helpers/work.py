"""Annotation work as the tests drive it: a rating result, people taking turns at the queue, an
annotator's next task and submit over HTTP, and the fields the disagreement check marked."""

from __future__ import annotations

from django.test import Client

from annotation.models import Item
from annotation.queue import annotation_submit, queue_claim_next
from tests.annotation.work_factories import valid_result

RATING_SCORES = valid_result("rating")["scores"]  # realism 2, scene N/A


def rating_result(**changes) -> dict:
    """A valid rating with the given criteria changed."""
    return {"scores": {**RATING_SCORES, **changes}}


def annotate_in_turn(project, people, results) -> None:
    """Each person claims their next task and submits their result."""
    for person, result in zip(people, results):
        task = queue_claim_next(project=project, user=person)
        annotation_submit(task_id=task.pk, user=person, result=result)


def marked_fields(*items) -> list:
    """Per item, the fields its stored disagreement names."""
    return [[f["field"] for f in (Item.objects.get(pk=i.pk).disagreement or {}).get("fields", [])] for i in items]


def next_task(client: Client, slug: str = "crowd") -> dict:
    r = client.post(f"/api/projects/{slug}/tasks/next/", {}, content_type="application/json")
    assert r.status_code == 200, r.content
    return r.json()


def submit_task(client: Client, task: dict, result: dict) -> int:
    """Submit `result` for the task `next_task` returned, 20 s spent; the annotation's id."""
    r = client.post(
        f"/api/tasks/{task['task']}/submit/",
        {"result": result, "time_spent_ms": 20_000},
        content_type="application/json",
    )
    assert r.status_code == 201, r.content
    return r.json()["id"]
