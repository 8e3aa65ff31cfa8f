"""A phone video (stored sideways, with a rotation players apply) is recorded at the size it is
shown, as an image with an EXIF orientation is: the import's inspection, the MediaAsset and the
item served to annotators say 120x160 for a stream stored 160x120 with a quarter turn, with or
without ffprobe."""

from __future__ import annotations

import json

import pytest

from annotation.importing import items_import
from annotation.importing.samples import sample_line
from annotation.media import probe as media_probe
from annotation.media.assets import inspect_media
from annotation.models import Item, MediaAsset, Role
from annotation.selectors import annotator_item_payload
from inference.media import make_test_video


@pytest.fixture
def phone_video(tmp_path):
    """160x120 as stored, 20 frames, shown turned a quarter (counterclockwise, as the display
    matrix says: the way a phone held upright records)."""
    return make_test_video(tmp_path / "phone.mp4", seconds=2, size="160x120", rate=10, rotation=90)


@pytest.mark.parametrize("ffprobe", [True, False], ids=["ffprobe", "ffmpeg -i"])
def test_the_import_inspection_records_a_rotated_video_as_shown(phone_video, monkeypatch, ffprobe):
    if ffprobe and media_probe.ffprobe_exe() is None:
        pytest.skip("no ffprobe on this machine")
    if not ffprobe:
        monkeypatch.setattr(media_probe, "ffprobe_exe", lambda: None)

    info = inspect_media(phone_video, "video")

    assert (info.width, info.height, info.frame_count, info.fps, info.duration) == (120, 160, 20, 10.0, 2.0)
    assert (info.kind, info.ext, info.mime) == ("video", ".mp4", "video/mp4")


@pytest.mark.django_db
def test_an_imported_rotated_video_is_stored_and_served_at_its_shown_size(
    make_project, make_user, tmp_path, phone_video
):
    annotator = make_user("ann")
    project = make_project("osc", "oscbench", members={annotator: Role.ANNOTATOR})
    lines = tmp_path / "items.jsonl"
    lines.write_text(json.dumps(sample_line("oscbench", 1, media={"video": phone_video.name})) + "\n")

    items_import(project=project, path=lines)

    asset = MediaAsset.objects.get()
    assert (asset.kind, asset.width, asset.height, asset.frame_count) == ("video", 120, 160, 20)
    served = annotator_item_payload(item=Item.objects.get())["video"]
    assert (served["width"], served["height"], served["fps"], served["duration"]) == (120, 160, 10.0, 2.0)
