"""auto_verify never settles an item the project's own thresholds mark as a disagreement."""

from __future__ import annotations

import pytest

from annotation.models import Item, ItemStatus, Review, Role
from annotation.queue import annotation_submit, queue_claim_next
from tests.annotation.work_factories import make_items_fast, make_people, valid_result

pytestmark = pytest.mark.django_db

RATING = valid_result("rating")["scores"]


def rate(project, raters, realisms) -> int:
    (item_id,) = make_items_fast(project, 1)
    for rater, realism in zip(raters, realisms):
        task = queue_claim_next(project=project, user=rater)
        annotation_submit(task_id=task.pk, user=rater, result={"scores": {**RATING, "realism": realism}})
    return item_id


@pytest.mark.parametrize(
    "spread, realisms, verified",
    [
        (None, (2, 3), True),  # default threshold 2: one point apart is agreement, auto-verified
        (1, (2, 3), False),  # the project asks for a review at one point: marked, left for a reviewer
        (1, (3, 3), True),
    ],
)
def test_auto_verify_respects_the_projects_disagreement_thresholds(make_project, spread, realisms, verified):
    a, b = make_people(2)
    settings = {"auto_verify": True, **({"disagreement": {"rating_spread": spread}} if spread else {})}
    project = make_project(
        "rated", "oscbench", annotations_per_item=2, settings=settings, members={a: Role.ANNOTATOR, b: Role.ANNOTATOR}
    )
    item = Item.objects.get(pk=rate(project, (a, b), realisms))
    assert item.status == (ItemStatus.VERIFIED if verified else ItemStatus.ANNOTATED)
    assert (item.disagreement is None) == verified
    assert Review.objects.filter(item=item, decision="auto").exists() == verified
