"""The lmms-eval tier: StateLab's lmms-eval task folders loaded and run by lmms-eval itself.

Runs in its own environment (.ci/test-lmms builds .venv-lmms with lmms-eval 0.7.3, CPU only).
Where lmms-eval is not installed, as in the default .venv, every test here is skipped; with
STATELAB_REQUIRE_LMMS=1 (set by .ci/test-lmms) a missing lmms-eval is an error instead, so the
tier can never pass by skipping. Nothing is fetched: the Hugging Face libraries run offline.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

for _name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
    os.environ.setdefault(_name, "1")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("WANDB_MODE", "disabled")

HERE = Path(__file__).resolve().parent
LMMS_FOUND = importlib.util.find_spec("lmms_eval") is not None
REQUIRE_LMMS = os.environ.get("STATELAB_REQUIRE_LMMS") == "1"


def pytest_collection_modifyitems(config, items):
    mine = [item for item in items if HERE in Path(str(item.path)).resolve().parents]
    if LMMS_FOUND or not mine:
        return
    if REQUIRE_LMMS:
        raise pytest.UsageError("STATELAB_REQUIRE_LMMS=1 but lmms_eval is not importable here: run bash .ci/setup-lmms")
    skip = pytest.mark.skip(reason="lmms-eval is not installed in this environment (the tier runs with .ci/test-lmms)")
    for item in mine:
        item.add_marker(skip)
