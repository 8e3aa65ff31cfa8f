"""/media/: only people allowed to see a file get it (members of a project owning a stored asset,
researchers for the upload area), with Range requests for video players."""

import hashlib
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation.media.assets import assets_own
from annotation.models import Item, MediaAsset, Role

pytestmark = pytest.mark.django_db

CLIP = bytes(range(200))


def stored_asset(media_root, content: bytes, ext: str, kind: str = "video") -> MediaAsset:
    """A file stored the way the importer stores it: assets/<sha[:2]>/<sha><ext>."""
    sha = hashlib.sha256(content).hexdigest()
    name = f"assets/{sha[:2]}/{sha}{ext}"
    (media_root / name).parent.mkdir(parents=True, exist_ok=True)
    (media_root / name).write_bytes(content)
    return MediaAsset.objects.create(sha256=sha, kind=kind, file=name, size_bytes=len(content))


@pytest.fixture
def clip(make_project, make_user, settings):
    """An OSCBench video used by project `p`; `q` is another project with its own image."""
    ann = make_user("ann")
    project = make_project("p", "oscbench", members={ann: Role.ANNOTATOR})
    asset = stored_asset(settings.MEDIA_ROOT, CLIP, ".mp4")
    assets_own(project, [asset.pk])  # as the project's import records it
    Item.objects.create(
        project=project, external_id="v1", payload={"video": "v.mp4", "prompt": "x"}, media={"video": asset.sha256}
    )
    other = make_project("q", "visualtrans")
    image = stored_asset(settings.MEDIA_ROOT, b"image bytes", ".png", "image")
    assets_own(other, [image.pk])
    Item.objects.create(
        project=other,
        external_id="i1",
        payload={"images": ["a.png", "b.png"]},
        media={"images": ["0" * 64, image.sha256]},
    )
    return {"ann": ann, "url": f"/media/{asset.file.name}", "other_url": f"/media/{image.file.name}", "q": other}


def test_a_member_gets_the_media_of_their_project_with_range_requests(client, clip):
    client.force_login(clip["ann"])
    whole = client.get(clip["url"])
    assert whole.status_code == 200
    assert b"".join(whole.streaming_content) == CLIP
    assert whole["Accept-Ranges"] == "bytes"

    part = client.get(clip["url"], HTTP_RANGE="bytes=10-19")
    assert part.status_code == 206
    assert part["Content-Range"] == "bytes 10-19/200"
    assert b"".join(part.streaming_content) == bytes(range(10, 20))

    tail = client.get(clip["url"], HTTP_RANGE="bytes=-5")
    assert b"".join(tail.streaming_content) == bytes(range(195, 200))
    assert client.get(clip["url"], HTTP_RANGE="bytes=500-").status_code == 416


def test_media_needs_login(client, clip):
    response = client.get(clip["url"])
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_other_projects_media_are_hidden(client, clip, make_user, make_project):
    # A member of project p sees nothing of project q; a user in no project sees nothing at all.
    client.force_login(clip["ann"])
    assert client.get(clip["other_url"]).status_code == 404
    client.force_login(make_user("nobody"))
    assert client.get(clip["url"]).status_code == 404
    assert client.get(clip["other_url"]).status_code == 404
    # A project that owns no asset sees none (but the superuser sees them all).
    stranger = make_user("stranger")
    make_project("r", "oscbench", members={stranger: Role.ADMIN})
    client.force_login(stranger)
    assert client.get(clip["url"]).status_code == 404


def test_every_role_of_an_owning_project_gets_its_media(client, clip, make_user):
    reviewer = make_user("rev")
    clip["q"].memberships.create(user=reviewer, role=Role.REVIEWER)
    client.force_login(reviewer)
    assert client.get(clip["other_url"]).status_code == 200  # an image of q's VisualTrans items
    assert client.get(clip["url"]).status_code == 404


def test_the_check_is_one_query(client, clip):
    client.force_login(clip["ann"])
    client.get("/")  # session and user loaded once before counting
    with CaptureQueriesContext(connection) as queries:
        response = client.get(clip["url"])
    assert response.status_code == 200
    ours = [q["sql"] for q in queries.captured_queries if "annotation_" in q["sql"]]
    assert len(ours) == 1 and "annotation_mediaasset" in ours[0] and "annotation_projectasset" in ours[0]
    assert "annotation_item " not in ours[0]  # the items' media JSON is not asked


def test_the_check_uses_the_owners_index_when_a_project_owns_many_assets(clip):
    # With many assets owned, scanning the owners for the asset would cost every image request
    # more and more; the unique (asset, project) index answers the EXISTS instead.
    from annotation.media.access import asset_check_sql

    project = Item.objects.get(external_id="v1").project
    assets = MediaAsset.objects.bulk_create(
        MediaAsset(sha256=hashlib.sha256(str(i).encode()).hexdigest(), kind="image", file=f"assets/x/{i}.png")
        for i in range(5000)
    )
    assets_own(project, [a.pk for a in assets])
    sql, params = asset_check_sql(clip["ann"], clip["url"].removeprefix("/media/"))
    with connection.cursor() as cur:
        cur.execute("ANALYZE annotation_projectasset")
        cur.execute("SET LOCAL enable_seqscan = off")
        cur.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cur.fetchall())
    assert re.search(r"Index (Only )?Scan using projectasset_unique_asset_project on annotation_projectasset", plan), (
        plan
    )


def test_upload_area_is_for_researchers(client, clip, make_user, make_project, settings):
    (settings.MEDIA_ROOT / "incoming").mkdir()
    (settings.MEDIA_ROOT / "incoming" / "raw.png").write_bytes(b"raw upload")
    client.force_login(clip["ann"])  # an annotator
    assert client.get("/media/incoming/raw.png").status_code == 403
    assert client.get("/media/incoming/missing.png").status_code == 403  # says nothing about what is there
    client.force_login(make_user("outsider"))
    assert client.get("/media/incoming/raw.png").status_code == 403

    researcher = make_user("res")
    make_project("lab", "status", members={researcher: Role.RESEARCHER})
    client.force_login(researcher)
    ok = client.get("/media/incoming/raw.png")
    assert ok.status_code == 200 and b"".join(ok.streaming_content) == b"raw upload"
    assert client.get("/media/incoming/missing.png").status_code == 404
    assert client.get(clip["url"]).status_code == 404  # researcher elsewhere: still not p's assets


def test_other_areas_and_the_superuser(client, clip, make_user, settings):
    (settings.MEDIA_ROOT / "exports").mkdir()
    (settings.MEDIA_ROOT / "exports" / "results.json").write_text("{}")
    client.force_login(clip["ann"])
    assert client.get("/media/exports/results.json").status_code == 404
    client.force_login(make_user("root", superuser=True))
    assert client.get("/media/exports/results.json").status_code == 200
    assert client.get(clip["url"]).status_code == 200
    assert client.get(clip["other_url"]).status_code == 200


def test_media_paths_cannot_leave_the_media_root(client, make_user, settings, tmp_path):
    (tmp_path / "secret.txt").write_text("no")
    client.force_login(make_user("root", superuser=True))
    assert client.get("/media/../secret.txt").status_code == 404
    assert client.get("/media/%2e%2e/secret.txt").status_code == 404
    assert client.get("/media/missing.png").status_code == 404
