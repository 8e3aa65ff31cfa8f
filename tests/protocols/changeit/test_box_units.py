"""Box units of an imported ChangeIt line (protocols/changeit/boxes.py): pixels by default, normalised
on request (turned into pixels with the image's size), and a pixel box that only makes sense as
normalised refused with that hint."""

from __future__ import annotations

import pytest

from annotation.importing import ImportRefused, items_import
from annotation.importing.samples import make_image
from annotation.models import Item, MediaAsset
from protocols import registry
from protocols.changeit.boxes import box_in_pixels, box_units, payload_box_in_pixels
from protocols.fields import Invalid
from tests.helpers.files import write_lines

HINT = (
    "box [0.1, 0.2, 0.3, 0.4] lies within 0–1 on a 160×120 image: as pixels it would be at most one pixel at "
    'the corner. If it holds fractions of the width and height, add "box_units": "normalised" to the line; '
    "otherwise give the box in pixels"
)


def test_a_normalised_box_becomes_pixels_of_its_image():
    assert box_in_pixels([0.1, 0.2, 0.3, 0.4], 200, 100, "normalised") == [20, 20, 60, 40]
    # Two decimals, as the box form stores them, and never past the image's edge.
    assert box_in_pixels([1 / 3, 0, 2 / 3, 1], 100, 50, "normalised") == [33.33, 0, 66.67, 50]


def test_a_normalised_box_outside_the_unit_square_is_refused():
    with pytest.raises(Invalid) as exc:
        box_in_pixels([0.5, 0.5, 0.6, 0.2], 200, 100, "normalised")
    assert exc.value.reason == (
        "box [0.5, 0.5, 0.6, 0.2] is given as normalised (box_units normalised) but is not a box of fractions 0–1 "
        "of the image: x + width and y + height must not pass 1"
    )
    with pytest.raises(Invalid):
        box_in_pixels([12, 30, 40, 20], 200, 100, "normalised")


def test_a_pixel_box_within_0_1_is_refused_with_the_hint_but_not_on_a_tiny_image():
    with pytest.raises(Invalid) as exc:
        box_in_pixels([0.1, 0.2, 0.3, 0.4], 160, 120)
    assert exc.value.reason == HINT
    assert box_in_pixels([0.1, 0.2, 0.3, 0.4], 3, 4) == [0.1, 0.2, 0.3, 0.4]
    assert box_in_pixels([0, 1, 1, 1], 2, 2) == [0, 1, 1, 1]


def test_a_pixel_box_is_kept_as_given():
    assert box_in_pixels([10, 20.5, 30, 1], 160, 120, "pixels") == [10, 20.5, 30, 1]


def test_the_units_field_takes_either_spelling_and_nothing_else():
    assert (box_units("pixels"), box_units("normalised"), box_units("normalized")) == (
        "pixels",
        "normalised",
        "normalised",
    )
    for bad in ("percent", "Pixels", 1, None):
        with pytest.raises(Invalid) as exc:
            box_units(bad)
        assert exc.value.reason == (
            "must be pixels (the default) or normalised (fractions 0–1 of the image's width and height)"
        )


def test_the_protocol_converts_a_payload_in_place_and_drops_the_units():
    proto = registry.get("changeit")
    payload = {"image": "a.png", "bbox": [0.25, 0.5, 0.5, 0.25], "box_units": "normalised"}
    assert proto.box_pixels(payload, 160, 120) is None
    assert payload == {"image": "a.png", "bbox": [40, 60, 80, 30]}
    raw = {"image": "a.png", "box_units": "normalised"}
    assert proto.box_pixels(raw, 160, 120) is None and raw == {"image": "a.png"}
    outcome = {"image": "a.png", "bbox": "nothing_to_label", "box_units": "normalised"}
    assert proto.box_pixels(outcome, 160, 120) is None and outcome["bbox"] == "nothing_to_label"
    assert payload_box_in_pixels({"bbox": [0.1, 0.2, 0.3, 0.4]}, 160, 120) == HINT


# --- through the importer -------------------------------------------------------------------------


@pytest.fixture
def lines_dir(tmp_path):
    make_image(tmp_path / "img" / "c0.png", 0, 0)  # 160×120
    return tmp_path


def changeit_line(**changes) -> dict:
    line = {"id": "c-1", "image": "img/c0.png", "object": "apple", "state": "whole apple"}
    line.update(changes)
    return line


@pytest.mark.django_db
def test_a_box_that_only_makes_sense_as_normalised_is_refused_and_nothing_written(lines_dir, make_project, _media_root):
    project = make_project("bu", "changeit")
    path = write_lines(lines_dir / "items.jsonl", [changeit_line(bbox=[0.1, 0.2, 0.3, 0.4])])

    with pytest.raises(ImportRefused) as exc:
        items_import(project=project, path=path)

    assert exc.value.errors == [f"line 1: field bbox: {HINT}"]
    assert Item.objects.count() == 0 and MediaAsset.objects.count() == 0
    assert [p for p in _media_root.rglob("*") if p.is_file()] == []


@pytest.mark.django_db
def test_a_normalised_box_is_stored_in_pixels_without_its_units(lines_dir, make_project):
    project = make_project("bu", "changeit")
    lines = [
        changeit_line(bbox=[0.1, 0.2, 0.3, 0.4], box_units="normalised"),
        changeit_line(id="c-2", bbox=[16, 24, 48, 48], box_units="pixels"),
        changeit_line(id="c-3"),
    ]
    path = write_lines(lines_dir / "items.jsonl", lines)

    report = items_import(project=project, path=path)

    assert (report.created, report.by_status) == (3, {"annotated": 2, "pending": 1})
    first, second = (Item.objects.get(external_id=i).payload for i in ("c-1", "c-2"))
    assert first == {"image": "img/c0.png", "object": "apple", "state": "whole apple", "bbox": [16, 24, 48, 48]}
    assert second == first
    # The same file again: what it would store is what is stored, so nothing changes.
    assert items_import(project=project, path=path).unchanged == 3


@pytest.mark.django_db
def test_a_normalised_box_past_the_image_is_refused_naming_the_line(lines_dir, make_project):
    project = make_project("bu", "changeit")
    path = write_lines(
        lines_dir / "items.jsonl",
        [changeit_line(), changeit_line(id="c-2", bbox=[0.5, 0.5, 0.6, 0.2], box_units="normalized")],
    )
    with pytest.raises(ImportRefused) as exc:
        items_import(project=project, path=path)
    assert exc.value.errors == [
        "line 2: field bbox: box [0.5, 0.5, 0.6, 0.2] is given as normalised (box_units normalised) but is not a "
        "box of fractions 0–1 of the image: x + width and y + height must not pass 1"
    ]
    assert Item.objects.count() == 0
