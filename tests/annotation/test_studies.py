"""Crowd-rater studies (annotation/studies/, queue/quota.py): opening a study, participants joining
through the public link with their platform id (password-less, the same id resumes), the task
quota in the claim path, the completion code, abandoned holds returning, gold flags, approve /
reject (annotations out of the analysis, items back to the queue), the CSV and the role checks.
Production settings throughout (django-axes, password validators, the 10-minute lease)."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from annotation.models import (
    Annotation,
    AuditEvent,
    CrowdAccount,
    ExcludedAnnotation,
    Item,
    ItemStatus,
    Membership,
    Role,
    Study,
    StudyParticipant,
    Task,
    TaskStatus,
)
from annotation.project_setup import SetupInvalid
from annotation.queue import queue_claim_next
from annotation.selectors_agreement import project_agreement
from annotation.studies.participants import participant_reject
from annotation.studies.setup import study_create
from annotation.studies.table import participant_rows
from tests.helpers.studies import (
    GOLD_GATED_STUDY,
    SESSION_ID,
    STUDY_ID,
    do_tasks,
    open_study_link,
    participant_user,
    pid,
)

from .work_factories import make_item, valid_result

pytestmark = pytest.mark.django_db
User = get_user_model()
WRONG = {"answer": "A", "flags": []}  # the visualtrans factory's gold answer is "C"


@pytest.fixture
def setup(make_user, make_project):
    researcher = make_user("res")
    project = make_project(
        "crowd",
        "visualtrans",
        members={researcher: Role.RESEARCHER},
        annotations_per_item=1,
        settings={"gold_share": 1.0},
    )
    gold = make_item(project, "gold", is_gold=True)
    items = [make_item(project, f"i{n}") for n in range(4)]
    study = study_create(project=project, actor=researcher, **GOLD_GATED_STUDY)
    return project, study, researcher, gold, items


# --- opening a study ----------------------------------------------------------------------------


def test_study_create_refuses_bad_fields_and_writes_nothing(setup):
    project, _study, researcher, *_ = setup
    with pytest.raises(SetupInvalid) as exc:
        study_create(
            project=project,
            actor=researcher,
            **{
                **GOLD_GATED_STUDY,
                "max_participants": "0",
                "completion_code": "a b",
                "return_url": "javascript:alert(1)",
                "gold_pass_threshold": "2",
            },
        )
    assert set(exc.value.errors) == {"max_participants", "completion_code", "return_url", "gold_pass_threshold"}
    assert Study.objects.count() == 1


def test_study_create_makes_an_unguessable_link_and_an_audit_event(setup):
    project, study, researcher, *_ = setup
    assert len(study.token) >= 40 and study.is_open and study.tasks_per_participant == 2
    event = AuditEvent.objects.get(action="study_open")
    assert (event.actor, event.project, event.object_id) == (researcher, project, str(study.pk))


# --- joining ------------------------------------------------------------------------------------


def test_prolific_params_give_a_password_less_annotator_session(setup):
    project, study, *_ = setup
    client, response = open_study_link(study, "5f1a2b3c4d5e6f7a8b9c0d1e")
    assert response.status_code == 302 and response["Location"] == "/projects/crowd/annotate/"
    user = participant_user("5f1a2b3c4d5e6f7a8b9c0d1e")
    assert user.username == "prolific-5f1a2b3c4d5e6f7a8b9c0d1e" and not user.has_usable_password()
    assert Membership.objects.get(project=project, user=user).role == Role.ANNOTATOR
    participant = StudyParticipant.objects.get(study=study)
    assert (participant.user, participant.platform_study_id, participant.platform_session_id) == (
        user,
        STUDY_ID,
        SESSION_ID,
    )
    page = client.get("/projects/crowd/annotate/")  # the session is the participant's
    assert page.status_code == 200 and page.context["user"] == user
    assert f'data-finish-url="/study/{study.token}/done/"' in page.content.decode()


def test_the_same_id_resumes_the_same_account_in_another_browser(setup):
    _project, study, *_ = setup
    first, _ = open_study_link(study, "PID1")
    second, response = open_study_link(study, "PID1", SESSION_ID=pid("y"))
    assert response.status_code == 302
    assert User.objects.filter(username__startswith="prolific-").count() == 1
    participant = StudyParticipant.objects.get(study=study)
    assert participant.platform_session_id == pid("y")
    assert (
        first.get("/api/me/").json()["username"]
        == second.get("/api/me/").json()["username"]
        == (f"prolific-{pid('PID1')}")
    )


def test_a_person_with_the_derived_username_is_never_signed_in(setup, make_user):
    _project, study, *_ = setup
    person = make_user(f"prolific-{pid('PID9')}")
    client, _ = open_study_link(study, "PID9")
    crowd = participant_user("PID9")
    assert crowd != person and crowd.username.startswith(f"prolific-{pid('PID9')}-")
    assert client.get("/api/me/").json()["username"] == crowd.username


def test_a_signed_in_researcher_keeps_their_session(setup):
    _project, study, researcher, *_ = setup
    client = Client()
    client.force_login(researcher)
    _, response = open_study_link(study, "PID2", client=client)
    assert response.status_code == 200 and response.context["state"] == "signed-in"
    assert not StudyParticipant.objects.exists() and client.get("/api/me/").json()["username"] == "res"


def test_bad_or_missing_ids_and_unknown_links(setup):
    _project, study, *_ = setup
    assert Client().get(f"/study/{study.token}/", {"PROLIFIC_PID": "<script>"}).status_code == 400
    assert Client().get(f"/study/{study.token}/").context["state"] == "no-id"
    assert Client().get("/study/nope/", {"PROLIFIC_PID": "A1"}).status_code == 404
    assert not CrowdAccount.objects.exists()


def test_mturk_ids_and_preview(setup):
    project, _study, researcher, *_ = setup
    study = study_create(project=project, actor=researcher, **{**GOLD_GATED_STUDY, "platform": "mturk"})
    preview = Client().get(f"/study/{study.token}/", {"assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE", "hitId": "H"})
    assert preview.context["state"] == "preview"
    response = Client().get(f"/study/{study.token}/", {"workerId": "A1B2C3", "assignmentId": "AS1", "hitId": "H1"})
    assert response.status_code == 302
    assert StudyParticipant.objects.get(study=study).platform_session_id == "AS1"
    assert CrowdAccount.objects.get(platform="mturk").user.username == "mturk-A1B2C3"


def test_quota_full_is_a_polite_page_and_resuming_still_works(setup):
    _project, study, *_ = setup
    for label in ("P1", "P2", "P3"):
        open_study_link(study, label)
    _, response = open_study_link(study, "P4")
    assert response.status_code == 200 and response.context["state"] == "full"
    assert b"This study is full" in response.content
    assert StudyParticipant.objects.count() == 3 and not CrowdAccount.objects.filter(external_id=pid("P4")).exists()
    assert open_study_link(study, "P2")[1].status_code == 302


def test_closed_study_takes_nobody_new(setup):
    project, study, researcher, *_ = setup
    open_study_link(study, "P1")
    client = Client()
    client.force_login(researcher)
    assert client.post(f"/api/projects/crowd/studies/{study.pk}/close/").status_code == 200
    assert client.post(f"/api/projects/crowd/studies/{study.pk}/close/").status_code == 409
    assert open_study_link(study, "P2")[1].context["state"] == "closed"
    assert open_study_link(study, "P1")[1].status_code == 302  # who joined may finish
    assert AuditEvent.objects.filter(action="study_close").count() == 1


# --- tasks, quota, completion ----------------------------------------------------------------------


def test_quota_in_the_claim_path_and_completion_code_after_n_tasks(setup):
    project, study, _r, gold, items = setup
    client, _ = open_study_link(study, "P1")
    user = participant_user("P1")
    first = client.post("/api/projects/crowd/tasks/next/", {}, content_type="application/json").json()
    preload = client.post(
        "/api/projects/crowd/tasks/next/", {"exclude": [first["task"]]}, content_type="application/json"
    ).json()
    third = client.post(
        "/api/projects/crowd/tasks/next/",
        {"exclude": [first["task"], preload["task"]]},
        content_type="application/json",
    )
    assert third.status_code == 204  # two tasks per participant, both held
    reload = client.post("/api/projects/crowd/tasks/next/", {}, content_type="application/json").json()
    assert reload["task"] == first["task"]  # a held task still comes back
    # Not finished yet: the finish page sends them back to work.
    assert client.get(f"/study/{study.token}/done/")["Location"] == "/projects/crowd/annotate/"
    for task_id in (first["task"], preload["task"]):
        r = client.post(
            f"/api/tasks/{task_id}/submit/",
            {"result": valid_result("qa"), "time_spent_ms": 40_000},
            content_type="application/json",
        )
        assert r.status_code == 201
    assert client.post("/api/projects/crowd/tasks/next/", {}, content_type="application/json").status_code == 204
    finish = client.get(f"/study/{study.token}/done/")
    assert finish.status_code == 200 and finish.context["state"].state == "finished"
    html = finish.content.decode()
    assert 'id="completion-code">C0DE42<' in html
    assert 'href="https://app.prolific.com/submissions/complete?cc=C0DE42"' in html
    assert StudyParticipant.objects.get(user=user).finished_at is not None
    assert Annotation.objects.filter(annotator=user).count() == 2


def test_redirect_on_finish_sends_them_to_the_return_url(setup):
    project, study, *_ = setup
    Study.objects.filter(pk=study.pk).update(redirect_on_finish=True)
    client, _ = open_study_link(study, "P1")
    do_tasks(project, participant_user("P1"), [valid_result("qa")] * 2, seconds=30)
    response = client.get(f"/study/{study.token}/done/")
    assert response.status_code == 302
    assert response["Location"] == "https://app.prolific.com/submissions/complete?cc=C0DE42"
    assert open_study_link(study, "P1")[1]["Location"] == f"/study/{study.token}/done/"  # back on the link: finished


def test_time_limit_stops_claims(setup):
    project, study, *_ = setup
    Study.objects.filter(pk=study.pk).update(time_limit_minutes=30)
    client, _ = open_study_link(study, "P1")
    user = participant_user("P1")
    StudyParticipant.objects.filter(user=user).update(started_at=timezone.now() - timedelta(minutes=31))
    assert queue_claim_next(project=project, user=user) is None
    state = client.get(f"/study/{study.token}/done/").context["state"]
    # Past the time limit with no task done: ended, and no completion code.
    assert (state.state, state.done, state.time_over, state.reason) == ("ended", 0, True, "time")


def test_an_abandoned_hold_returns_to_the_queue_after_the_lease(setup):
    """The production lease (10 minutes); time moves by putting the lease's expiry in the past."""
    project, study, _r, gold, items = setup
    Item.objects.filter(pk__in=[i.pk for i in items[1:]]).delete()
    project.settings = {}
    project.save()  # no gold: one item left to fight over
    open_study_link(study, "LEAVER")
    open_study_link(study, "STAYER")
    leaver, stayer = participant_user("LEAVER"), participant_user("STAYER")
    held = queue_claim_next(project=project, user=leaver)
    assert held.item_id == items[0].pk and held.lease_expires > timezone.now() + timedelta(minutes=9)
    assert queue_claim_next(project=project, user=stayer) is None  # held by the leaver
    Task.objects.filter(pk=held.pk).update(lease_expires=timezone.now() - timedelta(seconds=1))
    taken = queue_claim_next(project=project, user=stayer)
    assert taken.item_id == items[0].pk
    assert Task.objects.get(pk=held.pk).status == TaskStatus.EXPIRED


def test_a_participant_who_abandons_the_only_gold_item_does_not_block_it(setup):
    """Gold share 1, one gold item, the production lease: the first participant claims the gold
    item and leaves; the next gets it at once (the abandoned hold is taken over), not after ten
    minutes. Nobody loses an answer: the first participant, back later, still submits theirs."""
    project, study, _r, gold, items = setup
    leaver_client, _ = open_study_link(study, "LEAVER")
    stayer_client, _ = open_study_link(study, "STAYER")
    next_task = "/api/projects/crowd/tasks/next/"

    held = leaver_client.post(next_task, {}, content_type="application/json").json()
    leaver_task = Task.objects.get(pk=held["task"])
    assert leaver_task.item_id == gold.pk and leaver_task.lease_expires > timezone.now() + timedelta(minutes=9)
    # (The leaver closes the tab: no renewals from here on. Their lease has most of ten minutes left.)

    taken = stayer_client.post(next_task, {}, content_type="application/json").json()

    stayer_task = Task.objects.get(pk=taken["task"])
    assert stayer_task.item_id == gold.pk and stayer_task.status == TaskStatus.ACTIVE
    leaver_task.refresh_from_db()
    assert leaver_task.status == TaskStatus.EXPIRED
    assert Task.objects.filter(item=gold, status=TaskStatus.ACTIVE).count() == 1  # still one hold per item
    # The leaver's next claim (their preload) is an ordinary item: never their gold item a second time.
    preload = leaver_client.post(next_task, {"exclude": [leaver_task.pk]}, content_type="application/json").json()
    assert Task.objects.get(pk=preload["task"]).item_id in {i.pk for i in items}

    # The leaver comes back: the gold task still renews and its answer is stored, as is the stayer's.
    assert leaver_client.post(f"/api/tasks/{leaver_task.pk}/renew/").status_code == 200
    for client, task_id, result in (
        (leaver_client, leaver_task.pk, WRONG),
        (stayer_client, stayer_task.pk, valid_result("qa")),
    ):
        r = client.post(
            f"/api/tasks/{task_id}/submit/",
            {"result": result, "time_spent_ms": 20_000},
            content_type="application/json",
        )
        assert r.status_code == 201
    assert sorted(Annotation.objects.filter(item=gold).values_list("annotator__username", flat=True)) == sorted(
        [f"prolific-{pid('LEAVER')}", f"prolific-{pid('STAYER')}"]
    )
    gold.refresh_from_db()
    assert (gold.status, gold.annotation_count) == (ItemStatus.PENDING, 0)
    rows = {r["participant_id"]: r for r in participant_rows(study=study)}
    assert [(rows[pid(p)]["gold_items"], rows[pid(p)]["gold_correct"]) for p in ("LEAVER", "STAYER")] == [
        (1, 0),
        (1, 1),
    ]
    # A second submit of the same answer is the same annotation, never a duplicate.
    again = leaver_client.post(
        f"/api/tasks/{leaver_task.pk}/submit/",
        {"result": WRONG, "time_spent_ms": 20_000},
        content_type="application/json",
    )
    assert again.status_code == 200 and Annotation.objects.filter(item=gold).count() == 2


def test_an_ordinary_item_held_by_a_leaver_is_not_taken_over(setup):
    """Only gold is taken over: an ordinary item waits for its holder's lease (it is counted)."""
    project, study, _r, gold, items = setup
    Item.objects.filter(pk__in=[i.pk for i in items[1:]]).delete()
    open_study_link(study, "LEAVER")
    open_study_link(study, "STAYER")
    leaver, stayer = participant_user("LEAVER"), participant_user("STAYER")
    first = queue_claim_next(project=project, user=leaver)  # gold share 1: the gold item
    second = queue_claim_next(project=project, user=leaver, exclude=(first.pk,))  # gold is theirs: the ordinary one
    assert (first.item_id, second.item_id) == (gold.pk, items[0].pk)

    got = queue_claim_next(project=project, user=stayer)

    assert got.item_id == gold.pk  # the gold item, taken over
    assert queue_claim_next(project=project, user=stayer, exclude=(got.pk,)) is None  # the ordinary one stays held
    assert Task.objects.get(pk=second.pk).status == TaskStatus.ACTIVE


# --- the participants table, gold flags, approve / reject -------------------------------------------


def test_gold_failing_participant_is_flagged_and_rejection_reopens_items(setup):
    project, study, researcher, gold, items = setup
    open_study_link(study, "GOOD")
    open_study_link(study, "BAD")
    good, bad = participant_user("GOOD"), participant_user("BAD")
    do_tasks(project, bad, [WRONG, valid_result("qa")], seconds=30)  # gold first (gold share 1), then one item
    bad_item = Annotation.objects.get(annotator=bad, item__is_gold=False).item
    assert (bad_item.status, bad_item.annotation_count) == (ItemStatus.ANNOTATED, 1)
    do_tasks(project, good, [valid_result("qa")] * 2, seconds=30)
    rows = {r["participant_id"]: r for r in participant_rows(study=study)}
    bad_row, good_row = rows[pid("BAD")], rows[pid("GOOD")]
    assert (bad_row["gold_accuracy"], bad_row["flagged"], bad_row["tasks"]) == (0.0, True, 2)
    assert (good_row["gold_accuracy"], good_row["flagged"]) == (1.0, False)
    assert bad_row["active_seconds"] == 60.0 and str(bad_row["pay_estimate"]) == "0.20"

    client = Client()
    client.force_login(researcher)
    r = client.post(
        f"/api/projects/crowd/studies/{study.pk}/participants/{bad_row['id']}/decision/",
        {"decision": "reject", "note": "failed attention checks"},
        content_type="application/json",
    )
    assert r.status_code == 200
    assert r.json() == {
        "status": "rejected",
        "annotations_excluded": 2,
        "items_reopened": 1,
        "reviewed_items_kept": 0,
        "holds_ended": 0,
        "items_back_to_review": 0,
        "released_items_kept": [],
    }
    bad_item.refresh_from_db()
    assert (bad_item.status, bad_item.annotation_count) == (ItemStatus.PENDING, 0)
    assert not Annotation.objects.filter(annotator=bad).exists()
    kept = ExcludedAnnotation.objects.filter(participant__user=bad).order_by("annotation_id")
    assert [e.result for e in kept] == [WRONG, valid_result("qa")]
    names = {a["annotator"] for a in project_agreement(project=project)["annotators"]}
    assert names == {f"prolific-{pid('GOOD')}"}
    event = AuditEvent.objects.get(action="study_reject")
    assert event.details["items_reopened"] == 1 and event.details["note"] == "failed attention checks"
    # The row stays, with the excluded figures; the rejected one is out of the pay total.
    rows = {r["participant_id"]: r for r in participant_rows(study=study)}
    bad_row = rows[pid("BAD")]
    assert (bad_row["status"], bad_row["tasks"], bad_row["flagged"]) == ("rejected", 2, True)
    # The item is back in the queue for someone else; the rejected participant gets nothing more.
    open_study_link(study, "THIRD")
    assert queue_claim_next(project=project, user=participant_user("THIRD")).item_id in {bad_item.pk, gold.pk}
    assert queue_claim_next(project=project, user=bad) is None
    assert open_study_link(study, "BAD")[0].get(f"/study/{study.token}/done/").context["state"].state == "ended"
    again = client.post(
        f"/api/projects/crowd/studies/{study.pk}/participants/{bad_row['id']}/decision/",
        {"decision": "approve"},
        content_type="application/json",
    )
    assert again.status_code == 409


def test_rejection_ends_holds(setup):
    project, study, researcher, *_ = setup
    open_study_link(study, "P1")
    user = participant_user("P1")
    task = queue_claim_next(project=project, user=user)
    participant = StudyParticipant.objects.get(user=user)
    outcome = participant_reject(study=study, participant_id=participant.pk, actor=researcher)
    assert outcome["holds_ended"] == 1 and Task.objects.get(pk=task.pk).status == TaskStatus.EXPIRED


def test_approve_from_the_page_and_csv_export(setup):
    project, study, researcher, *_ = setup
    open_study_link(study, "P1")
    do_tasks(project, participant_user("P1"), [valid_result("qa")] * 2, seconds=30)
    client = Client()
    client.force_login(researcher)
    participant = StudyParticipant.objects.get()
    response = client.post(f"/projects/crowd/studies/{study.pk}/", {"action": "approve", "participant": participant.pk})
    assert response.status_code == 302
    assert StudyParticipant.objects.get().status == "approved"
    assert AuditEvent.objects.filter(action="study_approve", object_id=str(participant.pk)).count() == 1
    page = client.get(f"/projects/crowd/studies/{study.pk}/")
    assert page.status_code == 200 and f'data-participant="{pid("P1")}" data-status="approved"' in page.content.decode()
    download = client.get(f"/projects/crowd/studies/{study.pk}/participants.csv")
    assert download["Content-Type"].startswith("text/csv")
    (row,) = list(csv.DictReader(io.StringIO(download.content.decode())))
    assert {
        k: row[k]
        for k in (
            "participant_id",
            "status",
            "tasks",
            "gold_items",
            "gold_correct",
            "gold_accuracy",
            "flagged",
            "active_seconds",
            "pay_estimate",
            "currency",
        )
    } == {
        "participant_id": pid("P1"),
        "status": "approved",
        "tasks": "2",
        "gold_items": "1",
        "gold_correct": "1",
        "gold_accuracy": "1.0",
        "flagged": "0",
        "active_seconds": "60.0",
        "pay_estimate": "0.20",
        "currency": "GBP",
    }


def test_studies_page_and_api_open_a_study(setup):
    project, _study, researcher, *_ = setup
    client = Client()
    client.force_login(researcher)
    assert client.post("/projects/crowd/studies/", {**GOLD_GATED_STUDY, "name": ""}).status_code == 400
    response = client.post("/projects/crowd/studies/", {**GOLD_GATED_STUDY, "name": "Main"})
    assert response.status_code == 302
    created = client.post(
        "/api/projects/crowd/studies/",
        {**GOLD_GATED_STUDY, "name": "Api", "max_participants": 5, "tasks_per_participant": 3},
        content_type="application/json",
    )
    assert created.status_code == 201 and created.json()["link"].startswith("http://testserver/study/")
    listed = client.get("/api/projects/crowd/studies/").json()
    assert [s["name"] for s in listed] == ["Api", "Main", "Pilot"]
    assert client.get(f"/api/projects/crowd/studies/{created.json()['id']}/").json()["participants"] == []


def test_role_checks(setup, make_user, make_project):
    project, study, *_ = setup
    annotator, outsider = make_user("ann"), make_user("out")
    Membership.objects.create(project=project, user=annotator, role=Role.ANNOTATOR)
    make_project("elsewhere", members={outsider: Role.RESEARCHER})
    for user, want in ((annotator, 403), (outsider, 404)):
        client = Client()
        client.force_login(user)
        assert client.get("/projects/crowd/studies/").status_code == want
        assert client.get(f"/projects/crowd/studies/{study.pk}/participants.csv").status_code == want
        assert (
            client.post("/api/projects/crowd/studies/", GOLD_GATED_STUDY, content_type="application/json").status_code
            == want
        )
        assert client.get(f"/study/{study.token}/done/").status_code == 404  # no participation
    assert Study.objects.count() == 1
