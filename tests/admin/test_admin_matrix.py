"""Who reaches what in the admin, walked over every registered model: its list, its add form and the
change page of an object of project A and (for project-scoped models) of project B, for each kind of
user. A model registered without an entry in ADMIN_RULES fails the walk (say who may use it)."""

from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone
from rest_framework.authtoken.models import Token, TokenProxy

from annotation.audit.record import audit_record
from annotation.models import (
    Annotation,
    AnnotationRevision,
    CrowdAccount,
    ExcludedAnnotation,
    ImportRun,
    ItemReopening,
    MediaAsset,
    Membership,
    ProjectAsset,
    ProjectInvite,
    Review,
    Role,
    Study,
    StudyParticipant,
    Suggestion,
    Task,
)
from inference import services
from inference.models import BackgroundRun, CachedResponse, InferenceJob, Prediction
from tests.helpers.admin import RECORDS
from tests.inference import factories

pytestmark = pytest.mark.django_db

# scoped: rows of a project, for the project's researchers and admins (with the actions named;
# {"view"} alone: a record nobody edits in the admin, superusers neither);
# endpoints: a project's own as scoped rows (its researchers add them), the shared ones viewed by
# whoever may use the admin; perms: Django's model permissions (superusers here); superuser:
# superusers only, whatever permissions staff hold. The projects themselves are scoped rows too:
# viewed by their researchers, changed by their admins (admin_site.OwnProjectsAdmin).
ADMIN_RULES = {
    "annotation.item": ("scoped", {"view", "change", "delete"}),
    "annotation.release": ("scoped", {"view"}),
    "annotation.membership": ("scoped", {"view", "add", "change", "delete"}),
    "inference.inferencejob": ("scoped", {"view", "add", "change", "delete"}),
    # Records that change only through the pages and services that keep their rules and audit them
    # (RECORDS below: nobody adds one in the admin).
    "annotation.projectinvite": ("scoped", {"view"}),
    "annotation.auditevent": ("scoped", {"view"}),
    "annotation.task": ("scoped", {"view"}),
    "annotation.annotationrevision": ("scoped", {"view"}),
    "annotation.suggestion": ("scoped", {"view"}),
    "annotation.releaseitem": ("scoped", {"view"}),
    "annotation.projectasset": ("scoped", {"view"}),
    "annotation.study": ("scoped", {"view"}),
    "annotation.studyparticipant": ("scoped", {"view"}),
    "annotation.excludedannotation": ("scoped", {"view"}),
    "annotation.itemreopening": ("scoped", {"view"}),
    "inference.prediction": ("scoped", {"view"}),
    "inference.modelendpoint": ("endpoints", {"view", "add", "change", "delete"}),
    "annotation.project": ("scoped", {"view", "change"}),
    "annotation.mediaasset": ("perms", set()),
    "annotation.annotation": ("perms", set()),
    "annotation.review": ("perms", set()),
    "annotation.importrun": ("perms", set()),
    "axes.accessattempt": ("perms", set()),
    "axes.accesslog": ("perms", set()),
    "axes.accessfailurelog": ("perms", set()),
    "auth.user": ("superuser", set()),
    "auth.group": ("superuser", set()),
    "authtoken.tokenproxy": ("superuser", set()),
    "inference.backgroundrun": ("superuser", set()),
    "annotation.crowdaccount": ("superuser", set()),
    "inference.cachedresponse": ("superuser", set()),
}
# Add forms no one gets (the rows come from the import, the workers, the login throttle, and the
# services behind the pages for the read-only records; media only through imports, which check them).
NEVER_ADDED = {
    "annotation.item",
    "annotation.importrun",
    "inference.backgroundrun",
    "annotation.mediaasset",
    "axes.accessattempt",
    "axes.accesslog",
    "axes.accessfailurelog",
    *RECORDS,
}

OUTSIDERS = ("anonymous", "non-member", "annotator", "reviewer")  # sent to the admin's login
INSIDE_A = ("researcher", "project-admin")
WHO = (*OUTSIDERS, *INSIDE_A, "other-researcher", "staff", "superuser")


@pytest.fixture
def w(make_user, make_project, tmp_path):
    users = {who: make_user(who) for who in WHO if who not in ("anonymous", "superuser")}
    users["superuser"] = make_user("superuser", superuser=True)
    users["staff"].is_staff = True
    users["staff"].save()
    a = make_project(
        "proj-a",
        "status",
        members={
            users["annotator"]: Role.ANNOTATOR,
            users["reviewer"]: Role.REVIEWER,
            users["researcher"]: Role.RESEARCHER,
            users["project-admin"]: Role.ADMIN,
        },
    )
    b = make_project("proj-b", "status", members={users["other-researcher"]: Role.RESEARCHER})
    item_a, item_b = factories.status_items(a, 1, tmp_path)[0], factories.status_items(b, 1, tmp_path, start=5)[0]
    endpoint = services.endpoint_create(name="R", backend="random")
    endpoint_a = services.endpoint_create(name="RA", backend="random", project=a)
    endpoint_b = services.endpoint_create(name="RB", backend="random", project=b)

    def job(project, release):
        return InferenceJob.objects.create(
            endpoint=endpoint, model_name="R", project=project, release=release, protocol="status", status="finished"
        )

    rel_a, rel_b = factories.release_of(a, [item_a]), factories.release_of(b, [item_b])
    job_a, job_b = job(a, rel_a), job(b, rel_b)
    annotation = Annotation.objects.create(item=item_a, annotator=users["annotator"], result={})
    annotation_b = Annotation.objects.create(item=item_b, annotator=users["other-researcher"], result={})
    now = timezone.now()

    def per_project(make):
        return make(a, item_a, users["annotator"], "a"), make(b, item_b, users["non-member"], "b")

    studies = per_project(
        lambda p, item, user, tag: Study.objects.create(
            project=p, name=tag, token=f"study-{tag}", max_participants=1, tasks_per_participant=1, completion_code="C"
        )
    )
    participants = [
        StudyParticipant.objects.create(study=study, user=user, external_id=f"pid-{tag}")
        for study, user, tag in zip(studies, (users["annotator"], users["non-member"]), "ab")
    ]
    objects = {
        "annotation.item": (item_a, item_b),
        "annotation.release": (rel_a, rel_b),
        "annotation.membership": (
            Membership.objects.get(user=users["researcher"]),
            Membership.objects.get(user=users["other-researcher"]),
        ),
        "inference.inferencejob": (job_a, job_b),
        "annotation.projectinvite": per_project(
            lambda p, item, user, tag: ProjectInvite.objects.create(
                project=p, role=Role.ANNOTATOR, token_sha256=tag * 64, expires_at=now + timedelta(hours=1)
            )
        ),
        "annotation.auditevent": per_project(
            lambda p, item, user, tag: audit_record(action="freeze", project=p, object_type="release", object_repr=tag)
        ),
        "annotation.task": per_project(
            lambda p, item, user, tag: Task.objects.create(
                item=item, annotator=user, status="submitted", lease_expires=now
            )
        ),
        "annotation.annotationrevision": tuple(
            AnnotationRevision.objects.create(annotation=an, result={}, submitted_at=now)
            for an in (annotation, annotation_b)
        ),
        "annotation.suggestion": per_project(
            lambda p, item, user, tag: Suggestion.objects.create(item=item, source=tag)
        ),
        "annotation.releaseitem": (rel_a.release_items.get(), rel_b.release_items.get()),
        "annotation.projectasset": per_project(
            lambda p, item, user, tag: ProjectAsset.objects.create(project=p, asset=MediaAsset.objects.first())
        ),
        "annotation.study": studies,
        "annotation.studyparticipant": tuple(participants),
        "annotation.excludedannotation": tuple(
            ExcludedAnnotation.objects.create(participant=participant, item=item, annotation_id=900 + n, created_at=now)
            for n, (participant, item) in enumerate(zip(participants, (item_a, item_b)))
        ),
        "annotation.itemreopening": tuple(
            ItemReopening.objects.create(
                item=item, participant=participant, decision="accept", annotation_id=900 + n, reason="rejected"
            )
            for n, (participant, item) in enumerate(zip(participants, (item_a, item_b)))
        ),
        "inference.prediction": tuple(
            Prediction.objects.create(job=j, item=item, query="sci1") for j, item in ((job_a, item_a), (job_b, item_b))
        ),
        "annotation.crowdaccount": (
            CrowdAccount.objects.create(
                user=users["non-member"], study=studies[1], platform="prolific", external_id="pid-b"
            ),
            None,
        ),
        "inference.modelendpoint": (endpoint_a, endpoint_b),
        "annotation.project": (a, b),
        "annotation.mediaasset": (MediaAsset.objects.first(), None),
        "annotation.annotation": (annotation, None),
        "annotation.review": (
            Review.objects.create(item=item_a, decision="accept", accepted_annotation=annotation),
            None,
        ),
        "annotation.importrun": (ImportRun.objects.create(project=a, file_name="x.jsonl"), None),
        "auth.user": (users["annotator"], None),
        "auth.group": (Group.objects.create(name="g"), None),
        "authtoken.tokenproxy": (TokenProxy.objects.get(key=Token.objects.create(user=users["annotator"]).key), None),
        "inference.backgroundrun": (BackgroundRun.objects.create(celery_task="inference.tasks.start_job"), None),
        "inference.cachedresponse": (CachedResponse.objects.create(model="judge|m", request_hash="0" * 64), None),
    }
    return SimpleNamespace(users=users, objects=objects)


def expected(who: str, label: str, page: str) -> object:
    """200, 403, "login" (to the admin's login) or "missing" (the admin's redirect for a missing object).
    `page` is list, add, change-a or change-b."""
    kind, actions = ADMIN_RULES[label]
    if who in OUTSIDERS:
        return "login"
    if who == "superuser":
        return 403 if page == "add" and label in NEVER_ADDED else 200
    if kind == "endpoints" and who == "staff":  # the shared ones, read only, for anyone let in
        return 200 if page == "list" else 403 if page == "add" else "missing"
    if kind in ("scoped", "endpoints"):
        mine = "change-a" if who in INSIDE_A else "change-b" if who == "other-researcher" else None
        if mine is None:  # staff of no project: nothing of any project
            return 403
        if page == "list":
            return 200
        if page == "add":
            return 200 if "add" in actions else 403
        return 200 if page == mine else "missing"
    return 403


def outcome(response) -> object:
    if response.status_code == 302:
        location = response["Location"]
        return (
            "login" if location.startswith("/admin/login/?next=") else "missing" if location == "/admin/" else location
        )
    return response.status_code


def test_every_registered_model_has_a_rule():
    registered = {model._meta.label_lower for model in admin.site._registry}
    assert registered == set(ADMIN_RULES), "admin models without a rule (or stale rules) in ADMIN_RULES"


def test_every_model_of_the_apps_is_registered():
    """A new model gets an admin, even if only superusers see it: say who may."""
    unregistered = sorted(
        model._meta.label_lower
        for app in ("annotation", "inference", "evaluation")
        for model in apps.get_app_config(app).get_models()
        if not admin.site.is_registered(model)
    )
    assert unregistered == []


def test_who_reaches_what_in_the_admin(w):
    mismatches = []
    for who in WHO:
        client = Client(raise_request_exception=False)
        if who != "anonymous":
            client.force_login(w.users[who])
        want_index = "login" if who in OUTSIDERS else 200
        if outcome(client.get("/admin/")) != want_index:
            mismatches.append(f"{who} /admin/")
        for model in admin.site._registry:
            label = model._meta.label_lower
            base = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
            obj_a, obj_b = w.objects.get(label, (None, None))
            pages = {"list": base, "add": f"{base}add/"}
            for name, obj in (("change-a", obj_a), ("change-b", obj_b)):
                if obj is not None:
                    pages[name] = f"{base}{obj.pk}/change/"
            for page, url in pages.items():
                got, want = outcome(client.get(url)), expected(who, label, page)
                if got != want:
                    mismatches.append(f"{who} GET {url} ({label} {page}): got {got}, expected {want}")
    assert not mismatches, f"{len(mismatches)} admin requests broke the rules:\n" + "\n".join(mismatches)
