"""The admin's inference-job pages answer for everyone who may open them (the
change page once was a 500, `TypeError: get_form() got multiple values for keyword argument 'fields'`)."""

import pytest

from annotation.models import Role
from inference import services
from inference.models import InferenceJob
from tests.inference import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def job(make_project, tmp_path):
    project = make_project("st", "status")
    release = factories.release_of(project, factories.status_items(project, 2, tmp_path))
    endpoint = services.endpoint_create(name="R", backend="random")
    return InferenceJob.objects.create(
        endpoint=endpoint,
        model_name="R",
        project=project,
        release=release,
        protocol="status",
        status="finished",
        total_queries=12,
        done_queries=12,
    )


def test_a_superuser_opens_the_job_change_history_and_delete_pages(client, make_user, job):
    client.force_login(make_user("root", superuser=True))
    page = client.get(f"/admin/inference/inferencejob/{job.pk}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    # Everything is shown read only: no input for a model field, no parameter field of the add form.
    assert '<div class="readonly">Finished</div>' in html
    assert 'name="temperature"' not in html and 'name="project"' not in html and 'name="_save"' not in html
    assert client.get(f"/admin/inference/inferencejob/{job.pk}/history/").status_code == 200
    assert client.get(f"/admin/inference/inferencejob/{job.pk}/delete/").status_code == 200


def test_saving_the_change_page_changes_nothing(client, make_user, job):
    client.force_login(make_user("root", superuser=True))
    resp = client.post(f"/admin/inference/inferencejob/{job.pk}/change/", {"_save": "Save"})
    assert resp.status_code == 302
    job.refresh_from_db()
    assert (job.status, job.done_queries, job.project.slug) == ("finished", 12, "st")


def test_a_researcher_of_the_project_opens_the_job_change_page(client, make_user, make_project, job):
    researcher = make_user("res")
    job.project.memberships.create(user=researcher, role=Role.RESEARCHER)
    client.force_login(researcher)
    assert client.get(f"/admin/inference/inferencejob/{job.pk}/change/").status_code == 200


def test_cancel_and_retry_from_the_admin_are_audited_as_the_researcher(client, make_user, job):
    from annotation.models import AuditAction, AuditEvent

    researcher = make_user("res")
    job.project.memberships.create(user=researcher, role=Role.RESEARCHER)
    InferenceJob.objects.filter(pk=job.pk).update(status="running")
    client.force_login(researcher)
    client.post("/admin/inference/inferencejob/", {"action": "cancel_jobs", "_selected_action": [job.pk]})
    job.refresh_from_db()
    assert job.status == "cancelled"
    client.post("/admin/inference/inferencejob/", {"action": "retry_failed", "_selected_action": [job.pk]})
    events = list(
        AuditEvent.objects.filter(project=job.project, object_id=str(job.pk))
        .order_by("pk")
        .values_list("action", "actor__username")
    )
    assert events == [(AuditAction.CANCEL, "res"), (AuditAction.RETRY, "res")]
