"""A job on a release reads the media the release froze (ReleaseItem.media), not the live item's: an
item whose media changed after the freeze still shows the release's bytes to a job on that release,
while a job without a release shows the item as it is now."""

from __future__ import annotations

import base64
import hashlib
import io
from pathlib import Path

import pytest
from PIL import Image

from annotation.models import Item, ReleaseItem
from annotation.releases import release_freeze
from inference import services
from inference.models import InferenceJob, JobStatus, Prediction
from inference.services.inputs import frozen_hashes, item_inputs, media_file

from . import factories
from .openai_standin import StandIn

V1_COLOUR = factories.colour(0)
EDITED_COLOUR = (250, 10, 200)


def _edit_after_the_freeze(project, tmp_path: Path):
    """Freeze v1, then point the first item's image_a to other bytes (as a later edit would)."""
    items = factories.status_items(project, 2, tmp_path)
    release = release_freeze(project=project, version="v1")
    edited = factories.asset(factories.image_file(tmp_path / "edited.png", EDITED_COLOUR), "image")
    before = dict(items[0].media)
    Item.objects.filter(pk=items[0].pk).update(media={**before, "image_a": edited.sha256})
    return items, release, before, edited


def _sha_of(path: str) -> str:
    return hashlib.sha256(Path(media_file(path)).read_bytes()).hexdigest()


def _shown_colour(data_url: str) -> tuple[int, int, int]:
    header, _, payload = data_url.partition(",")
    assert header.startswith("data:image/") and header.endswith(";base64")
    image = Image.open(io.BytesIO(base64.b64decode(payload))).convert("RGB")
    return image.getpixel((image.width // 2, image.height // 2))


def _near(a, b, slack: int = 12) -> bool:
    return all(abs(x - y) <= slack for x, y in zip(a, b))


@pytest.mark.django_db
def test_a_release_job_reads_the_frozen_media_and_a_live_job_the_items_media(make_project, tmp_path):
    project = make_project("st", "status")
    items, release, before, edited = _edit_after_the_freeze(project, tmp_path)
    frozen = ReleaseItem.objects.get(release=release, item=items[0]).media
    assert frozen == {"s0a.png": before["image_a"], "s0b.png": before["image_b"]}

    on_release = InferenceJob.objects.create(project=project, release=release, protocol="status", model_name="m")
    live = InferenceJob.objects.create(project=project, release=None, protocol="status", model_name="m")
    (first_v1, second_v1) = item_inputs(on_release, [items[0].pk, items[1].pk])
    (first_live,) = item_inputs(live, [items[0].pk])

    assert first_v1.media_hashes == before
    assert _sha_of(first_v1.media_paths["image_a"]) == before["image_a"]
    assert _sha_of(first_v1.media_paths["image_b"]) == before["image_b"]
    assert second_v1.media_hashes == items[1].media
    assert first_live.media_hashes == {**before, "image_a": edited.sha256}
    assert _sha_of(first_live.media_paths["image_a"]) == edited.sha256


def test_frozen_hashes_pair_each_field_with_the_path_its_line_names():
    line = {"images": ["a.png", "b.png", "c.png"], "video": "v.mp4", "other": "x.png", "cover": "lost.png"}
    frozen = {"a.png": "1" * 64, "b.png": "2" * 64, "v.mp4": "3" * 64, "x.png": "4" * 64}
    fields = {"images": "image", "video": "video", "cover": "image", "absent": "image"}
    # A path the freeze recorded no file for has no hash (c.png, lost.png); a field that is not a
    # media field (other) is not read.
    assert frozen_hashes(line, frozen, fields) == {"images": ["1" * 64, "2" * 64, None], "video": "3" * 64}
    assert frozen_hashes(line, {}, fields) == {"images": [None, None, None]}


@pytest.mark.django_db(transaction=True)
def test_a_job_on_v1_sends_v1s_bytes_after_the_item_was_edited(eager, make_project, tmp_path):
    standin = StandIn(faults=False).start()
    try:
        project = make_project("st", "status")
        items, release, _, _ = _edit_after_the_freeze(project, tmp_path)
        endpoint = services.endpoint_create(
            name="judge", backend="openai", model_id="standin-1", base_url=standin.base_url
        )
        job = services.job_create(endpoint=endpoint, project=project, release=release)
        job.refresh_from_db()
        assert job.status == JobStatus.FINISHED and Prediction.objects.filter(job=job).count() == 12

        # The edited item's initial image is shown as v1 froze it (black), never as edited.
        shown = [_shown_colour(url) for e in standin.events for url in e["images"]]
        assert shown, "no query sent an image"
        assert V1_COLOUR == (0, 0, 0) and any(_near(c, V1_COLOUR) for c in shown)
        assert not any(_near(c, EDITED_COLOUR, 60) for c in shown)

        # The same release, asked without it (the live items): the edit is what is shown.
        standin.events.clear()
        live = services.job_create(endpoint=endpoint, project=project, release=None)
        live.refresh_from_db()
        assert live.status == JobStatus.FINISHED
        shown = [_shown_colour(url) for e in standin.events for url in e["images"]]
        assert any(_near(c, EDITED_COLOUR) for c in shown)
    finally:
        standin.stop()
