"""COCO export of a box release: pycocotools reads it with every box, category and image size
intact; "nothing to label" / "cannot determine" are image attributes; the zip carries the images;
other protocols are refused (command, API) and the page does not offer it."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from pycocotools.coco import COCO
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.importing import items_import
from annotation.importing.samples import write_sample_dataset
from annotation.models import Item, MediaAsset, Role
from annotation.releases import release_export, release_freeze

pytestmark = pytest.mark.django_db


def box_release(make_project, tmp_path, n=7, **members):
    project = make_project("boxes", "changeit", members=members or None)
    path = write_sample_dataset(tmp_path / "data", "changeit", n)
    lines = [json.loads(t) for t in path.read_text().splitlines()]
    # Varied boxes, and two items answered without a box.
    for k, line in enumerate(lines):
        line["bbox"] = [3 + k, 5 + 2 * k, 30 + k, 20 + k]
    lines[2]["bbox"] = "nothing_to_label"
    lines[5]["bbox"] = "cannot_determine"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    items_import(project=project, path=path, verified=True)
    return project, release_freeze(project=project, version="v1"), lines


def load_coco(data: bytes, tmp_path) -> COCO:
    target = tmp_path / "coco.json"
    target.write_bytes(data)
    return COCO(str(target))


def test_coco_export_loads_in_pycocotools_with_every_box(make_project, tmp_path):
    project, release, lines = box_release(make_project, tmp_path)
    coco = load_coco(b"".join(release_export(release, "coco")), tmp_path)

    images = coco.loadImgs(coco.getImgIds())
    assert [img["attributes"]["id"] for img in images] == [line["id"] for line in lines]
    assets = {a.sha256: (a.width, a.height) for a in MediaAsset.objects.all()}
    sizes = {i.external_id: assets[i.media["image"]] for i in Item.objects.filter(project=project)}
    for img, line in zip(images, lines):
        assert img["file_name"] == line["image"]
        assert (img["width"], img["height"]) == sizes[line["id"]] and img["width"] > 0
        anns = coco.loadAnns(coco.getAnnIds(imgIds=[img["id"]]))
        if isinstance(line["bbox"], str):
            assert anns == []
            assert img["attributes"]["outcome"] == line["bbox"]
            continue
        assert "outcome" not in img["attributes"]
        (ann,) = anns
        x, y, w, h = line["bbox"]
        assert ann["bbox"] == [x, y, w, h]
        assert ann["area"] == w * h and ann["iscrowd"] == 0
        (cat,) = coco.loadCats([ann["category_id"]])
        assert (cat["supercategory"], cat["name"]) == (line["object"], line["state"])

    boxed = [line for line in lines if not isinstance(line["bbox"], str)]
    assert len(coco.getAnnIds()) == len(boxed) == 5
    expected = sorted({(line["object"], line["state"]) for line in boxed})
    cats = coco.loadCats(coco.getCatIds())
    assert [(c["supercategory"], c["name"]) for c in cats] == expected
    assert [c["id"] for c in cats] == list(range(1, len(expected) + 1))
    # pycocotools' own use of the boxes: a mask of the box's polygon covers about its area.
    ann = coco.loadAnns(coco.getAnnIds())[0]
    assert abs(int(coco.annToMask(ann).sum()) - ann["area"]) <= ann["bbox"][2] + ann["bbox"][3] + 1


def test_coco_zip_from_the_command_carries_the_images(make_project, tmp_path):
    _, release, lines = box_release(make_project, tmp_path)
    out = tmp_path / "boxes.zip"
    call_command("export_release", "boxes", "v1", "--format", "coco", "-o", str(out))
    with zipfile.ZipFile(out) as zf:
        names = set(zf.namelist())
        doc = json.loads(zf.read("annotations.json"))
        assert {line["image"] for line in lines} <= names
        first = zf.read(lines[0]["image"])
    assert first[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(doc["images"]) == len(lines) and len(doc["annotations"]) == 5
    plain = tmp_path / "boxes.json"
    call_command("export_release", "boxes", "v1", "--format", "coco", "-o", str(plain))
    assert json.loads(plain.read_bytes()) == doc


def test_coco_is_refused_for_other_protocols(make_project, make_user, tmp_path):
    res = make_user("res")
    project = make_project("st", "status", members={res: Role.RESEARCHER})
    items_import(project=project, path=write_sample_dataset(tmp_path / "d", "status", 3), verified=True)
    release_freeze(project=project, version="v1")
    with pytest.raises(CommandError, match="box projects"):
        call_command("export_release", "st", "v1", "--format", "coco", "-o", str(tmp_path / "x.json"))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=res).key}")
    refused = client.get("/api/projects/st/releases/v1/export/?fmt=coco")
    assert refused.status_code == 400 and "coco" not in refused.json()["detail"]
    client.force_login(res)
    page = client.get("/projects/st/releases/")
    assert b"fmt=coco" not in page.content and b"fmt=jsonl" in page.content


def test_coco_download_through_the_api_and_page(make_project, make_user, tmp_path):
    res = make_user("res")
    project = make_project("boxes2", "changeit", members={res: Role.RESEARCHER})
    items_import(project=project, path=write_sample_dataset(tmp_path / "d", "changeit", 4), verified=True)
    release_freeze(project=project, version="v2")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=res).key}")
    response = client.get("/api/projects/boxes2/releases/v2/export/?fmt=coco")
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="boxes2-v2.coco.json"'
    doc = json.loads(b"".join(response.streaming_content))
    assert len(doc["images"]) == 4 and len(doc["annotations"]) == 4
    zipped = client.get("/api/projects/boxes2/releases/v2/export/?fmt=coco_zip")
    assert zipped.status_code == 200 and zipped["Content-Type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(b"".join(zipped.streaming_content))) as zf:
        assert "annotations.json" in zf.namelist()
    client.force_login(res)
    page = client.get("/projects/boxes2/releases/")
    assert b"fmt=coco" in page.content and b"fmt=coco_zip" in page.content
