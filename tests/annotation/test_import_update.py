"""A later release of an authors' file updates the items an earlier one made (import --update,
annotation/importing/item_update.py): VisualTrans.json's ids come from each row's content, so its
second release corrects a label of the same item and adds a row; without --update the import is
refused whole, naming --update; with it, the items take the new content in the same all-or-nothing
import, the report and the audit name what changed, annotations stay, and a release frozen
before the update exports byte for byte what it did."""

from __future__ import annotations

import copy
import io
import json
import zipfile
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.importing import ImportRefused, items_import
from annotation.importing import items as item_importer
from annotation.importing.samples import sample_line, sample_media_paths, write_sample_media
from annotation.models import Annotation, AuditAction, AuditEvent, Item, ItemStatus, Release, Role
from annotation.releases import release_export
from protocols.visualtrans.formats import item_id
from tests.protocols.visualtrans.helpers import rows, write_release

pytestmark = pytest.mark.django_db

COUNT_ROW = 0  # rows()[0]: "How many blocks changed their layer?", label "3"
NEW_ROW = {
    "task_type": "count",
    "scene": "legos",
    "images": ["legos/legos_9_start.jpg", "legos/legos_9_end.jpg"],
    "question": "How many blocks were moved?",
    "label": "2",
}


def first_release() -> list[dict]:
    return rows()


def second_release() -> list[dict]:
    """The authors' correction: the count row's label 3 is 4; one row added at the end."""
    later = copy.deepcopy(rows())
    later[COUNT_ROW]["label"] = "4"
    return [*later, NEW_ROW]


def count_id() -> str:
    row = rows()[COUNT_ROW]
    return item_id(row["scene"], row["images"], row["question"])


def imported(tmp_path: Path, name: str, release: list[dict]) -> Path:
    return write_release(tmp_path / name, release).parent


def run(*args: str) -> str:
    out = StringIO()
    call_command("import_items", "vt", *args, "--protocol", "visualtrans", stdout=out, stderr=StringIO())
    return out.getvalue()


def export_bytes(release: Release, tmp_path: Path, name: str) -> tuple[bytes, bytes]:
    """The release's own JSON export and its VisualTrans.json written back, as bytes."""
    own = b"".join(release_export(release, "json"))
    folder = tmp_path / name
    call_command(
        "export_release", "vt", release.version, "--format", "visualtrans", "-o", str(folder), stdout=StringIO()
    )
    return own, (folder / "VisualTrans.json").read_bytes()


def snapshot() -> dict:
    return {
        i.external_id: (i.payload, i.split, i.tags, i.media, i.is_gold, i.status)
        for i in Item.objects.filter(project__slug="vt")
    }


def test_a_later_release_is_refused_without_update_and_names_it(tmp_path):
    run(str(imported(tmp_path, "r1", first_release())), "--create", "--verified")
    before = snapshot()
    err = StringIO()
    with pytest.raises(CommandError, match="nothing was written"):
        call_command(
            "import_items",
            "vt",
            str(imported(tmp_path, "r2", second_release())),
            "--verified",
            stdout=StringIO(),
            stderr=err,
        )
    said = err.getvalue()
    assert f"item {count_id()!r} already exists in the project with different content (payload)" in said, said
    assert "--update" in said
    # All or nothing: the new row of the same file was not created either.
    assert snapshot() == before and len(before) == 8


def test_update_replaces_the_content_reports_it_and_keeps_the_frozen_release(tmp_path):
    run(str(imported(tmp_path, "r1", first_release())), "--create", "--verified")
    call_command("freeze_release", "vt", "v1", stdout=StringIO())
    v1 = Release.objects.get(project__slug="vt", version="v1")
    v1_before = export_bytes(v1, tmp_path, "v1-before")
    assert json.loads(v1_before[0])["items"]  # a release with items
    others_before = {k: v for k, v in snapshot().items() if k != count_id()}

    said = run(str(imported(tmp_path, "r2", second_release())), "--verified", "--update")

    assert "9 lines, 1 items created (verified 1), 7 unchanged, 0 promoted to verified, 1 updated" in said, said
    assert f"updated {count_id()}: payload" in said
    item = Item.objects.get(project__slug="vt", external_id=count_id())
    assert (item.payload["answer"], item.status) == (4, ItemStatus.VERIFIED)
    new = Item.objects.get(project__slug="vt", external_id=item_id("legos", NEW_ROW["images"], NEW_ROW["question"]))
    assert (new.payload["answer"], new.status) == (2, ItemStatus.VERIFIED)
    after = snapshot()
    assert {k: v for k, v in after.items() if k in others_before} == others_before  # nothing else moved
    event = AuditEvent.objects.filter(action=AuditAction.IMPORT).order_by("pk").last()
    assert (event.details["update"], event.details["updated"], event.details["created"]) == (True, 1, 1)
    assert event.details["updated_items"] == [{"id": count_id(), "fields": ["payload"]}]

    # The release frozen before the update exports exactly what it did; a new freeze has the correction.
    assert export_bytes(v1, tmp_path, "v1-after") == v1_before
    call_command("freeze_release", "vt", "v2", stdout=StringIO())
    v2 = json.loads(export_bytes(Release.objects.get(project__slug="vt", version="v2"), tmp_path, "v2")[1])
    labels = {(r["scene"], tuple(r["images"]), r["question"]): r["label"] for r in v2}
    row = rows()[COUNT_ROW]
    assert labels[(row["scene"], tuple(row["images"]), row["question"])] == "4"
    assert len(v2) == 9

    # The same later release again changes nothing.
    again = run(str(imported(tmp_path, "r2b", second_release())), "--verified", "--update")
    assert "0 items created (none), 9 unchanged, 0 promoted to verified, 0 updated" in again, again
    assert snapshot() == after


def test_an_update_is_all_or_nothing_with_the_rest_of_the_file(tmp_path):
    run(str(imported(tmp_path, "r1", first_release())), "--create", "--verified")
    before = snapshot()
    broken = second_release()
    broken.append({**NEW_ROW, "question": "How many blocks fell?", "label": "many"})  # not a count
    with pytest.raises(CommandError):
        call_command(
            "import_items",
            "vt",
            str(imported(tmp_path, "bad", broken)),
            "--update",
            stdout=StringIO(),
            stderr=StringIO(),
        )
    assert snapshot() == before


def test_status_and_annotations_of_updated_items(tmp_path, make_user):
    """A non-verified update sends a verified item back to review (annotated: its line is labelled)
    and keeps its human annotations; a discarded item stays discarded."""
    run(str(imported(tmp_path, "r1", first_release())), "--create", "--verified")
    item = Item.objects.get(project__slug="vt", external_id=count_id())
    rater = make_user("rater")
    Annotation.objects.create(item=item, annotator=rater, result={"answer": 3})
    Item.objects.filter(pk=item.pk).update(annotation_count=1)
    later = second_release()
    row = later[1]  # the layer question (row 8 repeats it): label B becomes C
    row["label"] = later[7]["label"] = "C"
    discarded = Item.objects.get(project__slug="vt", external_id=item_id(row["scene"], row["images"], row["question"]))
    Item.objects.filter(pk=discarded.pk).update(status=ItemStatus.DISCARDED)

    said = run(str(imported(tmp_path, "r2", later)), "--update")

    assert ", 2 updated;" in said, said
    item.refresh_from_db()
    discarded.refresh_from_db()
    assert (item.status, item.payload["answer"], item.annotation_count) == (ItemStatus.ANNOTATED, 4, 1)
    assert list(item.annotations.values_list("result", flat=True)) == [{"answer": 3}]
    assert (discarded.status, discarded.payload["answer"]) == (ItemStatus.DISCARDED, "C")


def zipped(folder: Path) -> io.BytesIO:
    """The release folder as the upload a browser or the client sends (a folder goes as a zip)."""
    body = io.BytesIO()
    with zipfile.ZipFile(body, "w") as zf:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                zf.write(path, path.relative_to(folder).as_posix())
    body.seek(0)
    body.name = f"{folder.name}.zip"
    return body


def test_the_api_batch_takes_update_and_reports_the_fields(tmp_path, make_user, make_project):
    res = make_user("res")
    project = make_project("vt", "visualtrans", members={res: Role.RESEARCHER})
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=res).key}")
    url = f"/api/projects/{project.slug}/imports/"

    def post(name: str, release: list[dict], **options):
        upload = zipped(imported(tmp_path, name, release))
        return api.post(url, {"files": [upload], "verified": "true", **options}, format="multipart")

    first = post("r1", first_release())
    assert first.status_code == 201, first.content
    assert "update" not in first.json()["runs"][0]["report"]  # only an import asked to update counts them
    refused = post("r2", second_release())
    assert refused.status_code == 400
    assert any("import with update" in e for f in refused.json()["files"] for e in f["errors"]), refused.json()
    done = post("r3", second_release(), update="true")
    assert done.status_code == 201, done.content
    run_data = done.json()["runs"][0]
    assert run_data["update"] is True
    report = run_data["report"]
    assert (report["created"], report["updated"], report["updated_items"]) == (
        1,
        1,
        [{"id": count_id(), "fields": ["payload"]}],
    )
    assert Item.objects.get(project=project, external_id=count_id()).payload["answer"] == 4


def changeit_lines(n: int, **changed: dict) -> list[str]:
    lines = []
    for i in range(n):
        line = sample_line("changeit", i, media=sample_media_paths("changeit", i))
        line.update(changed.get(line["id"], {}))
        lines.append(json.dumps(line) + "\n")
    return lines


@pytest.mark.django_db(transaction=True)  # the live writer's own connection commits (or rolls back) for real
def test_a_large_file_updates_in_the_live_writers_transaction(tmp_path, make_project, monkeypatch):
    """A large file streams its new rows to a second connection while it is checked; the updates
    are written in that connection's transaction, so a bad late line undoes them with the rest."""
    monkeypatch.setattr(item_importer, "LIVE_COPY_MIN_BYTES", 4096)  # "large": these few hundred lines
    project = make_project("live", "changeit")
    data = tmp_path / "data"
    write_sample_media(data, "changeit")
    path = data / "items.jsonl"
    path.write_text("".join(changeit_lines(300)))
    items_import(project=project, path=path)
    before = {i.external_id: (i.payload, i.status) for i in Item.objects.filter(project=project)}
    target = "changeit-00007"
    fixed = changeit_lines(320, **{target: {"state": "a corrected state", "tags": ["fixed"]}})

    bad = "".join(fixed) + json.dumps({"id": "late", "image": "img/gone.png", "object": "x", "state": "y"}) + "\n"
    path.write_text(bad)
    with pytest.raises(ImportRefused):
        items_import(project=project, path=path, update=True)
    assert {i.external_id: (i.payload, i.status) for i in Item.objects.filter(project=project)} == before

    path.write_text("".join(fixed))
    report = items_import(project=project, path=path, update=True)
    assert (report.created, report.updated, report.unchanged) == (20, 1, 299)
    assert report.updated_items == [{"id": target, "fields": ["payload", "tags"]}]
    item = Item.objects.get(project=project, external_id=target)
    assert (item.payload["state"], item.tags) == ("a corrected state", ["fixed"])
    assert Item.objects.filter(project=project).count() == 320


def test_a_change_made_after_the_comparison_is_not_overwritten(tmp_path, monkeypatch):
    """The status is worked out again from the locked rows when the update is written: a reviewer's
    discard (or a labelling pass) that lands after the import compared the items wins over the
    status read before it, and the pass on the old content ends."""
    run(str(imported(tmp_path, "r1", first_release())), "--create", "--verified")
    item = Item.objects.get(project__slug="vt", external_id=count_id())
    compare = item_importer._Validation.compare_existing

    def compare_then_discard(self):
        compare(self)
        # What a reviewer does between the comparison and the write.
        Item.objects.filter(pk=item.pk).update(status=ItemStatus.DISCARDED, fill_fields=["answer"])

    monkeypatch.setattr(item_importer._Validation, "compare_existing", compare_then_discard)
    said = run(str(imported(tmp_path, "r2", second_release())), "--update", "--verified")

    assert ", 1 updated;" in said, said
    item.refresh_from_db()
    assert (item.status, item.payload["answer"], item.fill_fields) == (ItemStatus.DISCARDED, 4, [])
