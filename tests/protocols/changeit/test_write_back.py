"""A verified ChangeIt-Frames release written back in the authors' shape (protocols/changeit/writing.py):
the authors' own loading logic finds every item's label in it, StateLab's boxes sit in a file of
their own beside the authors' files, and reading the export again gives the lines read from the
authors' release."""

from __future__ import annotations

import csv
import json
import re
import runpy
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from annotation.freezing import release_freeze
from annotation.importing import items_import
from annotation.interchange.authors import authors_export
from annotation.models import Item, ItemStatus
from protocols.changeit.formats import ChangeItFrames
from protocols.changeit.writing import BOXES_FILE
from tests.helpers.files import write_lines

from .authors_tree import EXACT_BOX, write_release

pytestmark = pytest.mark.django_db

FMT = ChangeItFrames()


@pytest.fixture
def checkout(tmp_path) -> Path:
    """The authors' checkout, less the one crop saved again as JPEG: such a crop cannot be placed
    in its frame, so it gives no box, and a release (which holds only its items' frames) cannot
    carry it back."""
    base = tmp_path / "object-states-repo"
    write_release(base)
    (base / "object-states/ChangeIT-Subset-Crop/vid_A/cropped_frame_0006.jpg").unlink()
    return base


# --- the authors' loading logic, written from what their utils/ scripts do ------------------------
# utils/dicts.py: for every category folder under object-states/utils/annotations, every label file
# (sorted) is read as a CSV without a header whose first column is the index; the video is the
# file name up to its first dot; the category maps to a list of (video, {second: label}).
# utils/golden_subset_annotations.py: imports `a` from classification_states; for each category's
# videos that have a folder in object-states/ChangeIT-Subset-Images, every .jpg there is looked up
# at position (the first number in its name) - 1 of the video's labels, in file order; the key is
# "<video>_<file name>" and the value (label, category).


def authors_cat_dicts(checkout: Path) -> dict[str, list[tuple[str, dict[int, int]]]]:
    directory = checkout / "object-states" / "utils" / "annotations"
    out: dict[str, list[tuple[str, dict[int, int]]]] = {}
    for category in directory.iterdir():
        if category.is_dir():
            out[category.name] = []
            for name in sorted(p.name for p in category.iterdir()):
                with open(category / name, newline="") as fh:
                    table = {int(row[0]): int(row[1]) for row in csv.reader(fh)}
                out[category.name].append((name.split(".")[0], table))
    return out


def authors_golden(checkout: Path, folder: str = "ChangeIT-Subset-Images") -> dict[str, tuple[int, str]]:
    base = checkout / "object-states" / folder
    videos = {p.name for p in base.iterdir() if p.is_dir()} if base.is_dir() else set()
    out = {}
    for category, per_video in authors_cat_dicts(checkout).items():
        for video, table in per_video:
            if video in videos:
                labels = list(table.values())
                for name in (n for n in (base / video).iterdir() if n.name.lower().endswith(".jpg")):
                    out[f"{video}_{name.name}"] = (labels[int(re.search(r"\d+", name.name).group()) - 1], category)
    return out


def authors_states(checkout: Path) -> dict:
    """`from classification_states import a`: the module run as Python, as their scripts import it."""
    return runpy.run_path(str(checkout / "object-states" / "utils" / "classification_states.py"))


# ---------------------------------------------------------------------------------------------------


def reviewed_lines(checkout: Path) -> tuple[list[dict], Path]:
    """The lines read from the authors' release, each with a box (the one placed from its crop, or
    one a reviewer drew: a verified ChangeIt item has its box), and their media root."""
    conversion = FMT.read(checkout)
    lines = list(conversion.lines)
    for n, line in enumerate(lines):
        line.setdefault("bbox", [1 + n, 2, 10, 8 + n])
    return lines, conversion.media_root


def verified_release(checkout: Path, tmp_path: Path, make_project):
    """Read, imported as verified, frozen: the project and its release v1."""
    lines, media_root = reviewed_lines(checkout)
    project = make_project("cf", "changeit")
    report = items_import(
        project=project, path=write_lines(tmp_path / "reviewed.jsonl", lines), media_root=media_root, verified=True
    )
    assert report.by_status == {"verified": len(lines)}
    return project, release_freeze(project=project, version="v1")


def test_the_export_is_what_the_authors_code_reads(checkout, tmp_path, make_project):
    project, release = verified_release(checkout, tmp_path, make_project)
    out = tmp_path / "export"
    summary = authors_export(release, "changeit-frames", out)
    assert summary["items"] == 8

    states = authors_states(out)
    assert states["a"] == {
        "apple": {"initial": ["whole apple"], "terminal": ["peeled apple", "cut apple"]},
        "beer": {"initial": ["empty glass"], "terminal": ["a glass full of beer"]},
        "candle": {"initial": ["unlit candle"], "terminal": ["lighted candle"]},
    }
    assert states["q"]["apple"] == ["whole apple", "peeled apple", "cut apple"]
    # Label files as ChangeIt's: "second,label" rows, no header, every second from 0; the seconds
    # that are no item (the action second 3, the background seconds 0 and 6) as the authors' file
    # had them, so the file comes back byte for byte.
    label_file = out / "object-states/utils/annotations/candle/vid_A.fps1.csv"
    assert label_file.read_bytes() == b"0,0\n1,1\n2,1\n3,2\n4,3\n5,3\n6,0\n"
    for category, video in (("candle", "vid_A"), ("apple", "-vid_B"), ("beer", "vid_C")):
        original = checkout / f"object-states/annotations/{category}/{video}.fps1.csv"
        exported = out / f"object-states/utils/annotations/{category}/{video}.fps1.csv"
        assert exported.read_bytes() == original.read_bytes(), (category, video)
    # The golden subset's frame, looked up as the authors' script does: second 4 of vid_A, end state.
    assert authors_golden(out) == {"vid_A_frame_0005.jpg": (3, "candle")}
    # Every exported frame, looked up the same way, carries its item's phase and category.
    for item in Item.objects.filter(project=project):
        extra = item.payload["extra"]
        found = authors_golden(out, extra["folder"])[f"{extra['video']}_frame_{extra['frame']:04d}.jpg"]
        names = states["a"][extra["category"]]["initial" if extra["phase"] == "initial" else "terminal"]
        assert found == (extra["label"], extra["category"]) and item.payload["state"] in names
    # Frames are the frozen bytes; the authors' files hold nothing of StateLab's.
    src = checkout / "object-states/ChangeIT-Frames-Full/-vid_B/frame_0003.jpg"
    assert (out / "object-states/ChangeIT-Frames-Full/-vid_B/frame_0003.jpg").read_bytes() == src.read_bytes()
    assert "bbox" not in (out / "object-states/utils/classification_states.py").read_text()
    boxes = json.loads((out / "object-states" / BOXES_FILE).read_text())
    assert boxes["format"] == "statelab-changeit-boxes"
    boxed = {e["id"]: e for e in boxes["items"]}
    assert boxed["candle/vid_A/frame_0005"]["bbox"] == EXACT_BOX
    assert boxed["candle/vid_A/frame_0005"]["image"] == "ChangeIT-Subset-Images/vid_A/frame_0005.jpg"
    assert boxed["candle/vid_A/frame_0002"]["bbox"] == item_box(project, "candle/vid_A/frame_0002")
    assert (out / "object-states/ChangeIT-Subset-Crop/vid_A/cropped_frame_0005.png").is_file()


def item_box(project, external_id: str) -> list:
    return Item.objects.get(project=project, external_id=external_id).payload["bbox"]


def test_read_import_freeze_export_read_gives_the_same_lines(checkout, tmp_path, make_project):
    first, _root = reviewed_lines(checkout)
    _project, release = verified_release(checkout, tmp_path, make_project)
    out = tmp_path / "export"
    authors_export(release, "changeit-frames", out)

    again = FMT.read(out)

    assert list(again.lines) == first
    assert any(BOXES_FILE in note for note in again.notes)


def test_a_reviewed_state_and_box_travel_back(checkout, tmp_path, make_project):
    """A reviewer's box on a frame with no crop and a confirmed state name (apple ends peeled or
    cut): the authors' files carry the label, the boxes file the box and the name, and reading
    the export gives the item as reviewed."""
    project, _ = verified_release(checkout, tmp_path, make_project)
    item = Item.objects.get(project=project, external_id="apple/-vid_B/frame_0003")
    item.payload = {**item.payload, "state": "cut apple", "bbox": [2, 3, 10, 12]}
    item.save()
    release = release_freeze(project=project, version="v2")
    out = tmp_path / "export"
    authors_export(release, "changeit-frames", out)

    assert (out / "object-states/utils/annotations/apple/-vid_B.fps1.csv").read_text() == "0,1\n1,2\n2,3\n"
    line = {x["id"]: x for x in FMT.read(out).lines}["apple/-vid_B/frame_0003"]
    assert (line["state"], line["bbox"]) == ("cut apple", [2, 3, 10, 12])
    assert line["distractors"] == ["whole apple", "peeled apple"]


def test_the_command_writes_the_folder_and_refuses_lines_without_provenance(checkout, tmp_path, make_project):
    verified_release(checkout, tmp_path, make_project)
    out = tmp_path / "cmd"
    call_command("export_release", "cf", "v1", "--format", "changeit-frames", "-o", str(out), stdout=StringIO())
    assert (out / "object-states/utils/classification_states.py").is_file()

    # An item made in StateLab with neither provenance nor an id that says where it goes.
    Item.objects.filter(project__slug="cf", external_id="beer/vid_C/frame_0001").update(
        external_id="my-own-item", status=ItemStatus.VERIFIED
    )
    bare = Item.objects.get(external_id="my-own-item")
    bare.payload = {k: v for k, v in bare.payload.items() if k != "extra"}
    bare.save()
    release_freeze(project=bare.project, version="v3")
    with pytest.raises(CommandError, match="my-own-item.*extra.category"):
        call_command(
            "export_release", "cf", "v3", "--format", "changeit-frames", "-o", str(tmp_path / "x"), stdout=StringIO()
        )
    assert not (tmp_path / "x").exists()


def test_lines_without_the_read_labels_write_background_between_items(tmp_path):
    """Items made elsewhere (no extra.video_labels): the seconds between items are background (0)."""
    lines = [
        {
            "id": "candle/vid_Q/frame_0001",
            "image": "f/vid_Q/frame_0001.jpg",
            "object": "candle",
            "state": "unlit candle",
            "distractors": ["lighted candle"],
            "extra": {"category": "candle", "video": "vid_Q", "frame": 1, "phase": "initial"},
        },
        {
            "id": "candle/vid_Q/frame_0004",
            "image": "f/vid_Q/frame_0004.jpg",
            "object": "candle",
            "state": "lighted candle",
            "distractors": ["unlit candle"],
            "extra": {"category": "candle", "video": "vid_Q", "frame": 4, "phase": "end"},
        },
    ]
    FMT.write(lines, tmp_path)
    written = tmp_path / "object-states/utils/annotations/candle/vid_Q.fps1.csv"
    assert written.read_text() == "0,1\n1,0\n2,0\n3,3\n"
