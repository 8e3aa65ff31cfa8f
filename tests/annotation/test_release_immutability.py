"""A frozen release never changes (annotation/releases.py): after the freeze, everything a person
or a service can edit is edited (the admin's item form as a researcher and as a superuser, the
project's fields, annotating, amending and reviewing the split's other items, a re-import of the
same ids with other content and media, new items naming the release's paths with other bytes,
and item rows rewritten underneath, media pointed at another project's files), and every export
(JSON, JSONL, zip, Hugging Face, COCO for boxes, lmms-eval, the authors' formats through
release_media_opener) is byte-identical to before, and its checksum still verifies, also from the
zip's own bytes."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import pytest
from django.test import Client
from PIL import Image

from annotation.amend import annotation_amend
from annotation.importing import ImportRefused, items_import
from annotation.importing.samples import make_video, write_sample_dataset
from annotation.interchange.checksum import zip_checksum
from annotation.interchange.lmms_eval import lmms_export
from annotation.models import AuditEvent, Item, ItemStatus, Project, Release, Role
from annotation.protocols import MEDIA_FIELDS
from annotation.releases import (
    ReleaseRefused,
    export_formats,
    release_checksum,
    release_export,
    release_freeze,
    release_lines,
    release_media_map,
    release_media_opener,
)
from annotation.services import review_decide
from protocols import registry
from protocols.kit.releases import FormatRefused
from tests.helpers.admin import admin_form_data, admin_save, admin_url
from tests.helpers.studies import do_tasks

from .work_factories import valid_result

pytestmark = pytest.mark.django_db

PROTOCOLS = ["status", "changeit", "visualtrans", "m3verse", "oscbench"]
WORKFLOW = {"status": "quintuplet", "changeit": "box", "visualtrans": "qa", "m3verse": "qa", "oscbench": "rating"}


def folder_bytes(folder: Path, tag: str) -> dict[str, bytes]:
    return {f"{tag}:{p.relative_to(folder)}": p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def every_export(release, tmp_path: Path, tag: str) -> dict[str, bytes]:
    """Each export of the release, by format (and file, for the folder formats)."""
    protocol = registry.get(release.project.protocol)
    out = {fmt: b"".join(release_export(release, fmt)) for fmt in export_formats(protocol.name)}
    if protocol.lmms_module:
        lmms_export(release, tmp_path / f"lmms-{tag}")
        out.update(folder_bytes(tmp_path / f"lmms-{tag}", "lmms-eval"))
    for fmt in protocol.formats:
        if fmt.kind != "items" or not fmt.writes:
            continue
        folder = tmp_path / f"{fmt.name}-{tag}"
        try:
            fmt.write(list(release_lines(release)), folder, open_media=release_media_opener(release))
        except FormatRefused as exc:  # sample lines the authors' shape cannot hold: refused alike
            out[fmt.name] = f"refused: {exc}".replace(str(folder), "OUT").encode()
            continue
        out.update(folder_bytes(folder, fmt.name))
    opener = release_media_opener(release)
    for path in release_media_map(release):
        with opener(path) as fh:
            out[f"media:{path}"] = fh.read()
    return out


def assert_unchanged(release, before: dict[str, bytes], tmp_path: Path) -> None:
    after = every_export(release, tmp_path, "after")
    assert sorted(after) == sorted(before)
    changed = [name for name in before if after[name] != before[name]]
    assert changed == [], f"exports that changed after the freeze: {changed}"
    assert release_checksum(release) == release.checksum
    fields = MEDIA_FIELDS[release.project.protocol]
    assert zip_checksum(io.BytesIO(after["zip"]), fields) == release.checksum


def freeze(make_project, tmp_path, protocol, *, members=None, n=6, pending=0):
    project = make_project(
        f"rel-{protocol}",
        protocol,
        option_seed=5,
        annotations_per_item=1,
        members=members,
        description="The first description.",
        settings={"license": "cc-by-4.0"} if protocol != "oscbench" else {},
    )
    items_import(project=project, path=write_sample_dataset(tmp_path / "data", protocol, n), verified=True)
    keep = Item.objects.filter(project=project).order_by("external_id")
    waiting = [i.pk for i in keep[n - pending :]] if pending else []
    Item.objects.filter(pk__in=waiting).update(status=ItemStatus.PENDING)
    return project, release_freeze(project=project, version="v1")


def other_project_media(make_project, tmp_path, protocol) -> dict:
    """The media of an item of another project, imported from other bytes."""
    other = make_project(f"other-{protocol}", protocol)
    path = write_sample_dataset(tmp_path / "other", protocol, 1, start=40, distinct=1)
    # Other bytes at the same paths (the sample drawings repeat across projects): a changed pixel
    # in each image, another scene in each video.
    for media in sorted((tmp_path / "other").rglob("*")):
        if media.suffix == ".png" or media.suffix in (".jpg", ".jpeg"):
            with Image.open(media) as picture:
                changed = picture.convert("RGB")
            changed.putpixel((0, 0), (1, 2, 3))
            changed.save(media)
        elif media.suffix == ".mp4":
            make_video(media, 11)
    items_import(project=other, path=path, verified=True)
    return Item.objects.get(project=other).media


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_no_edit_after_the_freeze_changes_any_export(protocol, make_project, make_user, tmp_path):
    researcher, root = make_user("res"), make_user("root", superuser=True)
    project, release = freeze(make_project, tmp_path, protocol, members={researcher: Role.RESEARCHER})
    before = every_export(release, tmp_path, "before")
    assert release_checksum(release) == release.checksum
    assert zip_checksum(io.BytesIO(before["zip"]), MEDIA_FIELDS[protocol]) == release.checksum
    stolen = other_project_media(make_project, tmp_path, protocol)
    items = list(Item.objects.filter(project=project).order_by("external_id"))
    # The stolen media really are other files (a form that took them would change the item's).
    assert all(stolen != item.media for item in items[:2])

    # The admin's item form, as the project's researcher and as a superuser: content is read only.
    for who, item in ((researcher, items[0]), (root, items[1])):
        client = Client()
        client.force_login(who)
        data = admin_form_data(client, item)
        edited = {**item.payload, "note": "edited in the admin"}
        posted = {
            **data,
            "payload": json.dumps(edited),
            "media": json.dumps(stolen),
            "split": "dev",
            "tags": json.dumps(["edited"]),
            "external_id": "renamed",
        }
        assert client.post(admin_url(item), posted).status_code == 302
        stored = Item.objects.get(pk=item.pk)
        content = ("payload", "media", "split", "tags", "external_id")
        assert [getattr(stored, f) for f in content] == [getattr(item, f) for f in content]
    # The project's own fields the exports show.
    Project.objects.filter(pk=project.pk).update(
        name="Renamed", description="Another description.", settings={}, slug=f"moved-{protocol}"
    )
    # Item rows rewritten underneath (a shell, a service that forgot the release): other payloads,
    # each item's media pointed at the files of the next one, other split and tags.
    for item, after in zip(items, items[1:] + items[:1]):
        assert after.media != item.media
        Item.objects.filter(pk=item.pk).update(
            payload={**item.payload, "note": "rewritten"}, media=after.media, split="dev", tags=["rewritten"]
        )

    release.refresh_from_db()
    assert_unchanged(release, before, tmp_path)


def test_services_after_the_freeze_change_no_export(make_project, make_user, tmp_path):
    """Annotating, amending and reviewing the split's other items, importing again (the same ids
    with other content and media: refused; new ids naming the release's paths with other bytes:
    imported) and the project's form (name, description, license, citation) leave the release as
    it was."""
    annotator, reviewer, root = make_user("ann"), make_user("rev"), make_user("root", superuser=True)
    members = {annotator: Role.ANNOTATOR, reviewer: Role.REVIEWER}
    project, release = freeze(make_project, tmp_path, "status", members=members, pending=2)
    before = every_export(release, tmp_path, "before")

    first, second = do_tasks(project, annotator, [valid_result("quintuplet"), valid_result("quintuplet")])
    annotation_amend(annotation_id=first.pk, user=annotator, result=valid_result("quintuplet", 1))
    review_decide(item_id=first.item_id, reviewer=reviewer, decision="accept", annotation_id=first.pk)
    edit = {**valid_result("quintuplet"), "state_a": "a jar, edited by the reviewer"}
    review_decide(item_id=second.item_id, reviewer=reviewer, decision="edit", annotation_id=second.pk, result=edit)
    assert Item.objects.filter(project=project, status=ItemStatus.VERIFIED).count() == 6

    # The same ids again, with other text and other image bytes under the same paths: refused.
    data = tmp_path / "again"
    path = write_sample_dataset(data, "status", 6, distinct=2)
    lines = [json.loads(t) for t in path.read_text().splitlines()]
    path.write_text("".join(json.dumps({**line, "state_a": "changed"}) + "\n" for line in lines))
    with pytest.raises(ImportRefused, match="already exists in the project with different content"):
        items_import(project=project, path=path, verified=True)
    # New ids naming the release's media paths, with other bytes there: imported beside it.
    for name in {line["image_a"] for line in lines}:
        (data / name).write_bytes(other_png(name))
    path.write_text("".join(json.dumps({**line, "id": line["id"] + "-b"}) + "\n" for line in lines))
    items_import(project=project, path=path, verified=True)
    # The project's own form (audited), with what the dataset card and headers show.
    client = Client()
    client.force_login(root)
    project.refresh_from_db()
    project.name, project.description = "Renamed", "Another description."
    typed = {"license": "mit", "citation": "@misc{other, title={Other}}"}
    assert admin_save(client, project, typed).status_code == 302
    assert Project.objects.get(pk=project.pk).settings == typed

    release.refresh_from_db()
    assert_unchanged(release, before, tmp_path)
    # A release ships one file per path: the new items name v1's paths for other bytes.
    with pytest.raises(ReleaseRefused, match=r"name .+ for two different files; a release ships one file per path"):
        release_freeze(project=project, version="v2")
    assert list(Release.objects.filter(project=project).values_list("version", flat=True)) == ["v1"]


def other_png(seed: str) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    colour = tuple(hashlib.sha256(seed.encode()).digest()[:3])
    Image.new("RGB", (64, 48), colour).save(buf, format="PNG")
    return buf.getvalue()


def test_an_admin_item_edit_is_refused_and_nothing_is_audited(make_project, make_user, tmp_path):
    researcher = make_user("res")
    project, _ = freeze(make_project, tmp_path, "visualtrans", members={researcher: Role.RESEARCHER}, n=2)
    item = Item.objects.filter(project=project).first()
    client = Client()
    client.force_login(researcher)
    page = client.get(admin_url(item)).content.decode()
    for name in ("payload", "media", "split", "tags", "external_id", "project"):
        assert f'name="{name}"' not in page, name  # shown, not editable
    assert client.get("/admin/annotation/item/add/").status_code == 403
    root = Client()
    root.force_login(make_user("root", superuser=True))
    assert root.get("/admin/annotation/item/add/").status_code == 403  # items come through the import
    assert not AuditEvent.objects.filter(action="admin_change").exists()
