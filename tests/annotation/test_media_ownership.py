"""Who may fetch a stored media file is decided from the assets a project owns (its imports stored
those bytes: annotation/media/assets.py, annotation/media/access.py), never from an item's media
JSON: an item pointed at another project's SHA-256 opens nothing, and the answer for another
project's file equals the answer for a file that does not exist. A Hugging Face folder import
reads only files inside the folder, whatever links lie on the way (annotation/interchange/hf.py)."""

from __future__ import annotations

import hashlib
import io
import json
import shutil

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from annotation.importing import items_import
from annotation.importing.samples import sample_line, write_sample_dataset
from annotation.interchange.hf import HFFolderError, hf_export, hf_folder_to_jsonl
from annotation.models import Item, MediaAsset, Project, ProjectAsset, Role
from annotation.releases import release_freeze
from tests.helpers.admin import admin_form_data, admin_url

pytestmark = pytest.mark.django_db


def png(seed: str) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (160, 120), tuple(hashlib.sha256(seed.encode()).digest()[:3])).save(buf, format="PNG")
    return buf.getvalue()


def imported(project: Project, folder, images: dict[str, bytes]) -> list[Item]:
    """Items of `project`, one per image, through the importer (which records what it owns)."""
    folder.mkdir(parents=True)
    lines = []
    for n, (name, data) in enumerate(images.items()):
        (folder / name).write_bytes(data)
        lines.append(json.dumps(sample_line("changeit", n, media={"image": name})))
    (folder / "items.jsonl").write_text("\n".join(lines) + "\n")
    items_import(project=project, path=folder / "items.jsonl")
    return list(Item.objects.filter(project=project).order_by("external_id"))


def asset_url(sha: str) -> str:
    return "/media/" + MediaAsset.objects.get(sha256=sha).file.name


def answer(response) -> tuple:
    """Everything a client learns from a response: status, headers, body."""
    body = b"".join(response.streaming_content) if response.streaming else response.content
    return response.status_code, sorted(response.headers.items()), body


@pytest.fixture
def two_labs(make_project, make_user, tmp_path):
    alice, mallory = make_user("alice"), make_user("mallory")
    private = make_project("private", "changeit", members={alice: Role.ANNOTATOR})
    attacker = make_project("attacker", "changeit", members={mallory: Role.RESEARCHER})
    (secret,) = imported(private, tmp_path / "private", {"secret.png": png("private")})
    (bait,) = imported(attacker, tmp_path / "attacker", {"bait.png": png("attacker")})
    return alice, mallory, secret, bait


def test_an_item_pointed_at_another_projects_sha_opens_nothing(two_labs):
    alice, mallory, secret, bait = two_labs
    url = asset_url(secret.media["image"])
    owner, intruder = Client(), Client()
    owner.force_login(alice)
    intruder.force_login(mallory)
    assert owner.get(url).status_code == 200  # the project whose import stored it
    assert intruder.get(url).status_code == 404

    # The admin form no longer takes an item's media...
    data = admin_form_data(intruder, bait)
    intruder.post(admin_url(bait), {**data, "media": json.dumps(secret.media)})
    assert Item.objects.get(pk=bait.pk).media == bait.media
    # ...and an item row that names it anyway (written underneath) opens nothing either.
    Item.objects.filter(pk=bait.pk).update(media=secret.media)
    assert intruder.get(url).status_code == 404
    assert owner.get(url).status_code == 200


def test_another_projects_file_gets_the_answer_of_a_file_that_does_not_exist(two_labs):
    alice, mallory, secret, bait = two_labs
    Item.objects.filter(pk=bait.pk).update(media=secret.media)
    intruder = Client()
    intruder.force_login(mallory)
    exists = asset_url(secret.media["image"])
    missing_sha = hashlib.sha256(b"no such file").hexdigest()
    missing = f"/media/assets/{missing_sha[:2]}/{missing_sha}.png"

    assert answer(intruder.get(exists)) == answer(intruder.get(missing))
    assert answer(intruder.get(exists, HTTP_RANGE="bytes=0-9")) == answer(intruder.get(missing, HTTP_RANGE="bytes=0-9"))
    assert intruder.get(exists).status_code == 404


def test_a_project_that_imports_the_same_bytes_owns_them_too(two_labs, make_project, make_user, tmp_path):
    alice, mallory, secret, bait = two_labs
    bob = make_user("bob")
    twin = make_project("twin", "changeit", members={bob: Role.REVIEWER})
    (copy,) = imported(twin, tmp_path / "twin", {"same.png": png("private")})  # the very same bytes
    assert copy.media == secret.media
    owners = ProjectAsset.objects.filter(asset__sha256=copy.media["image"]).values_list("project__slug", flat=True)
    assert sorted(owners) == ["private", "twin"]
    client = Client()
    client.force_login(bob)
    assert client.get(asset_url(copy.media["image"])).status_code == 200


@pytest.fixture
def video_folder(make_project, tmp_path):
    """A Hugging Face dataset folder of an OSCBench release (videos as files under media/vid/)."""
    project = make_project("osc", "oscbench", option_seed=3)
    items_import(project=project, path=write_sample_dataset(tmp_path / "data", "oscbench", 2), verified=True)
    out = tmp_path / "hf"
    hf_export(release_freeze(project=project, version="v1"), out)
    assert (out / "media" / "vid" / "o0.mp4").is_file()
    return out


def test_a_dataset_folder_with_a_linked_folder_in_a_media_path_is_refused(video_folder, make_project, tmp_path):
    # media/vid is a link to a folder outside the dataset, holding files under the names the rows give.
    outside = tmp_path / "outside"
    shutil.copytree(video_folder / "media" / "vid", outside)
    shutil.rmtree(video_folder / "media" / "vid")
    (video_folder / "media" / "vid").symlink_to(outside, target_is_directory=True)
    assert (video_folder / "media" / "vid" / "o0.mp4").is_file()  # reachable through the link

    (tmp_path / "work").mkdir()
    with pytest.raises(HFFolderError, match="leads outside the dataset folder"):
        hf_folder_to_jsonl(video_folder, tmp_path / "work")
    make_project("copy", "oscbench")
    with pytest.raises(CommandError, match=r"import refused: .*media/vid/o\d\.mp4: leads outside the dataset folder"):
        call_command("import_items", "copy", str(video_folder))
    assert not Item.objects.filter(project__slug="copy").exists()


def test_a_dataset_folder_linking_inside_itself_still_imports(video_folder, tmp_path):
    # A link whose target lies inside the folder reaches nothing else: containment is on the target.
    shutil.move(video_folder / "media" / "vid", video_folder / "media" / "real")
    (video_folder / "media" / "vid").symlink_to(video_folder / "media" / "real", target_is_directory=True)
    (tmp_path / "work").mkdir()
    jsonl = hf_folder_to_jsonl(video_folder, tmp_path / "work")
    assert len(jsonl.read_text().splitlines()) == 3  # the header and two items
