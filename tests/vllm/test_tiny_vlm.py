"""The tiny model builder is deterministic to the byte."""

from __future__ import annotations

import json

import pytest

from inference.testing import tiny_vlm

pytestmark = pytest.mark.vllm


def test_a_fresh_build_is_byte_identical_to_the_shared_one(tiny_model_dir, tmp_path):
    fresh = tiny_vlm.build(tmp_path / "tiny", force=True)

    assert tiny_vlm.digest(fresh) == tiny_vlm.digest(tiny_model_dir)
    marker = json.loads((fresh / tiny_vlm.MARKER).read_text())
    assert marker["builder"] == tiny_vlm.BUILDER_VERSION
    assert marker["special_token_ids"]["<|image_pad|>"] == 485
    assert sorted(tiny_vlm.digest(fresh)) == [
        "chat_template.jinja",
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "processor_config.json",
        "statelab_tiny_vlm.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
