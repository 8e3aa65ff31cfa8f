"""The ChangeIt-Frames release read as the authors published it (protocols/changeit/formats.py),
on a small tree the tests write in their layout (authors_tree.py), and imported through the
native item importer."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest

from annotation.importing import ImportRefused, items_import
from annotation.models import Item, MediaAsset
from protocols import registry
from protocols.changeit.formats import ChangeItFrames
from protocols.kit.releases import FormatRefused
from tests.helpers.files import write_lines

from .authors_tree import EXACT_BOX, write_labels, write_release

FMT = ChangeItFrames()


@pytest.fixture
def checkout(tmp_path) -> Path:
    """The authors' repository checkout: README.md and object-states/."""
    write_release(tmp_path / "object-states-repo")
    return tmp_path / "object-states-repo"


def by_id(conversion) -> dict[str, dict]:
    return {line["id"]: line for line in conversion.lines}


def test_the_format_is_the_changeit_protocols():
    assert registry.get("changeit").format_named("changeit-frames", "items") is not None
    assert [f.name for f in registry.get("changeit").formats] == ["changeit-frames"]


def test_detect_takes_the_checkout_or_its_release_folder_and_nothing_else(checkout, tmp_path):
    assert FMT.detect(checkout) and FMT.detect(checkout / "object-states")
    assert not FMT.detect(checkout / "object-states" / "utils" / "classification_states.py")
    assert not FMT.detect(checkout / "object-states" / "ChangeIT-Frames-Full")
    (checkout / "object-states" / "utils" / "classification_states.py").unlink()
    assert not FMT.detect(checkout)


def test_items_are_the_state_frames_with_state_distractors_and_provenance(checkout):
    conversion = FMT.read(checkout)

    lines = by_id(conversion)
    assert list(lines) == [
        "apple/-vid_B/frame_0001",
        "apple/-vid_B/frame_0003",
        "beer/vid_C/frame_0001",
        "beer/vid_C/frame_0002",
        "candle/vid_A/frame_0002",
        "candle/vid_A/frame_0003",
        "candle/vid_A/frame_0005",
        "candle/vid_A/frame_0006",
    ]
    assert conversion.media_root == (checkout / "object-states").resolve()
    # Frame 6 is second 5, an end state; its crop was saved again as JPEG: no box.
    assert lines["candle/vid_A/frame_0006"] == {
        "id": "candle/vid_A/frame_0006",
        "image": "ChangeIT-Frames-Full/vid_A/frame_0006.jpg",
        "object": "candle",
        "state": "lighted candle",
        "distractors": ["unlit candle"],
        "extra": {
            "category": "candle",
            "video": "vid_A",
            "frame": 6,
            "second": 5,
            "label": 3,
            "phase": "end",
            "folder": "ChangeIT-Frames-Full",
            # The video's label file as read, one digit per second (the export writes it back).
            "video_labels": "0112330",
            "crop": "ChangeIT-Subset-Crop/vid_A/cropped_frame_0006.jpg",
        },
    }
    # The golden subset's frame 5, whose crop is an exact sub-image: the box is pre-filled.
    golden = lines["candle/vid_A/frame_0005"]
    assert golden["image"] == "ChangeIT-Subset-Images/vid_A/frame_0005.jpg"
    assert golden["bbox"] == EXACT_BOX and golden["tags"] == ["golden-subset"]
    assert golden["extra"]["crop"] == "ChangeIT-Subset-Crop/vid_A/cropped_frame_0005.png"
    # Apple's end state has two names the labels cannot tell apart: the first is proposed.
    assert lines["apple/-vid_B/frame_0003"]["state"] == "peeled apple"
    assert lines["apple/-vid_B/frame_0003"]["distractors"] == ["whole apple", "cut apple"]
    assert lines["apple/-vid_B/frame_0003"]["tags"] == ["state-to-confirm"]
    assert lines["apple/-vid_B/frame_0003"]["extra"]["state_choices"] == ["peeled apple", "cut apple"]
    assert lines["apple/-vid_B/frame_0001"]["state"] == "whole apple" and "tags" not in lines["apple/-vid_B/frame_0001"]
    # a's names, not q's: beer's end state is "a glass full of beer".
    assert lines["beer/vid_C/frame_0001"]["state"] == "a glass full of beer"
    assert [line.get("bbox") for line in conversion.lines].count(None) == 7


def test_the_report_says_what_was_mapped_and_left_out(checkout):
    notes = FMT.read(checkout).notes

    assert notes == [
        "8 items from 3 videos of 3 categories: 4 initial-state and 4 end-state frames (state names from a in "
        "utils/classification_states.py, labels from annotations/<category>/<video>.fps1.csv; frame N shows "
        "second N − 1)",
        "1 frame of the golden subset (ChangeIT-Subset-Images) tagged golden-subset",
        "distractors: the category's other state names (the paper's distractor prompts are not in the release)",
        "frames that are not items (their second shows no state): 2 action, 2 background, 1 with no label for "
        "their second",
        "the labels do not say which of several state names applies (apple end: peeled apple / cut apple): the "
        "first is proposed, the items are tagged state-to-confirm, and the annotator confirms or corrects it",
        "1 frame folder without a label file, not read: vid_Z",
        "crops (ChangeIT-Subset-Crop): 1 located as exact sub-images of their frame, box pre-filled in pixels "
        "(those items arrive annotated, for review); 1 not located, boxes drawn in the app (1 not an exact "
        "sub-image of its frame); 1 of frames that are not items",
        "a's state names used where q names a state otherwise (beer: q also names 'cup full of beer')",
        "1 file in the frame folders not named frame_NNNN.jpg, ignored",
    ]


def test_the_state_file_is_parsed_never_run(checkout):
    # authors_tree.STATES opens with `raise SystemExit(...)`: a reader that ran it would stop here.
    assert FMT.read(checkout).lines
    states = checkout / "object-states" / "utils" / "classification_states.py"
    states.write_text('a = dict(candle={"initial": ["unlit candle"], "terminal": ["lighted candle"]})\n')
    with pytest.raises(FormatRefused) as exc:
        FMT.read(checkout)
    assert str(exc.value) == (
        "utils/classification_states.py: a is not a literal dict (found an expression that would have to run)"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "q = {}\n",
            'utils/classification_states.py: no dict a; expected a = {category: {"initial": [...], "terminal": [...]}}',
        ),
        (
            'a = {"candle": {"initial": "unlit candle", "terminal": ["lighted candle"]}}\n',
            "utils/classification_states.py: a['candle'] is not "
            '{"initial": [state names], "terminal": [state names]}',
        ),
        ("a = {\n", "utils/classification_states.py: not readable Python (SyntaxError); expected the dicts a and q"),
    ],
)
def test_a_state_file_of_another_shape_is_refused(checkout, text, message):
    (checkout / "object-states" / "utils" / "classification_states.py").write_text(text)
    with pytest.raises(FormatRefused) as exc:
        FMT.read(checkout)
    assert str(exc.value) == message


def test_a_category_with_frames_but_no_state_names_is_refused(checkout):
    write_labels(checkout / "object-states" / "annotations" / "tie" / "vid_Z.fps1.csv", [1])
    with pytest.raises(FormatRefused) as exc:
        FMT.read(checkout)
    assert str(exc.value) == (
        "utils/classification_states.py: a names no states for tie, whose videos have frames; "
        'expected a[category] = {"initial": [...], "terminal": [...]}'
    )


def test_a_bad_label_row_is_refused_naming_file_and_row(checkout):
    (checkout / "object-states" / "annotations" / "candle" / "vid_A.fps1.csv").write_text("0,0\n1,1\n2,4\n")
    with pytest.raises(FormatRefused) as exc:
        FMT.read(checkout)
    assert str(exc.value) == (
        "annotations/candle/vid_A.fps1.csv: row 3: expected 'second,label' (a whole second and a label 0–3), "
        "found '2,4'"
    )


def test_without_label_files_the_refusal_says_where_they_go(checkout):
    shutil.rmtree(checkout / "object-states" / "annotations")
    with pytest.raises(FormatRefused) as exc:
        FMT.read(checkout)
    assert str(exc.value) == (
        "object-states: no per-second labels; expected annotations/<category>/<video>.fps1.csv "
        "(the annotations folder of soCzech/ChangeIt) next to the frame folders"
    )


def test_labels_where_the_authors_code_reads_them_with_a_header_row(checkout):
    release = checkout / "object-states"
    shutil.move(release / "annotations", release / "utils" / "annotations")
    (release / "utils" / "annotations" / "candle" / "vid_A.fps1.csv").write_text(
        "second,label\n0,0\n1,3\n2,1\n3,2\n4,3\n5,3\n6,0\n"
    )
    lines = by_id(FMT.read(checkout))
    assert (lines["candle/vid_A/frame_0002"]["state"], lines["candle/vid_A/frame_0003"]["state"]) == (
        "lighted candle",
        "unlit candle",
    )


def test_a_video_labelled_under_two_categories_gives_an_item_in_each(checkout):
    write_labels(checkout / "object-states" / "annotations" / "beer" / "vid_A.fps1.csv", [0, 3])
    conversion = FMT.read(checkout)
    lines = by_id(conversion)
    assert lines["beer/vid_A/frame_0002"]["image"] == lines["candle/vid_A/frame_0002"]["image"]
    assert (lines["beer/vid_A/frame_0002"]["state"], lines["candle/vid_A/frame_0002"]["state"]) == (
        "a glass full of beer",
        "unlit candle",
    )
    assert "videos labelled under several categories, each frame an item of each: vid_A (beer, candle)" in (
        conversion.notes
    )


def test_media_paths_follow_a_media_root_above_the_release_and_refuse_one_beside_it(checkout, tmp_path):
    conversion = FMT.read(checkout, media_root=checkout)
    assert conversion.media_root == checkout.resolve()
    image = by_id(conversion)["candle/vid_A/frame_0005"]["image"]
    assert image == "object-states/ChangeIT-Subset-Images/vid_A/frame_0005.jpg"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with pytest.raises(FormatRefused) as exc:
        FMT.read(checkout, media_root=elsewhere)
    assert str(exc.value) == (
        "object-states: the release folder is not inside the media root elsewhere; give a media root that holds "
        "it, or none"
    )


# --- through the native importer -------------------------------------------------------------------


@pytest.mark.django_db
def test_the_converted_release_imports_raw_items_and_one_boxed(checkout, tmp_path, make_project):
    project = make_project("cf", "changeit")
    conversion = FMT.read(checkout)
    jsonl = write_lines(tmp_path / "changeit-frames.jsonl", list(conversion.lines))

    report = items_import(project=project, path=jsonl, media_root=conversion.media_root)

    assert (report.lines, report.created) == (8, 8)
    assert report.by_status == {"pending": 7, "annotated": 1}
    boxed = Item.objects.get(project=project, external_id="candle/vid_A/frame_0005")
    assert boxed.status == "annotated" and boxed.tags == ["golden-subset"]
    assert boxed.payload["bbox"] == EXACT_BOX and boxed.payload["state"] == "lighted candle"
    raw = Item.objects.get(project=project, external_id="apple/-vid_B/frame_0003")
    assert raw.status == "pending" and "bbox" not in raw.payload
    assert (raw.payload["object"], raw.payload["state"]) == ("apple", "peeled apple")
    assert raw.tags == ["state-to-confirm"]
    assert raw.payload["extra"] == by_id(conversion)["apple/-vid_B/frame_0003"]["extra"]  # provenance kept
    # The report names the provenance fields once.
    assert report.kept_fields == [
        "category",
        "crop",
        "folder",
        "frame",
        "label",
        "phase",
        "second",
        "state_choices",
        "video",
        "video_labels",
    ]
    assert MediaAsset.objects.count() == 8
    assert set(MediaAsset.objects.values_list("width", "height")) == {(48, 36)}

    again = items_import(project=project, path=jsonl, media_root=conversion.media_root)
    assert (again.created, again.unchanged) == (0, 8)


@pytest.mark.django_db
def test_the_checkout_imports_in_one_call_reporting_the_format_and_notes(checkout, make_project):
    project = make_project("cf", "changeit")

    report = items_import(project=project, path=checkout)

    assert (report.format, report.created, report.by_status) == ("changeit-frames", 8, {"pending": 7, "annotated": 1})
    assert report.notes == FMT.read(checkout).notes
    boxed = Item.objects.get(project=project, external_id="candle/vid_A/frame_0005")
    assert boxed.payload["bbox"] == EXACT_BOX
    assert boxed.payload["extra"]["crop"] == "ChangeIT-Subset-Crop/vid_A/cropped_frame_0005.png"


@pytest.mark.django_db
def test_the_checkout_uploaded_as_a_zip_imports_from_inside_it(checkout, tmp_path, make_project):
    archive = tmp_path / "object-states.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for p in sorted(checkout.rglob("*")):
            if p.is_file():
                zf.write(p, p.relative_to(checkout.parent).as_posix())

    report = items_import(project=make_project("cf", "changeit"), path=archive, confined=True)

    assert (report.format, report.created, report.media_files) == ("changeit-frames", 8, 8)
    item = Item.objects.get(external_id="candle/vid_A/frame_0005")
    # Relative to the media root the importer picks inside the extracted zip.
    assert item.payload["image"].endswith("ChangeIT-Subset-Images/vid_A/frame_0005.jpg")
    assert item.payload["bbox"] == EXACT_BOX


@pytest.mark.django_db
def test_a_box_in_the_converted_lines_must_lie_in_its_frame(checkout, tmp_path, make_project):
    project = make_project("cf", "changeit")
    conversion = FMT.read(checkout)
    lines = json.loads(json.dumps(list(conversion.lines)))  # plain JSON, as a file holds them
    boxed = next(line for line in lines if "bbox" in line)
    boxed["bbox"] = [40, 30, 20, 14]  # leaves the 48×36 frame
    jsonl = write_lines(tmp_path / "changeit-frames.jsonl", lines)

    with pytest.raises(ImportRefused) as exc:
        items_import(project=project, path=jsonl, media_root=conversion.media_root)

    assert exc.value.errors == ["line 7: field bbox: box [40, 30, 20, 14] leaves the 48×36 image"]
    assert Item.objects.count() == 0 and MediaAsset.objects.count() == 0
