"""`manage.py demo --no-serve` against PostgreSQL: users, sample projects, releases; idempotent."""

from __future__ import annotations

import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command
from django.http import HttpRequest

from annotation.models import Annotation, Item, MediaAsset, Membership, Project, Release
from inference.models import InferenceJob, ModelEndpoint

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def census():
    return {
        "projects": sorted(Project.objects.values_list("slug", "protocol")),
        "items": sorted(Item.objects.values_list("project__slug", "status").order_by().distinct()),
        "item_count": Item.objects.count(),
        "assets": MediaAsset.objects.count(),
        "members": Membership.objects.count(),
        "ratings": Annotation.objects.filter(source="import").count(),
        "releases": sorted(Release.objects.values_list("project__slug", "version", "item_count", "checksum")),
        "jobs": sorted(InferenceJob.objects.values_list("project__slug", "model_name", "status", "total_queries")),
    }


def test_demo_sets_up_every_workflow_and_is_idempotent(tmp_path, capsys):
    call_command("demo", "--no-serve", "--data-dir", str(tmp_path / "demo"))
    out = capsys.readouterr().out

    assert "researcher  / researcher-demo" in out and "annotator3  / annotator3-demo" in out
    assert authenticate(HttpRequest(), username="annotator2", password="annotator2-demo") is not None
    assert authenticate(HttpRequest(), username="admin", password="admin-demo").is_superuser
    first = census()
    assert first["projects"] == [
        ("demo-arena", "arena"),
        ("demo-changeit", "changeit"),
        ("demo-m3verse", "m3verse"),
        ("demo-oscbench", "oscbench"),
        ("demo-status", "status"),
        ("demo-visualtrans", "visualtrans"),
    ]
    # 32 items per QA or box project (4 raw, 4 labeled, 24 verified), 30 OSCBench videos (6 raw),
    # 30 arena pairs (6 raw); imported human work: 3 raters x 24 videos, 2 blind answers x 24
    # questions in two projects, 3 raters' votes on 24 arena pairs.
    assert first["item_count"] == 4 * 32 + 30 + 30
    assert first["members"] == 35 + 7, first["members"]  # the arena: its 3 raters and the 4 demo people
    assert first["ratings"] == 72 + 2 * 48 + 3 * 24, first["ratings"]
    assert authenticate(HttpRequest(), username="lead", password="lead-demo").is_superuser is False
    assert set(Membership.objects.filter(user__username="lead").values_list("role", flat=True)) == {"admin"}
    for slug in ("demo-status", "demo-changeit", "demo-visualtrans", "demo-m3verse"):
        statuses = dict(
            Item.objects.filter(project__slug=slug).values_list("status").annotate().values_list("status", "project")
        )
        assert set(statuses) == {"pending", "annotated", "verified"}
    assert [(slug, version, n) for slug, version, n, _ in first["releases"]] == [
        ("demo-arena", "v1", 24),
        ("demo-changeit", "v1", 24),
        ("demo-m3verse", "v1", 24),
        ("demo-oscbench", "v1", 24),
        ("demo-status", "v1", 24),
        ("demo-visualtrans", "v1", 24),
    ]
    # Every board has made-up models of different skill (a rating protocol's: judges), imported once.
    models = {}
    for slug, model, status, total in first["jobs"]:
        assert status == "finished" and total > 0
        models.setdefault(slug, []).append(model)
    assert models == {
        "demo-changeit": ["demo-vlm-base", "demo-vlm-large", "demo-vlm-small"],
        "demo-m3verse": ["demo-vlm-base", "demo-vlm-large", "demo-vlm-small"],
        "demo-oscbench": ["demo-judge-careful", "demo-judge-hasty"],
        "demo-status": ["demo-vlm-base", "demo-vlm-large", "demo-vlm-small"],
        "demo-visualtrans": ["demo-vlm-base", "demo-vlm-large", "demo-vlm-small"],
    }
    videos = MediaAsset.objects.filter(kind="video")
    assert videos.count() > 0 and all(v.duration and v.fps and v.frame_count for v in videos)

    # The shared endpoint a researcher starts a job on from the admin.
    endpoints = list(ModelEndpoint.objects.values_list("name", "backend", "project", "options"))
    assert endpoints == [("random-baseline", "random", None, {"seed": 0})]

    # Run again: nothing changes, and a password changed since is kept.
    lead = authenticate(HttpRequest(), username="lead", password="lead-demo")
    lead.set_password("changed-by-lead")
    lead.save()
    call_command("demo", "--no-serve", "--data-dir", str(tmp_path / "demo"))
    assert census() == first
    assert list(ModelEndpoint.objects.values_list("name", "backend", "project", "options")) == endpoints
    assert authenticate(HttpRequest(), username="lead", password="changed-by-lead") is not None
