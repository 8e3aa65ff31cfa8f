"""Release freeze, streamed export in three formats, and the export → import round trip."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.importing import items_import
from annotation.importing.samples import write_sample_dataset
from annotation.models import Item, ItemStatus, MediaAsset, Project, Release, ReleaseItem
from annotation.protocols import resolve_queries
from annotation.releases import ReleaseRefused, canonical, release_export, release_freeze
from protocols.changeit import vocabulary as changeit_vocabulary

pytestmark = pytest.mark.django_db

PROTOCOLS = ["status", "changeit", "visualtrans", "m3verse", "oscbench"]


def verified_project(make_project, tmp_path, protocol, n=6, seed=7, slug=None):
    project = make_project(slug or f"src-{protocol}", protocol, option_seed=seed)
    items_import(project=project, path=write_sample_dataset(tmp_path / f"data-{protocol}", protocol, n), verified=True)
    return project


def body(release, fmt):
    return b"".join(release_export(release, fmt))


def test_freeze_snapshots_verified_items_of_one_split_with_resolved_options(make_project, tmp_path):
    project = verified_project(make_project, tmp_path, "status", n=5)
    Item.objects.filter(external_id="status-00003").update(status=ItemStatus.ANNOTATED)
    Item.objects.filter(external_id="status-00004").update(split="dev")

    release = release_freeze(project=project, version="v1", split="test")

    assert release.item_count == 3 and release.option_seed == 7
    rows = list(ReleaseItem.objects.filter(release=release).order_by("position"))
    assert [r.payload["id"] for r in rows] == ["status-00000", "status-00001", "status-00002"]
    item = Item.objects.get(external_id="status-00001")
    assert rows[1].payload == {
        "id": "status-00001",
        **item.payload,
        "split": "test",
        "tags": [],
        "resolved": resolve_queries("status", "status-00001", item.payload, seed=7),
    }
    # Each line's media: the path it names -> the SHA-256 of the item's stored file, as at the freeze.
    assert rows[1].media == {
        item.payload["image_a"]: item.media["image_a"],
        item.payload["image_b"]: item.media["image_b"],
    }
    digest = hashlib.sha256(canonical({"protocol": "status", "split": "test", "option_seed": 7}) + b"\n")
    shipped: dict[str, str] = {}
    for r in rows:
        digest.update(canonical(r.payload) + b"\n")
        shipped.update(r.media)
    digest.update(canonical({"media": shipped}) + b"\n")  # the checksum covers the media shipped
    assert release.checksum == digest.hexdigest()


def test_changeit_resolves_with_the_vocabulary_of_the_whole_release(make_project, tmp_path):
    project = verified_project(make_project, tmp_path, "changeit", n=8)
    release = release_freeze(project=project, version="v1")
    payloads = list(Item.objects.filter(project=project).order_by("external_id").values_list("payload", flat=True))
    vocab = changeit_vocabulary(payloads)
    first = ReleaseItem.objects.get(release=release, position=0).payload
    assert first["resolved"] == resolve_queries("changeit", "changeit-00000", payloads[0], seed=7, vocabulary=vocab)
    assert (
        len(first["resolved"]["state:standard:full"]["options"]) == 8
    )  # every state label of the release (4 objects x 2)


def test_versions_are_unique_and_releases_immutable(make_project, tmp_path):
    project = verified_project(make_project, tmp_path, "m3verse", n=3)
    v1 = release_freeze(project=project, version="v1")
    Item.objects.filter(project=project).update(payload={"changed": True})
    with pytest.raises(ReleaseRefused, match="release v1 exists already; releases are immutable"):
        release_freeze(project=project, version="v1")
    with pytest.raises(ReleaseRefused, match="version: use letters"):
        release_freeze(project=project, version="v 2")
    with pytest.raises(ReleaseRefused, match="split: no verified items in split 'dev'"):
        release_freeze(project=project, version="v2", split="dev")
    assert Release.objects.filter(project=project).count() == 1
    v1.refresh_from_db()
    assert ReleaseItem.objects.get(release=v1, position=0).payload["question"].startswith("What differs")


def test_json_export_carries_header_and_items(make_project, tmp_path):
    project = verified_project(make_project, tmp_path, "visualtrans", n=4)
    release = release_freeze(project=project, version="v1")
    doc = json.loads(body(release, "json"))
    assert {
        k: doc[k] for k in ("protocol", "project", "version", "split", "item_count", "checksum", "option_seed")
    } == {
        "protocol": "visualtrans",
        "project": "src-visualtrans",
        "version": "v1",
        "split": "test",
        "item_count": 4,
        "checksum": release.checksum,
        "option_seed": 7,
    }
    assert doc["created_at"] == release.created_at.isoformat()
    assert doc["items"] == [r.payload for r in ReleaseItem.objects.filter(release=release).order_by("position")]
    assert doc["items"][0]["resolved"] == {
        "qa": {"options": doc["items"][0]["options"], "answer": "A", "format": "choice"}
    }


def test_jsonl_export_is_a_header_line_then_items(make_project, tmp_path):
    project = verified_project(make_project, tmp_path, "oscbench", n=3)
    release = release_freeze(project=project, version="v1")
    lines = body(release, "jsonl").decode().splitlines()
    assert json.loads(lines[0])["release"]["checksum"] == release.checksum
    assert [json.loads(x)["id"] for x in lines[1:]] == ["oscbench-00000", "oscbench-00001", "oscbench-00002"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_zip_round_trip_into_a_new_project_is_lossless(protocol, make_project, tmp_path):
    source = verified_project(make_project, tmp_path, protocol, n=6, seed=11)
    original = release_freeze(project=source, version="v1")
    archive = tmp_path / "export.zip"
    archive.write_bytes(body(original, "zip"))
    with zipfile.ZipFile(archive) as zf:
        assert json.loads(zf.read("release.json"))["checksum"] == original.checksum
        media_names = sorted(n for n in zf.namelist() if n not in ("release.json", "items.jsonl"))
        used = {
            p
            for it in source.items.values_list("payload", flat=True)
            for k, v in it.items()
            if k in ("image_a", "image_b", "image", "images", "video", "video_before", "video_after")
            for p in (v if isinstance(v, list) else [v])
        }
        assert media_names == sorted(used)

    call_command("import_items", "copy", str(archive), "--protocol", protocol, "--create", "--verified")
    copy = Project.objects.get(slug="copy")
    assert copy.option_seed == 11  # taken from release.json
    again = release_freeze(project=copy, version="v1")

    assert again.checksum == original.checksum and again.item_count == 6
    a = list(ReleaseItem.objects.filter(release=original).order_by("position").values_list("payload", flat=True))
    b = list(ReleaseItem.objects.filter(release=again).order_by("position").values_list("payload", flat=True))
    assert a == b
    src_media = dict(source.items.values_list("external_id", "media"))
    assert dict(copy.items.values_list("external_id", "media")) == src_media
    assert MediaAsset.objects.count() == len(
        {s for m in src_media.values() for v in m.values() for s in (v if isinstance(v, list) else [v])}
    )


def test_jsonl_export_reimports_with_the_media_folder(make_project, tmp_path):
    source = verified_project(make_project, tmp_path, "status", n=4, seed=3)
    original = release_freeze(project=source, version="v1")
    path = tmp_path / "export.jsonl"
    path.write_bytes(body(original, "jsonl"))
    copy = make_project("copy", "status", option_seed=3)
    report = items_import(project=copy, path=path, media_root=tmp_path / "data-status", verified=True)
    assert report.created == 4 and report.header["checksum"] == original.checksum
    assert release_freeze(project=copy, version="r1").checksum == original.checksum


def test_commands_freeze_and_export(make_project, tmp_path, capsys):
    project = verified_project(make_project, tmp_path, "status", n=2)
    call_command("freeze_release", project.slug, "v1")
    release = Release.objects.get(project=project)
    assert f"src-status@v1: 2 items of split test, sha256 {release.checksum}" in capsys.readouterr().out
    out = tmp_path / "out.json"
    call_command("export_release", project.slug, "v1", "-o", str(out))
    assert json.loads(out.read_text())["item_count"] == 2
    call_command("export_release", project.slug, "v1", "--jsonl")
    assert capsys.readouterr().out.count("\n") == 3
    call_command("export_release", project.slug, "v1", "-o", str(tmp_path / "out.zip"))
    assert zipfile.ZipFile(tmp_path / "out.zip").testzip() is None
    with pytest.raises(CommandError, match="exists already"):
        call_command("freeze_release", project.slug, "v1")
    with pytest.raises(CommandError, match="no release 'v9'"):
        call_command("export_release", project.slug, "v9")


def test_export_streams_in_chunks_without_building_the_file(make_project, tmp_path, monkeypatch):
    import annotation.releases as releases

    monkeypatch.setattr(releases, "FLUSH_BYTES", 4096)
    project = verified_project(make_project, tmp_path, "status", n=40)
    release = release_freeze(project=project, version="v1")
    chunks = list(release_export(release, "json"))
    assert len(chunks) > 3 and max(len(c) for c in chunks) < 4096 + 3000
    assert json.loads(b"".join(chunks))["item_count"] == 40
    zchunks = list(release_export(release, "zip"))
    assert len(zchunks) > 3
    assert zipfile.ZipFile(io.BytesIO(b"".join(zchunks))).testzip() is None


def checksum_after_reimport(tmp_path, protocol, export_args, import_args, slug="copy"):
    """export_release → import_items (new project) → freeze_release, all through the commands."""
    out = tmp_path / f"export-{slug}"
    call_command("export_release", f"src-{protocol}", "v1", "-o", str(out), *export_args)
    call_command("import_items", slug, str(out), "--create", "--verified", *import_args)
    call_command("freeze_release", slug, "v1")
    return Release.objects.get(project__slug=slug, version="v1")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_json_export_round_trip_through_the_commands(protocol, make_project, tmp_path):
    source = verified_project(make_project, tmp_path, protocol, n=5, seed=13)
    original = release_freeze(project=source, version="v1")

    # No --protocol: a project created for a release export takes its protocol and option seed.
    again = checksum_after_reimport(tmp_path, protocol, [], ["--media-root", str(tmp_path / f"data-{protocol}")])

    copy = Project.objects.get(slug="copy")
    assert (copy.protocol, copy.option_seed) == (protocol, 13)
    assert again.checksum == original.checksum and again.item_count == 5
    a = list(ReleaseItem.objects.filter(release=original).order_by("position").values_list("payload", flat=True))
    b = list(ReleaseItem.objects.filter(release=again).order_by("position").values_list("payload", flat=True))
    assert a == b


def test_jsonl_export_imported_with_create_keeps_the_option_seed(make_project, tmp_path):
    source = verified_project(make_project, tmp_path, "m3verse", n=4, seed=21)
    original = release_freeze(project=source, version="v1")
    again = checksum_after_reimport(
        tmp_path, "m3verse", ["--jsonl"], ["--protocol", "m3verse", "--media-root", str(tmp_path / "data-m3verse")]
    )
    assert Project.objects.get(slug="copy").option_seed == 21
    assert again.checksum == original.checksum


def test_changeit_items_closed_without_a_box_export_and_reimport(make_project, make_user, tmp_path):
    from annotation.models import Annotation, ReviewDecision
    from annotation.services import review_decide

    source = make_project("src-changeit", "changeit", option_seed=5)
    items_import(project=source, path=write_sample_dataset(tmp_path / "data-changeit", "changeit", 4))  # annotated
    reviewer, annotator = make_user("rev"), make_user("ann")
    nothing = Item.objects.get(project=source, external_id="changeit-00001")
    vote = Annotation.objects.create(item=nothing, annotator=annotator, result={"outcome": "nothing_to_label"})
    review_decide(item_id=nothing.pk, reviewer=reviewer, decision=ReviewDecision.ACCEPT, annotation_id=vote.pk)
    unsure = Item.objects.get(project=source, external_id="changeit-00002")
    review_decide(
        item_id=unsure.pk, reviewer=reviewer, decision=ReviewDecision.EDIT, result={"outcome": "cannot_determine"}
    )
    Item.objects.filter(project=source, status=ItemStatus.ANNOTATED).update(status=ItemStatus.VERIFIED)
    nothing.refresh_from_db()
    assert nothing.payload["bbox"] == "nothing_to_label" and "outcome" not in nothing.payload
    original = release_freeze(project=source, version="v1")

    again = checksum_after_reimport(
        tmp_path, "changeit", ["--jsonl"], ["--media-root", str(tmp_path / "data-changeit")]
    )

    assert again.checksum == original.checksum
    copied = dict(Item.objects.filter(project__slug="copy").values_list("external_id", "payload"))
    assert (copied["changeit-00001"]["bbox"], copied["changeit-00002"]["bbox"]) == (
        "nothing_to_label",
        "cannot_determine",
    )
    assert copied["changeit-00000"]["bbox"] == [40, 20, 80, 80]


def test_releases_cannot_be_deleted_in_the_admin(make_project, make_user, tmp_path, client):
    project = verified_project(make_project, tmp_path, "status", n=2)
    release = release_freeze(project=project, version="v1")
    client.force_login(make_user("root", superuser=True))

    assert client.get(f"/admin/annotation/release/{release.pk}/delete/").status_code == 403
    assert client.post(f"/admin/annotation/release/{release.pk}/delete/", {"post": "yes"}).status_code == 403
    listing = client.get("/admin/annotation/release/")
    assert listing.status_code == 200 and b"delete_selected" not in listing.content
    client.post(
        "/admin/annotation/release/", {"action": "delete_selected", "_selected_action": [release.pk], "post": "yes"}
    )
    # Nor with its project: a project that has releases cannot be deleted there either.
    assert client.get(f"/admin/annotation/project/{project.pk}/delete/").status_code == 403
    client.post(
        "/admin/annotation/project/", {"action": "delete_selected", "_selected_action": [project.pk], "post": "yes"}
    )
    assert Release.objects.filter(pk=release.pk).exists() and Project.objects.filter(pk=project.pk).exists()
    assert ReleaseItem.objects.filter(release=release).count() == 2
