"""Arena items for the tests: two stored clips (or images) and the models that made them."""

from __future__ import annotations

from pathlib import Path

from annotation.importing.samples import make_image, make_video
from annotation.models import Item
from tests.browser.work_helpers import store

MODEL_NAMES = ("SECRET-model-alpha", "SECRET-model-beta", "SECRET-model-gamma")


def clips(tmp_path: Path) -> tuple[str, str]:
    """Two distinct 1 s videos (6 fps), stored as media assets: their sha256s."""
    return (
        store(make_video(tmp_path / "one.mp4", 0, frames=6, fps=6), "video"),
        store(make_video(tmp_path / "two.mp4", 1, frames=6, fps=6), "video"),
    )


def pictures(tmp_path: Path) -> tuple[str, str]:
    return (
        store(make_image(tmp_path / "one.png", 0, 0), "image"),
        store(make_image(tmp_path / "two.png", 1, 2), "image"),
    )


def make_pair(project, external_id: str, media: tuple[str, str], *, models=MODEL_NAMES[:2], kind="video", **extra):
    payload = {
        "prompt": f"A hand slices a tomato ({external_id})",
        "model_a": models[0],
        "model_b": models[1],
        f"{kind}_a": f"{external_id}-a",
        f"{kind}_b": f"{external_id}-b",
        **extra,
    }
    return Item.objects.create(
        project=project,
        external_id=external_id,
        payload=payload,
        media={f"{kind}_a": media[0], f"{kind}_b": media[1]},
    )
