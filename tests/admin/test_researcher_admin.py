"""The admin for a project's researchers: a researcher who is not staff opens the
admin and sees, changes and launches only what belongs to their projects; another project's rows
are neither listed, offered in a form, nor reachable by URL; accounts stay the superusers'."""

import re
from types import SimpleNamespace

import pytest
from django.contrib.auth.models import Permission

from annotation.models import Item, Membership, Role
from inference import services
from inference.models import InferenceJob, ModelEndpoint
from tests.inference import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def w(make_user, make_project, tmp_path):
    """Projects A and B, each with an item, a release, a job and a researcher; A has an annotator
    and an admin; one endpoint a job may use and one whose key variable is refused."""
    res_a, res_b, ann, boss = make_user("res_a"), make_user("res_b"), make_user("ann_a"), make_user("boss_a")
    root = make_user("root", superuser=True)
    a = make_project("proj-a", "status", members={res_a: Role.RESEARCHER, ann: Role.ANNOTATOR, boss: Role.ADMIN})
    b = make_project("proj-b", "status", members={res_b: Role.RESEARCHER})
    items_a = factories.status_items(a, 2, tmp_path)
    items_b = factories.status_items(b, 1, tmp_path, start=10)
    rel_a, rel_b = factories.release_of(a, items_a, version="va1"), factories.release_of(b, items_b, version="vb1")
    usable = services.endpoint_create(name="random-ok", backend="random")
    # Made before the operator narrowed the allowed variables: it can only fail now.
    refused = ModelEndpoint.objects.create(name="leaky", backend="openai", model_id="m", api_key_env="SECRET_KEY")
    job_a = InferenceJob.objects.create(
        endpoint=usable, model_name="random-ok", project=a, release=rel_a, protocol="status", status="finished"
    )
    job_b = InferenceJob.objects.create(
        endpoint=usable, model_name="random-ok", project=b, release=rel_b, protocol="status", status="finished"
    )
    return SimpleNamespace(
        a=a,
        b=b,
        res_a=res_a,
        res_b=res_b,
        ann=ann,
        boss=boss,
        root=root,
        items_a=items_a,
        item_b=items_b[0],
        rel_a=rel_a,
        rel_b=rel_b,
        usable=usable,
        refused=refused,
        job_a=job_a,
        job_b=job_b,
        m_res_b=Membership.objects.get(user=res_b),
        m_boss=Membership.objects.get(user=boss),
        m_ann=Membership.objects.get(user=ann),
    )


def options(html: str, select_id: str) -> list[str]:
    """The visible texts of a <select>'s options, the empty one left out."""
    block = re.search(rf'<select[^>]*id="{select_id}"[^>]*>(.*?)</select>', html, re.S).group(1)
    return [text for value, text in re.findall(r'<option value="([^"]*)"[^>]*>([^<]*)</option>', block) if value]


def test_a_researcher_who_is_not_staff_opens_the_admin_with_their_models_only(client, w):
    assert not w.res_a.is_staff
    client.force_login(w.res_a)
    index = client.get("/admin/")
    assert index.status_code == 200
    links = set(re.findall(r'href="/admin/(\w+/\w+)/"', index.content.decode()))
    assert links == {
        "annotation/item",
        "annotation/membership",
        "annotation/project",
        "annotation/release",
        "inference/inferencejob",
        "inference/modelendpoint",
        # the projects' records, read only (tests/admin/test_admin_records.py)
        "annotation/projectinvite",
        "annotation/auditevent",
        "annotation/task",
        "annotation/annotationrevision",
        "annotation/suggestion",
        "annotation/releaseitem",
        "annotation/projectasset",
        "annotation/study",
        "annotation/studyparticipant",
        "annotation/excludedannotation",
        "annotation/itemreopening",
        "inference/prediction",
    }


def test_each_list_shows_the_researchers_projects_only(client, w):
    client.force_login(w.res_a)
    lists = {
        "annotation/item": ({it.external_id for it in w.items_a}, {w.item_b.external_id}),
        "annotation/release": ({"va1"}, {"vb1"}),
        "annotation/membership": ({"res_a", "ann_a", "boss_a"}, {"res_b"}),
        "inference/inferencejob": ({f"/jobs/{w.job_a.pk}/"}, {f"/jobs/{w.job_b.pk}/"}),
    }
    for path, (shown, hidden) in lists.items():
        html = client.get(f"/admin/{path}/").content.decode()
        assert all(s in html for s in shown), path
        assert not any(h in html for h in hidden), path
        assert "proj-b" not in html, path  # neither a row nor the project filter names B
    endpoints = client.get("/admin/inference/modelendpoint/").content.decode()
    assert "random-ok" in endpoints and "leaky" not in endpoints


@pytest.mark.parametrize("kind", ["item", "release", "membership", "job"])
def test_another_projects_object_by_url_is_not_found(client, w, kind):
    obj, path = {
        "item": (w.item_b, "annotation/item"),
        "release": (w.rel_b, "annotation/release"),
        "membership": (w.m_res_b, "annotation/membership"),
        "job": (w.job_b, "inference/inferencejob"),
    }[kind]
    client.force_login(w.res_a)
    for page in ("change", "history", "delete"):
        response = client.get(f"/admin/{path}/{obj.pk}/{page}/")
        if kind == "release" and page == "delete":
            assert response.status_code == 403  # no release is ever deleted: refused before any lookup
            continue
        # What the admin does for a missing object: back to the index, with "doesn't exist".
        assert (response.status_code, response["Location"]) == (302, "/admin/"), (kind, page)
    client.post(f"/admin/{path}/{obj.pk}/delete/", {"post": "yes"})
    client.post(f"/admin/{path}/", {"action": "delete_selected", "_selected_action": [obj.pk], "post": "yes"})
    assert type(obj).objects.filter(pk=obj.pk).exists()
    # The researcher of B, for comparison, gets it.
    client.force_login(w.res_b)
    assert client.get(f"/admin/{path}/{obj.pk}/change/").status_code == 200


def test_accounts_and_tokens_are_for_superusers_only(client, w, make_user):
    staff = make_user("staff")
    staff.is_staff = True
    staff.save()
    staff.user_permissions.add(*Permission.objects.filter(content_type__app_label__in=["auth", "authtoken"]))
    pages = [
        "/admin/auth/user/",
        f"/admin/auth/user/{w.root.pk}/change/",
        "/admin/auth/user/add/",
        "/admin/auth/group/",
        "/admin/authtoken/tokenproxy/",
    ]
    for user in (w.res_a, staff):
        client.force_login(user)
        assert [client.get(p).status_code for p in pages] == [403] * len(pages), user
        assert "/admin/auth/" not in client.get("/admin/").content.decode()
    client.force_login(w.root)
    assert [client.get(p).status_code for p in pages] == [200] * len(pages)


def test_the_job_form_offers_only_the_researchers_projects_releases_and_usable_endpoints(client, w):
    client.force_login(w.res_a)
    html = client.get("/admin/inference/inferencejob/add/").content.decode()
    assert options(html, "id_project") == ["proj-a"]
    assert options(html, "id_release") == ["proj-a@va1"]
    assert options(html, "id_endpoint") == ["random-ok"]
    form = {
        "endpoint": w.usable.pk,
        "project": w.a.pk,
        "release": w.rel_a.pk,
        "protocol": "",
        "mode": "evaluate",
        "temperature": "0",
        "strategy": "direct",
        "extra_params": "{}",
    }
    # B's project or release, or the refused endpoint, typed into the POST: refused, nothing made.
    for bad in ({"project": w.b.pk, "release": ""}, {"release": w.rel_b.pk}, {"endpoint": w.refused.pk}):
        response = client.post("/admin/inference/inferencejob/add/", {**form, **bad})
        assert response.status_code == 200 and "Select a valid choice" in response.content.decode(), bad
    assert InferenceJob.objects.count() == 2
    response = client.post("/admin/inference/inferencejob/add/", form)
    job = InferenceJob.objects.exclude(pk__in=[w.job_a.pk, w.job_b.pk]).get()
    assert (response.status_code, response["Location"]) == (302, f"/jobs/{job.pk}/")
    assert (job.project, job.release, job.endpoint, job.created_by, job.status) == (
        w.a,
        w.rel_a,
        w.usable,
        w.res_a,
        "queued",
    )


def test_a_superuser_is_offered_everything_but_refused_endpoints(client, w):
    client.force_login(w.root)
    html = client.get("/admin/inference/inferencejob/add/").content.decode()
    assert options(html, "id_project") == ["proj-a", "proj-b"]
    assert options(html, "id_release") == ["proj-a@va1", "proj-b@vb1"]
    assert options(html, "id_endpoint") == ["random-ok"]
    assert "leaky" in client.get("/admin/inference/modelendpoint/").content.decode()


def test_shared_endpoints_are_read_only_for_researchers(client, w):
    """(Their projects' own endpoints they add and change: tests/inference/test_endpoint_scope.py.)"""
    client.force_login(w.res_a)
    page = client.get(f"/admin/inference/modelendpoint/{w.usable.pk}/change/")
    assert page.status_code == 200 and 'name="_save"' not in page.content.decode()
    client.post(
        f"/admin/inference/modelendpoint/{w.usable.pk}/change/",
        {"name": "renamed", "backend": "random", "concurrency": "1", "options": "{}"},
    )
    assert ModelEndpoint.objects.get(pk=w.usable.pk).name == "random-ok"
    assert client.get(f"/admin/inference/modelendpoint/{w.refused.pk}/change/").status_code == 302


def test_an_item_form_shows_its_project_and_content_read_only(client, w):
    client.force_login(w.res_a)
    item = w.items_a[0]
    html = client.get(f"/admin/annotation/item/{item.pk}/change/").content.decode()
    assert 'id="id_project"' not in html and 'id="id_payload"' not in html and "proj-a" in html
    assert client.get("/admin/annotation/item/add/").status_code == 403  # items come through the import


def test_a_researcher_manages_members_up_to_their_own_role(client, w, make_user):
    newcomer = make_user("newcomer")
    client.force_login(w.res_a)
    add = "/admin/annotation/membership/add/"
    response = client.post(add, {"project": w.a.pk, "user": "newcomer@example.org", "role": Role.ADMIN})
    assert "Your role in proj-a cannot give the admin role." in response.content.decode()
    response = client.post(add, {"project": w.b.pk, "user": "newcomer", "role": Role.ANNOTATOR})
    assert "Select a valid choice" in response.content.decode()
    response = client.post(add, {"project": w.a.pk, "user": "nobody", "role": Role.ANNOTATOR})
    assert "no user has the username or e-mail &#x27;nobody&#x27;" in response.content.decode()
    assert not Membership.objects.filter(user=newcomer).exists()
    response = client.post(add, {"project": w.a.pk, "user": "newcomer@example.org", "role": Role.REVIEWER})
    assert response.status_code == 302
    assert (
        Membership.objects.get(user=newcomer).role == Role.REVIEWER
        and Membership.objects.get(user=newcomer).project == w.a
    )
    # The annotator's role changes; the project admin's membership is shown, never changed or removed.
    client.post(f"/admin/annotation/membership/{w.m_ann.pk}/change/", {"role": Role.REVIEWER})
    w.m_ann.refresh_from_db()
    assert w.m_ann.role == Role.REVIEWER
    boss_page = client.get(f"/admin/annotation/membership/{w.m_boss.pk}/change/").content.decode()
    assert 'name="role"' not in boss_page and 'name="_save"' not in boss_page
    client.post(f"/admin/annotation/membership/{w.m_boss.pk}/change/", {"role": Role.ANNOTATOR})
    assert client.post(f"/admin/annotation/membership/{w.m_boss.pk}/delete/", {"post": "yes"}).status_code == 403
    w.m_boss.refresh_from_db()
    assert w.m_boss.role == Role.ADMIN
    # The project's admin may give the admin role.
    client.force_login(w.boss)
    client.post(f"/admin/annotation/membership/{w.m_ann.pk}/change/", {"role": Role.ADMIN})
    w.m_ann.refresh_from_db()
    assert w.m_ann.role == Role.ADMIN


def test_a_researcher_removed_from_their_last_project_is_out_at_the_next_click(client, w):
    client.force_login(w.res_a)
    assert client.get("/admin/").status_code == 200
    Membership.objects.filter(user=w.res_a).update(role=Role.ANNOTATOR)
    response = client.get("/admin/annotation/item/")
    assert (response.status_code, response["Location"]) == (302, "/admin/login/?next=/admin/annotation/item/")


def test_an_annotator_gets_the_admins_refusal(client, w):
    client.force_login(w.ann)
    response = client.get("/admin/")
    assert (response.status_code, response["Location"]) == (302, "/admin/login/?next=/admin/")
    page = client.get(response["Location"]).content.decode()
    assert "You are authenticated as ann_a, but are not authorized to access this page." in page
    assert client.get(f"/admin/annotation/item/{w.items_a[0].pk}/change/").status_code == 302


def test_the_admins_login_form_lets_researchers_in_and_refuses_annotators(client, w):
    response = client.post("/admin/login/?next=/admin/", {"username": "ann_a", "password": "pw", "next": "/admin/"})
    assert response.status_code == 200
    assert "of a staff account or of a project&#x27;s researcher" in response.content.decode()
    response = client.post("/admin/login/?next=/admin/", {"username": "res_a", "password": "pw", "next": "/admin/"})
    assert (response.status_code, response["Location"]) == (302, "/admin/")
    assert client.get("/admin/").status_code == 200


def test_the_header_links_to_the_admin_for_those_who_may_use_it(client, w):
    link = '<a id="admin-link" href="/admin/">Admin</a>'
    for user, shown in ((w.res_a, True), (w.boss, True), (w.root, True), (w.ann, False)):
        client.force_login(user)
        for path in ("/", f"/projects/{w.a.slug}/"):
            assert (link in client.get(path).content.decode()) is shown, (user.username, path)
    client.logout()
    assert "admin-link" not in client.get("/accounts/login/").content.decode()
    assert Item.objects.count() == 3  # nothing above wrote


def test_membership_changes_in_the_admin_follow_the_members_rules_and_are_audited(client, w, make_user):
    """The admin saves and removes memberships through annotation.members: each change is in the
    audit trail (via admin), and the project keeps a researcher or admin, superusers included."""
    from annotation.models import AuditEvent

    newcomer = make_user("newcomer")
    client.force_login(w.res_a)
    assert (
        client.post(
            "/admin/annotation/membership/add/", {"project": w.a.pk, "user": "newcomer", "role": Role.ANNOTATOR}
        ).status_code
        == 302
    )
    client.post(f"/admin/annotation/membership/{w.m_ann.pk}/change/", {"role": Role.REVIEWER})
    added = Membership.objects.get(user=newcomer)
    assert client.post(f"/admin/annotation/membership/{added.pk}/delete/", {"post": "yes"}).status_code == 302
    events = [(e.action, e.actor, e.project, e.details) for e in AuditEvent.objects.order_by("pk")]
    assert events == [
        ("member_add", w.res_a, w.a, {"user": "newcomer", "role": Role.ANNOTATOR, "via": "admin"}),
        ("member_change", w.res_a, w.a, {"user": "ann_a", "from": Role.ANNOTATOR, "to": Role.REVIEWER, "via": "admin"}),
        ("member_remove", w.res_a, w.a, {"user": "newcomer", "role": Role.ANNOTATOR}),
    ]
    # Project B's only lead: a superuser can neither demote nor remove them here.
    client.force_login(w.root)
    page = client.post(
        f"/admin/annotation/membership/{w.m_res_b.pk}/change/",
        {"project": w.b.pk, "user": "res_b", "role": Role.ANNOTATOR},
    ).content.decode()
    assert "last researcher or admin" in page
    assert client.get(f"/admin/annotation/membership/{w.m_res_b.pk}/delete/").status_code == 403
    w.m_res_b.refresh_from_db()
    assert w.m_res_b.role == Role.RESEARCHER and AuditEvent.objects.count() == 3
    # The project page lists its members without a form to change them.
    project_page = client.get(f"/admin/annotation/project/{w.a.pk}/change/").content.decode()
    assert "ann_a" in project_page and 'name="memberships-0-role"' not in project_page
