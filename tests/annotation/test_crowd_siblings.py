"""One person, two studies of one project: two crowd accounts (one per study, by design), one answer
per item (annotation/queue/sql.py SIBLINGS).

The same platform id joining two studies of a project gets an account in each. The queue never
hands one of them an item the other answered or holds (an active task, or an expired one its
submit could still store), so the same person cannot answer an item twice; everyone else is
served as before. Production settings (the 10-minute lease); time moves by passing `now`.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.models import Role, Task
from annotation.queue import TaskConflict, annotation_submit, queue_claim_next, tasks_expire_stale
from annotation.studies.setup import study_create
from tests.helpers.clients import session_client
from tests.helpers.studies import UNGATED_STUDY, joined_participant

from .work_factories import make_item, make_people, valid_result

pytestmark = pytest.mark.django_db
QA = valid_result("qa")


@pytest.fixture
def studies(make_user, make_project):
    """Project "twice" (3 items, 2 annotations each) with studies "Pilot" and "Main"; participant X
    joined both (two accounts), Y joined Main; and a staff annotator."""
    researcher = make_user("res")
    (annotator,) = make_people(1)
    project = make_project(
        "twice", "visualtrans", members={researcher: Role.RESEARCHER, annotator: Role.ANNOTATOR}, annotations_per_item=2
    )
    items = [make_item(project, f"w{n}") for n in range(3)]
    settings = {**UNGATED_STUDY, "tasks_per_participant": "3"}
    pilot = study_create(project=project, actor=researcher, **{**settings, "name": "Pilot"})
    main = study_create(project=project, actor=researcher, **{**settings, "name": "Main"})
    x_pilot, x_main = joined_participant(pilot, "X"), joined_participant(main, "X")
    y_main = joined_participant(main, "Y")
    assert len({x_pilot.pk, x_main.pk, y_main.pk}) == 3
    return project, items, x_pilot, x_main, y_main, annotator


def submit(task, user, now=None):
    return annotation_submit(task_id=task.pk, user=user, result=QA, now=now)


def test_an_item_one_account_answered_is_not_handed_to_the_same_persons_other_account(studies):
    project, items, x_pilot, x_main, y_main, _annotator = studies
    first = queue_claim_next(project=project, user=x_pilot)
    submit(first, x_pilot)
    # Depth first, the item with one annotation would come next for anyone: X's other account
    # gets another item, Y (another person, same study as X's other account) gets that one.
    other = queue_claim_next(project=project, user=x_main)
    assert other.item_id != first.item_id
    submit(other, x_main)
    assert queue_claim_next(project=project, user=y_main).item_id in {first.item_id, other.item_id}


def test_the_same_person_never_answers_an_item_twice_and_the_queue_still_ends(studies):
    project, items, x_pilot, x_main, y_main, annotator = studies
    answered: dict[int, set[int]] = {}
    for user in (x_pilot, x_main, x_pilot, x_main, x_pilot, x_main):
        task = queue_claim_next(project=project, user=user)
        if task is not None:
            submit(task, user)
            answered.setdefault(task.item_id, set()).add(user.pk)
    # Three items, X answers each once through one account or the other, then hears "nothing left".
    assert sorted(answered) == sorted(i.pk for i in items)
    assert all(len(accounts) == 1 for accounts in answered.values())
    assert queue_claim_next(project=project, user=x_main) is None
    assert queue_claim_next(project=project, user=x_pilot) is None
    # Everyone else still gets every item's second annotation.
    for user in (y_main, annotator, annotator):
        submit(queue_claim_next(project=project, user=user), user)
    assert {i.annotation_count for i in type(items[0]).objects.filter(pk__in=[i.pk for i in items])} == {2}


def test_an_item_the_other_account_holds_is_not_handed_out_even_after_its_lease(studies):
    project, items, x_pilot, x_main, y_main, _annotator = studies
    now = timezone.now()
    held = queue_claim_next(project=project, user=x_pilot, now=now)
    later = now + timedelta(hours=1)  # the lease ran out: still active until someone reclaims it
    mine = queue_claim_next(project=project, user=x_main, now=later)
    assert mine.item_id != held.item_id
    # Expired by the sweep: X's first account could still submit it while nobody holds the item.
    assert tasks_expire_stale(now=later) == 1
    assert Task.objects.get(pk=held.pk).status == "expired"
    submit(mine, x_main, now=later)
    again = queue_claim_next(project=project, user=x_main, now=later)
    assert again.item_id not in {held.item_id, mine.item_id}
    # Someone else gets it (after the item one annotation short, depth first); X's expired task
    # there is then refused, as any expired task whose item another annotator holds.
    submit(queue_claim_next(project=project, user=y_main, now=later), y_main, now=later)
    taken = queue_claim_next(project=project, user=y_main, now=later)
    assert taken.item_id == held.item_id
    with pytest.raises(TaskConflict, match="another annotator took the item"):
        submit(held, x_pilot, now=later)


def test_the_study_page_api_skips_the_other_accounts_items(studies):
    project, items, x_pilot, x_main, _y_main, _annotator = studies
    for _ in range(3):
        submit(queue_claim_next(project=project, user=x_pilot), x_pilot)
    # Every item has X's answer from the Pilot account: the Main account hears "nothing left" (204).
    r = session_client(x_main).post("/api/projects/twice/tasks/next/", {}, format="json")
    assert r.status_code == 204, r.content


def test_a_gold_item_the_other_account_holds_is_not_taken_over_for_the_same_person(make_user, make_project):
    import random

    researcher = make_user("res")
    project = make_project(
        "golden",
        "visualtrans",
        members={researcher: Role.RESEARCHER},
        annotations_per_item=1,
        settings={"gold_share": 1.0},
    )
    gold = make_item(project, "gold", is_gold=True)
    make_item(project, "plain")
    pilot = study_create(project=project, actor=researcher, **{**UNGATED_STUDY, "name": "Pilot"})
    main = study_create(project=project, actor=researcher, **{**UNGATED_STUDY, "name": "Main"})
    x_pilot, x_main, y_main = (
        joined_participant(pilot, "X"),
        joined_participant(main, "X"),
        joined_participant(main, "Y"),
    )
    always = random.Random()
    always.random = lambda: 0.0  # every draw asks for gold
    assert queue_claim_next(project=project, user=x_pilot, rng=always).item_id == gold.pk
    # The gold item is held: anyone else takes it over (gold.py), X's other account does not.
    assert queue_claim_next(project=project, user=x_main, rng=always).item_id != gold.pk
    assert queue_claim_next(project=project, user=y_main, rng=always).item_id == gold.pk
