"""/media/ never serves a file so that it can run in the viewer's session (no stored XSS;
docs/architecture.md, "Invariants"):
a stored asset is answered only as its recorded image/video type, every answer is sandboxed and
not sniffable, and anything else is an attachment."""

import hashlib

import pytest

from annotation.media.assets import assets_own
from annotation.models import Item, MediaAsset, Role
from tests.helpers.files import XSS_SCRIPT, polyglot_png

pytestmark = pytest.mark.django_db


def store(media_root, content: bytes, ext: str, *, kind: str, mime: str) -> MediaAsset:
    sha = hashlib.sha256(content).hexdigest()
    name = f"assets/{sha[:2]}/{sha}{ext}"
    (media_root / name).parent.mkdir(parents=True, exist_ok=True)
    (media_root / name).write_bytes(content)
    return MediaAsset.objects.create(sha256=sha, kind=kind, file=name, size_bytes=len(content), mime=mime)


@pytest.fixture
def member(make_project, make_user):
    user = make_user("ann")
    project = make_project("p", "changeit", members={user: Role.ANNOTATOR})
    return user, project


def used_by(project, asset, n: int) -> None:
    assets_own(project, [asset.pk])  # the project's import stored it
    Item.objects.create(
        project=project,
        external_id=f"i{n}",
        payload={"image": "x", "object": "door", "state": "open"},
        media={"image": asset.sha256},
    )


def assert_sandboxed(response):
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Security-Policy"] == "sandbox; default-src 'none'"


def test_an_image_named_html_is_served_as_its_recorded_image_type(client, member, settings):
    user, project = member
    asset = store(settings.MEDIA_ROOT, polyglot_png(), ".html", kind="image", mime="image/png")
    used_by(project, asset, 1)
    client.force_login(user)
    response = client.get(f"/media/{asset.file.name}")
    assert response.status_code == 200
    assert response["Content-Type"] == "image/png"
    assert "attachment" not in response.get("Content-Disposition", "")
    assert_sandboxed(response)


@pytest.mark.parametrize(
    "ext,kind,mime",
    [
        (".svg", "image", "image/svg+xml"),
        (".html", "image", "text/html"),
        (".js", "video", "application/javascript"),
        (".htm", "image", ""),
        (".html", "video", ""),
    ],
)
def test_an_asset_of_any_other_type_is_only_an_attachment(client, member, settings, ext, kind, mime):
    user, project = member
    asset = store(settings.MEDIA_ROOT, XSS_SCRIPT + ext.encode(), ext, kind=kind, mime=mime)
    used_by(project, asset, 1)
    client.force_login(user)
    response = client.get(f"/media/{asset.file.name}")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/octet-stream"
    assert response["Content-Disposition"].startswith("attachment")
    assert_sandboxed(response)


def test_a_legacy_row_without_a_type_is_served_by_a_safe_extension_of_its_kind(client, member, settings):
    user, project = member
    asset = store(settings.MEDIA_ROOT, polyglot_png(), ".png", kind="image", mime="")
    used_by(project, asset, 1)
    client.force_login(user)
    response = client.get(f"/media/{asset.file.name}")
    assert response["Content-Type"] == "image/png"
    assert_sandboxed(response)


def test_the_upload_area_is_served_as_attachments(client, make_user, make_project, settings):
    researcher = make_user("res")
    make_project("p", "status", members={researcher: Role.RESEARCHER})
    incoming = settings.MEDIA_ROOT / "incoming"
    incoming.mkdir(parents=True, exist_ok=True)
    (incoming / "page.html").write_bytes(XSS_SCRIPT)
    client.force_login(researcher)
    response = client.get("/media/incoming/page.html")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/octet-stream"
    assert response["Content-Disposition"].startswith("attachment")
    assert_sandboxed(response)


@pytest.mark.parametrize("path", ["assets/a%00b.png", "incoming/%00", "x" * 2000])
def test_odd_media_paths_are_not_found_never_a_server_error(client, member, path):
    client.force_login(member[0])
    assert client.get(f"/media/{path}").status_code == 404
