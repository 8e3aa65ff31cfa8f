"""A project's cap of answers per annotator (the ``annotator_cap`` setting, every protocol):
after N answers (live tasks counting as answers on their way) the annotator gets no new task, the
claim says why (a 204 with StateLab-Queue-Done), and two claims racing past the cap on the real
PostgreSQL never take one task too many (the count is read under the user's claim lock)."""

from __future__ import annotations

import pytest

from annotation.models import Annotation, Role, Task, TaskStatus
from annotation.project_setup import project_settings_check
from annotation.queue import queue_claim_next, quota
from tests.annotation.db_race import race
from tests.annotation.work_factories import make_items_fast, make_people
from tests.helpers.clients import session_client


@pytest.mark.django_db
def test_no_new_task_after_the_cap_and_the_claim_says_why(make_project):
    (annotator,) = make_people(1)
    project = make_project(
        "capped", "status", annotations_per_item=1, members={annotator: Role.ANNOTATOR}, settings={"annotator_cap": 2}
    )
    make_items_fast(project, 5)
    client = session_client(annotator)
    for _ in range(2):
        r = client.post("/api/projects/capped/tasks/next/", {}, format="json")
        assert r.status_code == 200, r.content
        task = Task.objects.get(pk=r.json()["task"])
        Annotation.objects.create(item=task.item, annotator=annotator, task=task, result={}, source="task")
        Task.objects.filter(pk=task.pk).update(status=TaskStatus.SUBMITTED)
    r = client.post("/api/projects/capped/tasks/next/", {}, format="json")
    assert r.status_code == 204
    assert r.headers["StateLab-Queue-Done"] == "You reached this project's cap of 2 answers."
    assert Task.objects.filter(annotator=annotator).count() == 2
    # Someone else still gets items; without the cap the same annotator would too.
    (other,) = make_people(1, prefix="other")
    project.memberships.create(user=other, role=Role.ANNOTATOR)
    assert queue_claim_next(project=project, user=other) is not None
    project.settings = {}
    project.save(update_fields=["settings"])
    r = client.post("/api/projects/capped/tasks/next/", {}, format="json")
    assert r.status_code == 200 and "StateLab-Queue-Done" not in r.headers


@pytest.mark.django_db
def test_a_live_task_counts_and_is_still_handed_back(make_project):
    (annotator,) = make_people(1)
    project = make_project(
        "held", "status", annotations_per_item=1, members={annotator: Role.ANNOTATOR}, settings={"annotator_cap": 1}
    )
    make_items_fast(project, 3)
    first = queue_claim_next(project=project, user=annotator)
    assert first is not None
    # A reload gets the live task back; a page that shows it gets nothing new.
    assert queue_claim_next(project=project, user=annotator).pk == first.pk
    assert queue_claim_next(project=project, user=annotator, exclude=(first.pk,)) is None
    assert quota.cap_left(project=project, user=annotator, cap=1) == 0


def test_the_setting_is_checked_by_its_key():
    assert project_settings_check(protocol="arena", settings={"annotator_cap": "40"}) == ({"annotator_cap": 40}, {})
    for bad in (0, -3, 2.5, "many", True):
        _clean, errors = project_settings_check(protocol="status", settings={"annotator_cap": bad})
        assert errors == {"annotator_cap": "A whole number from 1 to 1000000."}


@pytest.mark.django_db(transaction=True)
def test_two_claims_racing_past_the_cap_take_one_task(make_project, monkeypatch):
    """The annotator holds one task (the page shows it) and may take one more: two claims (two
    tabs preloading) run at once, the first stopped after it read the count, its transaction open.
    The second waits for the user's claim lock and then sees the cap reached."""
    (annotator,) = make_people(1)
    project = make_project(
        "race", "status", annotations_per_item=1, members={annotator: Role.ANNOTATOR}, settings={"annotator_cap": 2}
    )
    make_items_fast(project, 4)
    shown = queue_claim_next(project=project, user=annotator)
    from annotation.queue import claim as claim_module

    how, first, second = race(
        monkeypatch,
        stop_in=claim_module,
        at="lease_until",  # called right after the cap check, before the new task is written
        first=lambda: queue_claim_next(project=project, user=annotator, exclude=(shown.pk,)),
        second=lambda: queue_claim_next(project=project, user=annotator, exclude=(shown.pk,)),
    )
    assert (first.error, second.error) == (None, None)
    assert how == "blocked"
    assert first.result is not None and first.result.pk != shown.pk
    # The second claim found the cap reached: it gets the live task the page does not show (the
    # first's), never a third one.
    assert second.result is not None and second.result.pk == first.result.pk
    assert Task.objects.filter(annotator=annotator).count() == 2
    assert quota.cap_left(project=project, user=annotator, cap=2) == 0


@pytest.mark.django_db(transaction=True)
def test_two_claims_racing_past_a_crowd_participants_quota_take_one_task(make_project, make_user, monkeypatch):
    """A study gives each participant 2 tasks; the participant holds one and two claims (two tabs
    preloading) run at once. The second read the study's quota before waiting for the user's claim
    lock, so it reads it again under the lock and finds the quota taken: never a third task."""
    from annotation.queue import claim as claim_module
    from annotation.studies.setup import study_create
    from tests.helpers.studies import UNGATED_STUDY, joined_participant

    researcher = make_user("res")
    project = make_project("crowd", "status", annotations_per_item=1, members={researcher: Role.RESEARCHER})
    make_items_fast(project, 5)
    study = study_create(project=project, actor=researcher, **UNGATED_STUDY)  # 2 tasks each
    participant = joined_participant(study, "P1")
    shown = queue_claim_next(project=project, user=participant)

    how, first, second = race(
        monkeypatch,
        stop_in=claim_module,
        at="lease_until",  # called once the claim may go on, before the new task is written
        first=lambda: queue_claim_next(project=project, user=participant, exclude=(shown.pk,)),
        # The second tab leaves out the task the first is about to take too (task ids are a
        # sequence: a client can guess the next), so handing back a live task is no way out.
        second=lambda: queue_claim_next(project=project, user=participant, exclude=(shown.pk, shown.pk + 1)),
    )
    assert (first.error, second.error) == (None, None)
    assert how == "blocked"
    assert first.result is not None and first.result.pk == shown.pk + 1
    assert second.result is None
    assert Task.objects.filter(annotator=participant).count() == 2
