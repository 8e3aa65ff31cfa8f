"""A study link opens one door (annotation/studies/, annotation/permissions.py, annotation/members.py):
a crowd account belongs to one study, is an annotator of that study's project and nothing else;
its time is the server's; its completion code comes after the study's tasks; platform ids have
their platform's format; made-up ids do not keep a study full; joins are audited; and no CSV cell
the project writes can run as a spreadsheet formula (protocols/kit/csv_cells.py).

Production settings throughout (the 10-minute lease); time moves by passing `now`."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from annotation.audit.record import audit_record
from annotation.audit.trail import audit_export
from annotation.members import invite_create
from annotation.models import (
    Annotation,
    AuditEvent,
    CrowdAccount,
    Membership,
    Project,
    ProjectInvite,
    Role,
    Study,
    StudyParticipant,
    Task,
)
from annotation.queue import annotation_submit, queue_claim_next
from annotation.studies.participants import StudyUnavailable, participant_join, platform_ids
from annotation.studies.setup import study_create
from annotation.studies.table import participant_rows, study_totals
from evaluation.tables import leaderboard_csv
from protocols.kit.csv_cells import safe_cell
from tests.helpers.studies import UNGATED_STUDY, do_tasks, open_study_link, participant_user, pid

from .work_factories import make_item, valid_result

pytestmark = pytest.mark.django_db
QA = valid_result("qa")
NEXT = "/api/projects/{}/tasks/next/"


def next_task(client: Client, slug: str):
    return client.post(NEXT.format(slug), {}, content_type="application/json")


@pytest.fixture
def two_projects(make_user, make_project):
    """Projects "alpha" and "beta", two items each, a researcher each and an open study each."""
    out = {}
    for slug in ("alpha", "beta"):
        researcher = make_user(f"res-{slug}")
        project = make_project(slug, "visualtrans", members={researcher: Role.RESEARCHER}, annotations_per_item=1)
        for n in range(2):
            make_item(project, f"{slug}{n}")
        study = study_create(project=project, actor=researcher, **{**UNGATED_STUDY, "name": f"{slug} study"})
        out[slug] = (project, study, researcher)
    return out


# --- one study, one account, one project ----------------------------------------------------------


def test_a_study_link_never_signs_in_the_account_of_another_study(two_projects):
    """With only study alpha's link and an id that joined study beta, nothing of beta opens."""
    alpha, study_a, _ = two_projects["alpha"]
    beta, study_b, _ = two_projects["beta"]
    joined_b, _ = open_study_link(study_b, "X")
    assert next_task(joined_b, "beta").status_code == 200  # the participant's own work in beta

    attacker, response = open_study_link(study_a, "X")

    assert response.status_code == 302 and response["Location"] == "/projects/alpha/annotate/"
    refused = next_task(attacker, "beta")
    assert refused.status_code == 404 and "task" not in refused.json()
    assert attacker.get("/projects/beta/annotate/").status_code == 404
    account_a, account_b = participant_user("X", study_a), participant_user("X", study_b)
    assert account_a != account_b  # the same id in another study is another account
    assert not Task.objects.filter(annotator=account_a, item__project=beta).exists()
    assert attacker.get("/api/me/").json()["username"] == account_a.username == f"prolific-{pid('X')}-s{study_a.pk}"
    assert joined_b.get("/api/me/").json()["username"] == account_b.username == f"prolific-{pid('X')}"
    assert next_task(attacker, "alpha").status_code == 200  # alpha's link opens alpha
    assert {p.slug for p in Project.objects.filter(memberships__user=account_a)} == {alpha.slug}


def test_a_crowd_account_holds_no_other_role_joins_no_other_project_and_takes_no_invite(two_projects):
    alpha, study_a, res_a = two_projects["alpha"]
    beta, _study_b, res_b = two_projects["beta"]
    crowd_client, _ = open_study_link(study_a, "X")
    crowd = participant_user("X")
    lead_a, lead_b = Client(), Client()
    lead_a.force_login(res_a)
    lead_b.force_login(res_b)

    # The members API: no other role in its project, no place in another.
    promoted = lead_a.post(
        "/api/projects/alpha/members/",
        {"username_or_email": crowd.username, "role": Role.RESEARCHER},
        content_type="application/json",
    )
    assert promoted.status_code == 409 and "crowd participant's account" in promoted.json()["detail"]
    patched = lead_a.patch(
        f"/api/projects/alpha/members/{crowd.pk}/", {"role": Role.REVIEWER}, content_type="application/json"
    )
    assert patched.status_code == 409
    elsewhere = lead_b.post(
        "/api/projects/beta/members/",
        {"username_or_email": crowd.username, "role": Role.ANNOTATOR},
        content_type="application/json",
    )
    # Beta's researchers are not told the account exists: the same answer as a name nobody has.
    unknown = lead_b.post(
        "/api/projects/beta/members/",
        {"username": "nobody-at-all", "role": Role.ANNOTATOR},
        content_type="application/json",
    )
    assert elsewhere.status_code == unknown.status_code == 400
    assert elsewhere.json()["errors"]["username"] == f"No account you can add is named {crowd.username!r}."
    assert unknown.json()["errors"]["username"] == "No account you can add is named 'nobody-at-all'."
    assert "alpha" not in str(elsewhere.json()) and "crowd" not in str(elsewhere.json())
    csv_file = SimpleUploadedFile("m.csv", f"{crowd.username},admin\n".encode())
    report = lead_a.post("/api/projects/alpha/members/csv/", {"file": csv_file}).json()
    assert [line["outcome"] for line in report["lines"]] == ["refused"]

    # The admin's membership form says why.
    form = lead_a.post(
        "/admin/annotation/membership/add/", {"project": alpha.pk, "user": crowd.username, "role": Role.REVIEWER}
    )
    assert form.status_code == 200 and "crowd participant&#x27;s account" in form.content.decode()
    membership = Membership.objects.get(user=crowd)
    change = lead_a.post(f"/admin/annotation/membership/{membership.pk}/change/", {"role": Role.RESEARCHER})
    assert change.status_code == 200 and "can only be an annotator of alpha" in change.content.decode()

    # Invites: refused over the API (409) and on the page (403); the link stays usable.
    invite, token = invite_create(project=beta, actor=res_b, role=Role.RESEARCHER, hours=24)
    assert crowd_client.post(f"/api/invites/{token}/accept/").status_code == 409
    assert crowd_client.post(f"/invites/{token}/").status_code == 403
    assert ProjectInvite.objects.get(pk=invite.pk).used_at is None
    assert list(Membership.objects.filter(user=crowd).values_list("project__slug", "role")) == [("alpha", "annotator")]
    assert not AuditEvent.objects.filter(action__in=["member_change"]).exists()


def test_a_crowd_accounts_membership_rows_give_it_nothing_beyond_its_studys_annotation(two_projects):
    """Rows written before these rules (a researcher role in its project, a membership elsewhere)
    give a crowd account nothing: the admin, project creation and other projects stay closed."""
    alpha, study_a, _ = two_projects["alpha"]
    beta, *_ = two_projects["beta"]
    client, _ = open_study_link(study_a, "X")
    crowd = participant_user("X")
    Membership.objects.filter(user=crowd).update(role=Role.ADMIN)
    Membership.objects.create(project=beta, user=crowd, role=Role.ADMIN)

    assert client.get("/admin/")["Location"].startswith("/admin/login/")
    created = client.post(
        "/api/projects/", {"name": "Mine", "slug": "mine", "protocol": "status"}, content_type="application/json"
    )
    assert created.status_code == 403 and not Project.objects.filter(slug="mine").exists()
    assert client.get("/api/projects/alpha/members/").status_code == 403
    assert client.get("/projects/alpha/studies/").status_code == 403
    assert client.get("/projects/beta/annotate/").status_code == 404
    assert next_task(client, "beta").status_code == 404
    assert [p["slug"] for p in client.get("/api/projects/").json()] == ["alpha"]
    assert client.get("/projects/alpha/annotate/").status_code == 200
    assert next_task(client, "alpha").status_code == 200


# --- time, pay, codes, ids, places, audit -----------------------------------------------------------


def test_time_is_measured_by_the_server_and_amendments_add_none(two_projects):
    alpha, study_a, _ = two_projects["alpha"]
    client, _ = open_study_link(study_a, "X")
    crowd = participant_user("X")
    for _ in range(2):  # two tasks done in a blink, each claiming two billion milliseconds
        task = next_task(client, "alpha").json()
        submitted = client.post(
            f"/api/tasks/{task['task']}/submit/",
            {"result": QA, "time_spent_ms": 2_000_000_000},
            content_type="application/json",
        )
        assert submitted.status_code == 201
    stored = list(Annotation.objects.filter(annotator=crowd).values_list("time_spent_ms", flat=True))
    assert len(stored) == 2 and all(ms < 60_000 for ms in stored)
    (row,) = participant_rows(study=study_a)
    assert row["pay_estimate"] == Decimal("0.00") and study_totals([row])["pay_estimate"] == Decimal("0.00")

    first = Annotation.objects.filter(annotator=crowd).order_by("pk").first()
    amended = client.post(
        f"/api/annotations/{first.pk}/amend/",
        {"result": {"answer": "B", "flags": []}, "time_spent_ms": 86_400_000},
        content_type="application/json",
    )
    assert amended.status_code == 200
    first.refresh_from_db()
    assert first.result["answer"] == "B" and first.time_spent_ms == stored[0]


def test_time_runs_from_the_claim_or_the_previous_submit_and_stops_at_the_lease(make_user, make_project):
    annotator = make_user("ann")
    project = make_project("timed", "visualtrans", members={annotator: Role.ANNOTATOR}, annotations_per_item=1)
    for n in range(3):
        make_item(project, f"t{n}")
    t0 = timezone.now()
    shown = queue_claim_next(project=project, user=annotator, now=t0)
    preloaded = queue_claim_next(project=project, user=annotator, now=t0, exclude=(shown.pk,))
    first = annotation_submit(task_id=shown.pk, user=annotator, result=QA, now=t0 + timedelta(seconds=40))
    # The preloaded task was claimed at t0 too: its time starts at the previous submit.
    second = annotation_submit(task_id=preloaded.pk, user=annotator, result=QA, now=t0 + timedelta(seconds=65))
    left_open = queue_claim_next(project=project, user=annotator, now=t0 + timedelta(seconds=65))
    third = annotation_submit(task_id=left_open.pk, user=annotator, result=QA, now=t0 + timedelta(hours=2))
    assert [first.annotation.time_spent_ms, second.annotation.time_spent_ms, third.annotation.time_spent_ms] == [
        40_000,
        25_000,
        600_000,  # the project's lease (10 minutes): a task left open is not work
    ]


def test_the_completion_code_comes_only_after_the_studys_tasks(two_projects):
    alpha, study_a, _ = two_projects["alpha"]
    Study.objects.filter(pk=study_a.pk).update(
        time_limit_minutes=30,
        redirect_on_finish=True,
        return_url="https://app.prolific.com/submissions/complete?cc={code}",
    )
    late, _ = open_study_link(study_a, "LATE")
    StudyParticipant.objects.filter(user=participant_user("LATE")).update(
        started_at=timezone.now() - timedelta(minutes=31)
    )
    page = late.get(f"/study/{study_a.token}/done/")
    assert page.status_code == 200  # no redirect to the platform with the code
    assert (page.context["state"].state, page.context["state"].reason) == ("ended", "time")
    assert "C0DE42" not in page.content.decode() and 'id="completion-code"' not in page.content.decode()

    worker, _ = open_study_link(study_a, "WORKER")
    user = participant_user("WORKER")
    do_tasks(alpha, user, [QA], seconds=30)
    Task.objects.filter(item__project=alpha).delete()  # the other item is held elsewhere: nothing now
    alpha.items.exclude(annotations__annotator=user).update(status="annotated")
    halfway = worker.get(f"/study/{study_a.token}/done/")
    assert (halfway.context["state"].state, halfway.context["state"].reason) == ("ended", "no-tasks")
    assert "C0DE42" not in halfway.content.decode()
    assert StudyParticipant.objects.get(user=user).finished_at is None  # they may come back
    alpha.items.exclude(annotations__annotator=user).update(status="pending")
    assert worker.get(f"/study/{study_a.token}/done/")["Location"] == "/projects/alpha/annotate/"
    do_tasks(alpha, user, [QA], seconds=30)
    done = worker.get(f"/study/{study_a.token}/done/")
    assert done.status_code == 302 and done["Location"] == "https://app.prolific.com/submissions/complete?cc=C0DE42"


@pytest.mark.parametrize(
    "platform,params,bad",
    [
        ("prolific", {"PROLIFIC_PID": "PID1"}, "PROLIFIC_PID"),
        ("prolific", {"PROLIFIC_PID": "5f1a2b3c4d5e6f7a8b9c0d1"}, "PROLIFIC_PID"),  # 23 digits
        ("prolific", {"PROLIFIC_PID": "5f1a2b3c4d5e6f7a8b9c0d1e0"}, "PROLIFIC_PID"),  # 25
        ("prolific", {"PROLIFIC_PID": pid("X"), "STUDY_ID": '=HYPERLINK("http://x.example","go")'}, "STUDY_ID"),
        ("prolific", {"PROLIFIC_PID": pid("X"), "SESSION_ID": "=@SUM(1+1)"}, "SESSION_ID"),
        ("mturk", {"workerId": "B1C2D3E4"}, "workerId"),  # a worker id starts with A
        ("mturk", {"workerId": "a1b2c3"}, "workerId"),
        ("mturk", {"workerId": "A1B2C3", "hitId": "H-1"}, "hitId"),
        ("mturk", {"workerId": "A1B2C3", "assignmentId": "x" * 65}, "assignmentId"),
    ],
)
def test_platform_ids_must_have_their_platforms_format(two_projects, platform, params, bad):
    alpha, _study, researcher = two_projects["alpha"]
    study = study_create(project=alpha, actor=researcher, **{**UNGATED_STUDY, "platform": platform})
    response = Client().get(f"/study/{study.token}/", params)
    assert response.status_code == 400 and response.context["state"] == "invalid"
    assert response.context["why"].startswith(f"{bad} is not a ")
    assert not CrowdAccount.objects.exists() and not StudyParticipant.objects.exists()


def test_a_prolific_id_in_capitals_is_the_same_participant(two_projects):
    _alpha, study_a, _ = two_projects["alpha"]
    assert Client().get(f"/study/{study_a.token}/", {"PROLIFIC_PID": pid("X").upper()}).status_code == 302
    open_study_link(study_a, "X")
    assert list(CrowdAccount.objects.values_list("external_id", flat=True)) == [pid("X")]


def test_made_up_ids_hold_a_place_for_one_lease_and_workers_keep_theirs(two_projects):
    alpha, study_a, _ = two_projects["alpha"]
    Study.objects.filter(pk=study_a.pk).update(max_participants=2)
    study_a.refresh_from_db()

    def join(label, now):
        return participant_join(study=study_a, ids=platform_ids(study_a, {"PROLIFIC_PID": pid(label)}), now=now)

    t0 = timezone.now()
    join("WORKER", t0)
    join("FAKE1", t0)
    with pytest.raises(StudyUnavailable, match="full"):
        join("LATE1", t0 + timedelta(minutes=5))
    do_tasks(alpha, participant_user("WORKER"), [QA], seconds=30, start=t0)
    # One lease (10 minutes) later the made-up id gives its place back; the worker keeps theirs.
    joined, new = join("LATE1", t0 + timedelta(minutes=10, seconds=1))
    assert new and joined.external_id == pid("LATE1")
    with pytest.raises(StudyUnavailable, match="full"):
        join("LATE2", t0 + timedelta(minutes=10, seconds=2))
    assert join("FAKE1", t0 + timedelta(minutes=20)) == (StudyParticipant.objects.get(external_id=pid("FAKE1")), False)


def test_joining_a_study_is_audited_once(two_projects):
    alpha, study_a, _ = two_projects["alpha"]
    open_study_link(study_a, "X")
    open_study_link(study_a, "X")  # resuming is not a join
    (event,) = AuditEvent.objects.filter(action="member_add")
    crowd = participant_user("X")
    assert (event.actor, event.project, event.object_repr) == (crowd, alpha, f"alpha study: {pid('X')}")
    assert event.details["via"] == f"study {study_a.pk}" and event.details["participant"] == pid("X")
    assert event.details["role"] == Role.ANNOTATOR


def test_work_is_counted_and_paid_in_the_study_it_was_done_for(make_user, make_project):
    researcher = make_user("res")
    project = make_project("twice", "visualtrans", members={researcher: Role.RESEARCHER}, annotations_per_item=1)
    for n in range(3):
        make_item(project, f"w{n}")
    pilot = study_create(project=project, actor=researcher, **{**UNGATED_STUDY, "name": "Pilot"})
    main = study_create(project=project, actor=researcher, **{**UNGATED_STUDY, "name": "Main"})
    open_study_link(pilot, "X")
    open_study_link(main, "X")
    do_tasks(project, participant_user("X", pilot), [QA, QA], seconds=60)
    do_tasks(project, participant_user("X", main), [QA], seconds=60)

    (in_pilot,), (in_main,) = participant_rows(study=pilot), participant_rows(study=main)
    assert (in_pilot["tasks"], in_pilot["active_seconds"], in_pilot["pay_estimate"]) == (2, 120.0, Decimal("0.40"))
    assert (in_main["tasks"], in_main["active_seconds"], in_main["pay_estimate"]) == (1, 60.0, Decimal("0.20"))


# --- CSV cells ---------------------------------------------------------------------------------------


def test_the_participants_csv_neutralises_cells_that_start_like_formulas(two_projects):
    alpha, study_a, res_a = two_projects["alpha"]
    open_study_link(study_a, "X")
    # Values stored before the link checked them (the link refuses them now).
    StudyParticipant.objects.filter(study=study_a).update(
        platform_study_id='=HYPERLINK("http://x.example","go")', platform_session_id="=@SUM(1+1)"
    )
    StudyParticipant.objects.create(
        study=study_a, user=get_user_model().objects.create_user("legacy"), external_id="-2+3", platform_study_id="\tx"
    )
    client = Client()
    client.force_login(res_a)
    download = client.get(f"/projects/alpha/studies/{study_a.pk}/participants.csv")
    rows = list(csv.DictReader(io.StringIO(download.content.decode())))
    assert [(r["participant_id"], r["platform_study_id"], r["platform_session_id"]) for r in rows] == [
        (pid("X"), '\'=HYPERLINK("http://x.example","go")', "'=@SUM(1+1)"),
        ("'-2+3", "'\tx", ""),
    ]
    assert [r["active_seconds"] for r in rows] == ["0.0", "0.0"]  # numbers stay numbers


def test_every_csv_the_project_writes_neutralises_formula_cells():
    for start in ("=", "+", "-", "@", "\t", "\r"):
        assert safe_cell(f"{start}1+cmd|' /C calc'!A0") == f"'{start}1+cmd|' /C calc'!A0"
    assert [safe_cell(v) for v in ("-0.1234", "+3", "-1e-05", "plain", 5, -2.5, None)] == [
        "-0.1234",
        "+3",
        "-1e-05",
        "plain",
        5,
        -2.5,
        None,
    ]
    board = {
        "protocol": "status",
        "rows": [
            {
                "model": '=HYPERLINK("http://x")',
                "rank": 1,
                "n": 3,
                "parse_failures": 0,
                "metrics": {"m": -0.5},
                "ci": {},
            }
        ],
    }
    (header, row) = list(csv.reader(io.StringIO(leaderboard_csv(board))))[:2]
    assert row[:4] == ['\'=HYPERLINK("http://x")', "1", "3", "0"] and row[4].startswith("-0.5")
    # Nothing writes CSV past the neutralising writer.
    root = Path(__file__).resolve().parents[2]
    raw = [
        f"{path.relative_to(root)}"
        for package in ("annotation", "evaluation", "inference", "background", "config", "protocols")
        for path in (root / package).rglob("*.py")
        if path.name != "csv_cells.py" and ("csv.writer(" in (text := path.read_text()) or "DictWriter(" in text)
    ]
    assert raw == []


def test_the_audit_csv_neutralises_formula_cells(make_project):
    project = make_project("audited")
    for text in ("\t=1+1", "+SUM(1)", "@A1", "-2+3"):
        audit_record(action="freeze", project=project, object_type="release", object_repr=text)
    rows = list(csv.DictReader(io.StringIO("".join(audit_export(AuditEvent.objects.order_by("pk"), "csv")))))
    assert [r["object"] for r in rows] == ["'\t=1+1", "'+SUM(1)", "'@A1", "'-2+3"]
